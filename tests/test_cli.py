"""The CLI end to end: the default suite writes results and per-document samples and
resumes; a user-written task file from a temp folder
runs; a generation task's SQuAD numbers equal the metric called directly; bad input is
one line and exit code 2, with nothing written that looks complete."""
import json

import pytest
from click.testing import CliRunner

from babeleval.cli.main import cli
from babeleval.metrics.squad import SQuAD


def run(*args):
    return CliRunner().invoke(cli, ["run", "--quiet", *map(str, args)])


def test_default_run_writes_results_and_resumes(tmp_path):
    """(That a run keeps its compiled programs on disk for the next: test_compile_cache.)"""
    out = tmp_path / "run"
    result = run("--task", "cldr-weekdays:fr,am", "--output", out)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "results.json").read_text())
    task = summary["tasks"]["cldr-weekdays"]
    assert task["metrics"]["n"] == 14 and task["subsets"]["fr"]["n"] == 7
    assert task["subsets"]["fr"]["acc"] == pytest.approx(1 / 7) and task["subsets"]["am"]["acc"] == pytest.approx(1 / 7)
    assert summary["model"]["arch"] == "llama" and summary["model"]["params"] == 134_515_008
    assert summary["versions"]["jax"] == "0.10.2" and summary["versions"]["sacrebleu"] == "2.6.0"
    assert summary["model"]["sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    quantization = summary["model"]["quantization"]  # the file's blocks, held as they are stored
    assert quantization["method"] == "gguf" and quantization["source"] == summary["model"]["source"]
    assert quantization["types"]["Q4_1"] == {"tensors": 210, "params": 106_168_320, "bits": 5.0, "block_size": 32}
    assert quantization["types"]["Q8_0"]["bits"] == 8.5 and quantization["bits_per_param"] == pytest.approx(5.74, abs=0.01)
    samples = (out / "samples_cldr-weekdays.jsonl").read_text().splitlines()
    assert len(samples) == 14 and len(json.loads(samples[0])["loglikelihoods"]) == 7
    again = run("--task", "cldr-weekdays:fr,am", "--output", out)
    assert again.exit_code == 0, again.output
    resumed = json.loads((out / "results.json").read_text())["tasks"]["cldr-weekdays"]
    assert resumed["resumed"] == 14 and resumed["metrics"] == task["metrics"]


USER_TASK = """
name: amharic-days
kind: multiple_choice
protocol: test fixture v1
data: {{path: {data}}}
prompt: "{{{{ question }}}}\\nAnswer:"
choices: [a, b, c]
target: answer
scoring: {scoring}
labels: [ሀ, ለ, ሐ]
metrics: [acc, acc_norm, acc_mutual_info]
subsets:
  am: {{language: am, script: Ethi}}
"""


def test_user_task_file_runs_and_a_changed_template_is_refused(tmp_path, tiny_smollm2):
    """On a random decoder shaped as SmolLM2 (tiny_models.SHAPED): the task file's machinery does
    not depend on the weights."""
    rows = [{"id": str(i), "question": q, "a": a, "b": b, "c": c, "answer": g} for i, (q, a, b, c, g) in enumerate([
        ("The day after Monday in Amharic", "ማክሰኞ", "ሐሙስ", "እሑድ", "ማክሰኞ"),
        ("The day after Friday in Amharic", "ሰኞ", "ቅዳሜ", "ረቡዕ", "ለ"),
        ("The first day of the week in English", "Tuesday", "Friday", "Monday", 2)])]
    data = tmp_path / "days.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "amharic-days.yaml").write_text(USER_TASK.format(data=data, scoring="sequence"), encoding="utf-8")
    out = tmp_path / "run"
    result = run("--model", tiny_smollm2, "--task", "amharic-days", "--task-dir", tmp_path / "tasks", "--output", out)
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "samples_amharic-days.jsonl").read_text().splitlines()]
    assert [r["gold"] for r in records] == [0, 1, 2] and [r["target"] for r in records] == ["ማክሰኞ", "ቅዳሜ", "Monday"]
    for r in records:  # mutual information: conditional minus unconditional log-likelihood
        mi = [c - u for c, u in zip(r["loglikelihoods"], r["unconditional"])]
        assert r["acc_mutual_info"] == float(mi.index(max(mi)) == r["gold"])
    summary = json.loads((out / "results.json").read_text())["tasks"]["amharic-days"]
    assert summary["metrics"]["acc"] == pytest.approx(sum(r["acc"] for r in records) / 3)
    assert summary["protocol"] == "test fixture v1" and summary["languages"] == {"am": {"language": "am", "script": "Ethi"}}
    (tmp_path / "tasks" / "amharic-days.yaml").write_text(USER_TASK.format(data=data, scoring="label"), encoding="utf-8")
    refused = run("--model", tiny_smollm2, "--task", "amharic-days", "--task-dir", tmp_path / "tasks", "--output", out)
    assert refused.exit_code == 2 and "written by another configuration of am" in refused.output


