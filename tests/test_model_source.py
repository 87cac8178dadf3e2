"""A model spec is resolved once, at the run's edge, into one ModelSource (loading/source.py) that
every consumer reads: evaluate resolves a hub id once (one download, tested offline on a local
hub cache as test_hub.py does) however many times the model is loaded, and the chat template,
the loader and lm-eval's backend take that description instead of resolving the spec again."""
import json
import shutil
import sys

from test_bad_input import ROW, TASK, byte_model

TEMPLATE = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>"


def hub_copy(tmp_path, monkeypatch, folder, repo: str):
    """folder laid out in an offline hub cache as huggingface_hub writes a snapshot of repo."""
    import huggingface_hub.constants as constants

    org, name = repo.split("/")
    snapshot = tmp_path / "hub" / f"models--{org}--{name}" / "snapshots" / ("a" * 40)
    shutil.copytree(folder, snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("a" * 40)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return snapshot


def counted(monkeypatch, module, name: str) -> list:
    """Calls of module.name from now on (the function still runs)."""
    calls, original = [], getattr(module, name)

    def wrapper(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def resolving_module():
    import babeleval.loading as loading

    return sys.modules[loading.resolve.__module__]  # where resolve and the hub download are called from


def test_a_run_resolves_its_model_once(tmp_path, monkeypatch):
    """A chatted task on a hub id loaded twice (two --quantize choices): one resolve, one download;
    the model's own chat template is the one the run used."""
    from babeleval.evaluate import evaluate

    folder = byte_model(tmp_path / "bytes")
    (folder / "chat_template.jinja").write_text(TEMPLATE)
    snapshot = hub_copy(tmp_path, monkeypatch, folder, "babel/tiny-bytes")
    home = resolving_module()
    resolves, downloads = counted(monkeypatch, home, "resolve"), counted(monkeypatch, home, "download")
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps(ROW) + "\n")
    task = tmp_path / "mine.yaml"
    task.write_text(TASK.format(data=data, prompt="{{ question }}", extra="chat: {template: model}\n"))
    runs = evaluate("babel/tiny-bytes", [str(task)], tmp_path / "out", progress=False, compile_cache=False,
                    quantize=["keep", "none"], log=lambda message: None)["runs"]
    assert (len(resolves), len(downloads)) == (1, 1)
    for run in runs.values():
        assert run["model"]["source"] == str(snapshot)
        assert run["tasks"]["mine"]["chat"]["template"] == str(snapshot / "chat_template.jinja")


def test_consumers_read_the_source_without_resolving(tmp_path, monkeypatch):
    """load_model takes a ModelSource (or a spec: resolved to one) and keeps it; the chat template
    is read from it (chat.py resolves nothing); lm-eval's backend hands it on."""
    from babeleval.chat import ChatTemplate
    from babeleval.lm_eval.model import BabelevalLM
    from babeleval.loading import load_model, model_source

    folder = byte_model(tmp_path / "bytes")
    (folder / "chat_template.jinja").write_text(TEMPLATE)
    source = model_source(str(folder))
    assert (source.path, source.format, source.quantization) == (folder, "checkpoint", None)
    assert source.config["arch"] == "bytelm" and source.chat_template == TEMPLATE
    assert source == model_source(str(folder)) and hash(source) == hash(model_source(str(folder)))
    resolves = counted(monkeypatch, resolving_module(), "resolve")
    model = load_model(source)
    assert model.model_source is source and model.source == str(folder)
    assert ChatTemplate.from_model(source).render([{"role": "user", "content": "x"}]) == "<user>x<assistant>"
    assert ChatTemplate.from_model(model).origin == str(folder / "chat_template.jinja")
    assert BabelevalLM(source).apply_chat_template([{"role": "user", "content": "y"}]) == "<user>y<assistant>"
    assert resolves == []
    assert load_model(str(folder)).model_source == source and len(resolves) == 1


def test_a_gguf_source_reads_the_header_only():
    """The packaged SmolLM2 GGUF: its metadata, template and special tokens from the header."""
    from babeleval.loading import model_source

    source = model_source("smollm2-135m")
    assert source.format == "gguf" and source.path.suffix == ".gguf"
    assert source.config["general.architecture"] == "llama"
    template, origin, special = source.chat
    assert "<|im_start|>" in template and origin.endswith("(tokenizer.chat_template)")
    assert special["eos_token"] == source.config["tokenizer.ggml.tokens"][source.config["tokenizer.ggml.eos_token_id"]]
