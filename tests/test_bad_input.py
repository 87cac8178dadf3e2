"""Every bad input docs/troubleshooting.md lists: one line naming the file, line and
field (or the option), exit code 2, no traceback, and no results.json written."""
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from babeleval.cli.main import cli

TASK = """name: mine
kind: multiple_choice
data: {{path: {data}}}
prompt: "{prompt}"
choices: [a, b, c]
target: answer
{extra}"""
ROW = {"id": "1", "question": "Which day follows Monday?", "a": "Tuesday", "b": "Friday", "c": "Sunday", "answer": 0}


def run(*args):
    return CliRunner().invoke(cli, ["run", "--quiet", *map(str, args)])


def task_file(tmp_path, rows, prompt="{{ question }}", extra="", name="rows.jsonl", raw=None) -> Path:
    data = tmp_path / name
    if raw is not None:
        data.write_bytes(raw)
    else:
        data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    path = tmp_path / "mine.yaml"
    path.write_text(TASK.format(data=data, prompt=prompt, extra=extra), encoding="utf-8")
    return path


def refused(result, *messages):
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert "Traceback" not in result.output and len(errors) == 1 and result.output.strip().endswith(errors[0]), \
        result.output  # progress lines ("loading ...") may come before it
    for message in messages:
        assert message in result.output, result.output


