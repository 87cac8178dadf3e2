"""The OpenAI-compatible HTTP model against a stub server started here on 127.0.0.1: the
answers, the request body, the key from the environment, retries after a 429 (Retry-After)
and after a timeout, the disk cache (a rerun makes no call), and a whole run through the
CLI with multiple choice by generation (no JAX needed)."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from babeleval.errors import BabelevalError
from babeleval.remote.openai import OpenAIModel
from babeleval.requests import Generate


class Stub(BaseHTTPRequestHandler):
    calls, bodies, headers = [], [], []
    fail_first = {}  # prompt -> "429" | "slow" | "500": how its first call fails

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][0]["content"] if "messages" in body else body["prompt"]
        Stub.calls.append(self.path)
        Stub.bodies.append(body)
        Stub.headers.append(dict(self.headers))
        failure = Stub.fail_first.pop(prompt, None)
        if failure == "slow":
            time.sleep(1.5)
        if failure in ("429", "500"):
            self.send_response(int(failure))
            self.send_header("Retry-After", "0")
            self.end_headers()
            self.wfile.write(b'{"error": "busy"}')
            return
        answer = "B. the second" if "Which" in prompt else f"echo {len(prompt)}\nmore"
        choice = {"message": {"content": answer}} if "messages" in body else {"text": answer}
        reply = {"choices": [{**choice, "finish_reason": "stop"}], "usage": {"completion_tokens": 3}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture()
def server():
    Stub.calls.clear(), Stub.bodies.clear(), Stub.headers.clear(), Stub.fail_first.clear()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def test_answers_body_key_retries_and_cache(server, tmp_path, monkeypatch):
    monkeypatch.setenv("STUB_KEY", "sk-test")
    model = OpenAIModel("stub-1", server, "chat", "STUB_KEY", concurrency=4, timeout=0.5, backoff=0.01,
                        cache=tmp_path / "cache.jsonl")
    prompts = [f"prompt {i}" for i in range(6)]
    Stub.fail_first.update({"prompt 1": "429", "prompt 2": "slow", "prompt 3": "500"})
    results = model.generate_results([Generate(p, ("\n",), 16) for p in prompts])
    assert [r.text for r in results] == [f"echo {len(p)}" for p in prompts]  # cut at the stop string
    assert all(r.stop_reason == "stop" and r.new_tokens == 3 for r in results)
    assert model.stats.retries == 3 and model.stats.http_calls == 9 and len(Stub.calls) >= 9
    assert Stub.calls[0] == "/v1/chat/completions" and Stub.headers[0]["Authorization"] == "Bearer sk-test"
    assert Stub.bodies[0]["temperature"] == 0 and Stub.bodies[0]["max_tokens"] == 16 and Stub.bodies[0]["stop"] == ["\n"]
    again = OpenAIModel("stub-1", server, "chat", "STUB_KEY", cache=tmp_path / "cache.jsonl")
    calls = len(Stub.calls)
    assert [r.text for r in again.generate_results([Generate(p, ("\n",), 16) for p in prompts])] == [r.text for r in results]
    assert len(Stub.calls) == calls and again.stats.from_cache == 6  # a rerun costs nothing


def test_completions_mode_character_budget_and_errors(server, tmp_path):
    model = OpenAIModel("stub-2", server, "completions", backoff=0.01, retries=1, cache=tmp_path / "c.jsonl")
    result, = model.generate_results([Generate("hello", (), 8, max_new_chars=4)])
    assert Stub.calls[-1] == "/v1/completions" and Stub.bodies[-1]["prompt"] == "hello" and "stop" not in Stub.bodies[-1]
    assert result.text == "echo" and result.stop_reason == "length"
    Stub.fail_first["busy"] = "429"
    busy = OpenAIModel("stub-2", server, "completions", backoff=0.01, retries=0, cache=tmp_path / "d.jsonl")
    with pytest.raises(BabelevalError, match=r"/v1/completions: HTTP 429"):
        busy.generate_results([Generate("busy", (), 8)])
    with pytest.raises(BabelevalError, match="API mode 'chats' is not one of chat, completions"):
        OpenAIModel("x", server, "chats")
    dead = OpenAIModel("x", "http://127.0.0.1:9/v1", retries=1, backoff=0.01, timeout=0.5, cache=tmp_path / "e.jsonl")
    with pytest.raises(BabelevalError, match="no answer after 2 tries"):
        dead.generate_results([Generate("hi", (), 8)])


def test_multiple_choice_by_generation_through_the_cli(server, tmp_path, monkeypatch):
    monkeypatch.setenv("BABELEVAL_CACHE", str(tmp_path / "cache"))
    rows = [{"id": str(i), "question": "Which?", "a": "first", "b": "second", "c": "third", "answer": i} for i in range(3)]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "t.yaml").write_text(
        f"name: which\nkind: multiple_choice\ndata: {{path: {data}}}\nprompt: '{{{{ question }}}}'\n"
        "choices: [a, b, c]\ntarget: answer\nscoring: generate\ngeneration: {max_new_tokens: 8}\n", encoding="utf-8")
    out = tmp_path / "run"
    result = CliRunner().invoke(cli_main(), ["run", "--quiet", "--model", "openai:stub-3", "--api-base", server,
                                             "--task", str(tmp_path / "t.yaml"), "--output", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "results.json").read_text())
    assert summary["model"]["arch"] == "http" and summary["tasks"]["which"]["metrics"]["acc"] == pytest.approx(1 / 3)
    assert summary["engine"]["http"]["requests"] == 3 and summary["tasks"]["which"]["metrics"]["no_answer"] == 0.0


def cli_main():
    from babeleval.cli.main import cli

    return cli