def test_generation_task_through_the_cli(tmp_path, data_slices, tiny_smollm2):
    """Generation tasks from the command line, on a random decoder shaped as SmolLM2 with its
    tokenizer (tiny_models.SHAPED): the engine's counts, stop reasons, character limits and the
    SQuAD metrics of what it wrote (real SmolLM2 generation: tests/test_generate.py)."""
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "xquad-hi-chars.yaml").write_text(
        "include: " + str(__import__("babeleval.tasks.files", fromlist=["BUILTIN"]).BUILTIN / "xquad-hi.yaml") +
        "\nname: xquad-hi-chars\ngeneration: {stop: [\"\\n\"], max_new_tokens: 32, max_new_chars: 12}\n", encoding="utf-8")
    out = tmp_path / "run"
    result = run("--model", tiny_smollm2, "--task", "xquad-hi", "--task", "xquad-hi-chars", "--task-dir", tmp_path / "tasks",
                 "--limit", 6, "--data", data_slices, "--output", out)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "results.json").read_text())
    generation = summary["engine"]["generation"]  # the questions of one paragraph share it as a prompt prefix
    assert generation["prefixes"] >= 1 and generation["prefix_tokens_reused"] > generation["prefix_tokens"]
    # every kept token took a decode step of its row; the split covers the engine's time
    assert generation["decode_row_steps"] >= generation["new_tokens"] > 0
    assert 0 < generation["prefill_seconds"] + generation["decode_seconds"] <= generation["seconds"] + 0.01  # each rounded
    records = [json.loads(line) for line in (out / "samples_xquad-hi.jsonl").read_text().splitlines()]
    predictions, answers = [r["prediction"] for r in records], [r["references"] for r in records]
    task = summary["tasks"]["xquad-hi"]
    official = SQuAD("official").corpus_score(predictions, answers)
    multilingual = SQuAD("multilingual", "hi").corpus_score(predictions, answers)
    assert task["metrics"]["squad_em"] == pytest.approx(official["exact_match"])
    assert task["metrics"]["squad_f1"] == pytest.approx(official["f1"])
    assert task["metrics"]["squad_ml_f1"] == pytest.approx(multilingual["f1"])
    assert task["metric_signatures"]["squad_multilingual"].startswith("squad|norm:mlqa|lang:hi")
    assert all(r["stop_reason"] in ("eos", "stop", "length") for r in records)
    assert not any(r["generation"].endswith("\ufffd") for r in records)  # no partial character where a length cut fell
    assert task["metrics"]["cut_by_length"] == pytest.approx(sum(r["stop_reason"] == "length" for r in records) / 6)
    chars = [json.loads(line) for line in (out / "samples_xquad-hi-chars.jsonl").read_text().splitlines()]
    for short, full in zip(chars, records):
        assert len(short["generation"]) <= 12 and full["generation"].startswith(short["generation"])
        assert short["stop_reason"] == ("length" if len(full["generation"]) > 12 else full["stop_reason"])


def test_bad_input_is_one_line_and_exit_code_2(tmp_path):
    for args, message in ((["--batch-size", "x"], "'x': expected 'auto' or a whole number >= 1"),
                          (["--limit", "-1"], "-1 is not in the range x>=1"),
                          (["--task", "nope"], "unknown task 'nope'"),
                          (["--task", "xcopa:sw", "--data", tmp_path / "nodata"], "nodata/xcopa/sw/test.sw.jsonl: no such file")):
        result = run(*args, "--output", tmp_path / "out")
        assert result.exit_code == 2 and message in result.output, result.output
        assert "Traceback" not in result.output and not (tmp_path / "out" / "results.json").exists()
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"q": "a", "x": "1", "y": "2", "t": 0}\n{"q": "b", "x": "1",\n', encoding="utf-8")
    (tmp_path / "bad.yaml").write_text(f"name: bad\nkind: multiple_choice\ndata: {{path: {rows}}}\nprompt: '{{{{ q }}}}'\n"
                                       "choices: [x, y]\ntarget: t\n", encoding="utf-8")
    result = run("--task", tmp_path / "bad.yaml", "--output", tmp_path / "out")
    assert result.exit_code == 2 and f"{rows}:2: malformed JSON" in result.output, result.output
    assert "loading" not in result.output  # found before the model loads
    assert not (tmp_path / "out").exists()  # nothing written
    result = CliRunner().invoke(cli, ["info", str(tmp_path / "missing.gguf")])
    assert result.exit_code == 2 and "missing.gguf: no such file" in result.output


def test_info_reports_architecture():
    result = CliRunner().invoke(cli, ["info", "all-minilm-l6-v2"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["arch"] == "bert" and info["vocab_size"] == 30522 and info["params"] == 22_713_216
    assert info["bytes_per_param"] == 4.0 and info["quantization"] is None


def test_tasks_lists_languages_kinds_and_sources():
    result = CliRunner().invoke(cli, ["tasks"])
    assert result.exit_code == 0, result.output
    assert "xcopa-orders  [multiple_choice, main acc]" in result.output
    assert "axes: order: original, shuffle-1, shuffle-2, shuffle-3, gold-first, gold-last" in result.output
    assert "xquad-hi  [generation, main squad_em]" in result.output and "subsets (24)" in result.output


def test_models_lists_every_supported_family():
    from babeleval.loading.hf_config import SUPPORTED

    result = CliRunner().invoke(cli, ["models"])
    assert result.exit_code == 0, result.output
    listed = {line.split()[0] for line in result.output.splitlines()}
    assert listed == set(SUPPORTED) - {"gemma3"}  # the multimodal wrapper loads as gemma3_text
    assert "Aya 23" in result.output and "Qwen3-30B-A3B" in result.output


@pytest.mark.full  # lm-eval indexes its ~10k task files (10 s) to name the closest
def test_unknown_lm_eval_task_is_one_line_naming_the_closest():
    result = CliRunner().invoke(cli, ["lm-eval", "--tasks", "xcopa_sw,xcopa_zz", "--model", "no-model-loaded"])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: unknown lm-eval task 'xcopa_zz' (did you mean xcopa_")
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_missing_lm_eval_is_one_line(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "lm_eval", None)
    result = CliRunner().invoke(cli, ["lm-eval", "--tasks", "xcopa_sw"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: lm-eval backend needs lm_eval: pip install 'babeleval[lm-eval]'"