CASES = {
    "missing field": ([{k: v for k, v in ROW.items() if k != "b"}], {}, ["rows.jsonl:1", "'b'"]),
    # rows that can be scored are kept by default (tests/test_bad_rows.py); bad_rows: error refuses them
    "unknown answer label": ([{**ROW, "answer": "Z"}], {"extra": "bad_rows: {unknown_target: error}"},
                             ["rows.jsonl:1", "'Z' is not an option", "bad_rows: {unknown_target: keep}"]),
    "empty choice": ([{**ROW, "b": ""}], {"extra": "bad_rows: {empty_choice: error}"},
                     ["rows.jsonl:1", "choice 2 of 3 is empty"]),
    "duplicate choices": ([{**ROW, "c": "Tuesday"}], {"extra": "bad_rows: {duplicate_choices: error}"},
                          ["rows.jsonl:1", "duplicate", "Tuesday"]),
    "duplicate ids": ([ROW, ROW], {}, ["rows.jsonl:2", "duplicate document id '1'", "rows.jsonl:1"]),
    "template names a missing field": ([ROW], {"prompt": "{{ question }} {{ hint }}"}, ["rows.jsonl:1", "hint"]),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_rows(tmp_path, case):
    rows, kw, messages = CASES[case]
    refused(run("--task", task_file(tmp_path, rows, **kw), "--output", tmp_path / "out"), *messages)
    assert not (tmp_path / "out").exists()


def test_not_utf8_and_malformed_csv(tmp_path):
    raw = (json.dumps(ROW) + "\n" + json.dumps({**ROW, "id": "2"})[:-2]).encode() + b"\xe9\"}\n"
    refused(run("--task", task_file(tmp_path, [], raw=raw), "--output", tmp_path / "out"),
            "rows.jsonl:2: not UTF-8 (byte 0xe9)")
    csv = b"id,question,a,b,c,answer\n1,Which?,x,y,z,0\n2,Which?,x,y\n"
    refused(run("--task", task_file(tmp_path, [], raw=csv, name="rows.csv"), "--output", tmp_path / "out"),
            "rows.csv:3: 4 fields, the header has 6")


def test_unknown_names_suggest_close_matches(tmp_path):
    refused(run("--task", "xcopa-ordres", "--output", tmp_path / "out"), "unknown task 'xcopa-ordres'", "xcopa-orders")
    refused(run("--task", "xcopa:swx", "--output", tmp_path / "out"), "unknown subset 'swx' (did you mean sw?)")
    refused(run("--model", "smollm2-135", "--task", "cldr-weekdays:fr", "--output", tmp_path / "out"),
            "smollm2-135: no such file", "(did you mean smollm2-135m?)")
    refused(run("--task", task_file(tmp_path, [ROW], extra="metrics: [acc, acc_nrom]\n"), "--output", tmp_path / "out"),
            "acc_nrom", "acc_norm")


def test_bad_options(tmp_path):
    for args, message in ((["--batch-size", "x"], "'x': expected 'auto' or a whole number >= 1"),
                          (["--batch-size", "0"], "'0': expected 'auto' or a whole number >= 1"),
                          (["--limit", "-1"], "-1 is not in the range x>=1"),
                          (["--fewshot", "-2"], "-2 is not in the range x>=0"),
                          (["--choice-orders", "orginal"], "orginal")):
        result = run(*args, "--task", "cldr-weekdays:fr", "--output", tmp_path / "out")
        assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output, result.output
    assert not (tmp_path / "out" / "results.json").exists()


def test_corrupt_and_partial_model_files(tmp_path):
    from babeleval.loading import DEFAULT_MODEL, resolve

    gguf = Path(resolve(DEFAULT_MODEL))
    partial = tmp_path / "partial.gguf"
    with gguf.open("rb") as src:
        partial.write_bytes(src.read(gguf.stat().st_size // 3))
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"not a gguf file at all" * 100)
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama", "hidden_size": 64')
    cut = byte_model(tmp_path / "cut")  # a babeleval checkpoint with one parameter file cut short
    data_file = max((f for f in (cut / "params").rglob("*") if f.is_file()), key=lambda f: f.stat().st_size)
    data_file.write_bytes(data_file.read_bytes()[:100])
    missing = byte_model(tmp_path / "missing")  # and one copied without its data files
    shutil.rmtree(next((missing / "params").glob("ocdbt.process_*")))
    for path, message in ((partial, "partial.gguf: not a readable GGUF file"), (garbage, "garbage.gguf"),
                          (folder, "config.json:1: invalid JSON"), (cut, "cut: a corrupt babeleval checkpoint"),
                          (missing, "missing: a partial babeleval checkpoint")):
        refused(run("--model", path, "--task", "cldr-weekdays:fr", "--output", tmp_path / "out"), message)
        result = CliRunner().invoke(cli, ["info", str(path)])
        refused(result, message)
    assert not (tmp_path / "out" / "results.json").exists()


def test_unwritable_output_folder(tmp_path):
    locked = Path("/proc/babeleval-run")  # no one may create a folder there, root included
    refused(run("--task", "cldr-weekdays:fr", "--output", locked), "/proc/babeleval-run: cannot create the output folder")


def test_output_that_is_a_file_or_full_disk(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    refused(run("--task", "cldr-weekdays:fr", "--output", blocker / "run"), "cannot create the output folder")
    model = byte_model(tmp_path / "model")  # what a full disk does to a run does not depend on the model
    import babeleval.results as results

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(results.os, "fsync", full)  # the disk fills while results.json is written
    out = tmp_path / "out"
    refused(run("--model", model, "--task", "cldr-weekdays:fr", "--output", out), "results.json", "No space left on device")
    assert not (out / "results.json").exists() and not list(out.glob(".results.json*"))
    assert len((out / "samples_cldr-weekdays.jsonl").read_text().splitlines()) == 7  # the work is kept


def byte_model(folder: Path) -> Path:
    """A random byte-level GPT of 64 positions (a 100-character question does not fit)."""
    import jax
    import jax.numpy as jnp

    from babeleval.loading import LoadedModel
    from babeleval.loading.tokenizer import ByteTokenizer
    from babeleval.models import init_params
    from babeleval.models.bytelm import bytelm_config

    config = bytelm_config(layers=1, hidden=32, context=64)
    return LoadedModel(config, init_params(config, jax.random.PRNGKey(0)), ByteTokenizer(), jnp.float32, "tiny").save(folder)


def test_prompts_longer_than_the_model_are_cut_counted_and_warned_once(tmp_path):
    long = "Which day follows Monday, and which one follows Friday in the calendar of the week? " * 2  # 168 bytes
    rows = [{**ROW, "id": "1", "question": long}, {**ROW, "id": "2", "question": long + "again"}, {**ROW, "id": "3"}]
    out = tmp_path / "out"
    result = run("--model", byte_model(tmp_path / "tiny"), "--task", task_file(tmp_path, rows), "--output", out)
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "longer than 64 tokens" in warnings[0] and "cut from the left" in warnings[0]
    summary = json.loads((out / "results.json").read_text())
    assert summary["engine"]["scoring"]["truncated"] == 6  # 2 documents x 3 options
    assert summary["tasks"]["mine"]["truncated"] == 6 and summary["tasks"]["mine"]["metrics"]["n"] == 3
    log = (out / "run.log").read_text()
    assert "longer than 64 tokens" in log and "task mine: acc" in log and "wrote " in log


def test_generation_prompts_are_cut_from_the_left_and_counted(tmp_path):
    from babeleval.engine.generate import Generator
    from babeleval.loading import load_model

    generator = Generator(load_model(str(byte_model(tmp_path / "tiny"))))
    text = "".join(f"{i:03d} " for i in range(40))  # 160 bytes
    kept = generator.prompt_tokens(text, 8)
    assert len(kept) == 64 - 8 and generator.model.tokenizer.decode(kept[-4:]) == "039 "  # the end is kept
    assert generator.stats.truncated == 1


def _safetensors(path: Path, name: str, dtype: str, shape: list, data: bytes) -> None:
    header = json.dumps({name: {"dtype": dtype, "shape": shape, "data_offsets": [0, len(data)]}}).encode()
    path.write_bytes(len(header).to_bytes(8, "little") + header + data)


def test_quantized_checkpoints_babeleval_does_not_read_are_refused(tmp_path):
    """A quantization_config whose method is not read (hqq, bitsandbytes, ...) is one line naming
    the method, never a model loaded as if dense (FP8, GPTQ, AWQ, compressed-tensors are read:
    test_hub_quantized.py)."""
    config = {"model_type": "llama", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
              "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 16}
    for method in ("hqq", "bitsandbytes"):
        folder = tmp_path / method
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({**config, "quantization_config": {"quant_method": method}}))
        _safetensors(folder / "model.safetensors", "lm_head.weight", "F32", [16, 8], bytes(16 * 8 * 4))
        refused(CliRunner().invoke(cli, ["info", str(folder)]), f"quantization_config method '{method}' is not read")
