"""`babeleval bench`: the task's own requests, answered twice; the numbers are the engine's
(requests, tokens computed) beside what a no-sharing engine computes, counted here again."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from babeleval.cli.main import cli


ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.full  # bench end to end, on a random decoder shaped as SmolLM2 with its tokenizer
def test_bench_measures_scoring_and_generation(tmp_path, shared_data, monkeypatch, tiny_smollm2):
    """An lm-eval generation task is measured on the engine `run` answers it with (HFLM's rules)."""
    out = tmp_path / "bench.json"
    monkeypatch.chdir(ROOT)  # the lm-eval task file's data_files are relative to the repository root
    result = CliRunner().invoke(cli, ["bench", "--model", str(tiny_smollm2), "--task", "cldr-weekdays:fr", "--task", "xquad-hi", "--task",
                                      f"lm-eval:{ROOT / 'tests/fixtures/lm_eval_tasks/xquad_hi_gen.yaml'}",
                                      "--limit", "3", "--data", str(shared_data), "--output", str(out)])
    assert result.exit_code == 0, result.output
    bench = json.loads(out.read_text())
    from babeleval.engine.tokenize import split_pairs
    from babeleval.evaluate import prepare_task
    from babeleval.loading import load_model
    from babeleval.tasks.files import find_task

    unit, = prepare_task(find_task("cldr-weekdays:fr"), None, 3)
    requests = unit.kind.requests(unit.items)
    pairs = split_pairs(load_model(str(tiny_smollm2)).tokenizer, [(r.context, r.continuation) for r in requests])
    s = bench["scoring"]
    # a no-sharing engine reads every request but its last token (only a target)
    assert s["requests"] == 21 and s["tokens_without_sharing"] == sum(len(c) + len(k) - 1 for c, k in pairs)
    assert s["tokens_computed"] < s["tokens_without_sharing"]  # the 7 options of a question share its context
    assert s["compile_seconds"] >= 0 and s["requests_per_second"] > 0
    # MFU by its formula (2 x params x tokens / seconds / peak): on a 3-layer model whose parameters are
    # mostly its embedding, whose programs a warm cache holds, the estimate may pass 1
    params, peak = bench["params"], bench["peak_flops"]
    assert s["mfu"] == pytest.approx(2 * params * s["tokens_per_second"] / peak) and s["mfu"] > 0
    g = bench["generation"]
    assert g["requests"] == 6 and g["new_tokens"] > 0
    tokens_per_second = (g["prompt_tokens"] + g["new_tokens"]) * g["requests_per_second"] / g["requests"]
    assert g["mfu"] == pytest.approx(2 * params * tokens_per_second / peak) and g["mfu"] > 0
    assert g["engines"] == ["Generator", "ExactGenerator"]  # xquad-hi's requests, then the lm-eval task's
    assert bench["documents"] == 9 and bench["peak_flops"] > 1e9
    assert "scoring: 21 requests" in result.output and "generation (Generator, ExactGenerator): 6 prompts" in result.output


@pytest.mark.full  # bench in fresh processes
def test_bench_devices_measures_each_count_in_its_own_process(tmp_path):
    from test_bad_input import byte_model

    model = byte_model(tmp_path / "model")
    out = tmp_path / "scaling.json"
    result = CliRunner().invoke(cli, ["bench", "--model", str(model), "--task", "cldr-weekdays:fr", "--limit", "2",
                                      "--devices", "2,1", "--output", str(out)])
    assert result.exit_code == 0, result.output
    got = json.loads(out.read_text())
    assert [run["devices"]["local_devices"] for run in got["runs"]] == [1, 2]
    assert all(run["scoring"]["requests"] == 14 for run in got["runs"])
    rows = got["scaling"]["scoring"]
    assert [r["devices"] for r in rows] == [1, 2] and rows[0]["speedup"] == 1.0 and rows[0]["efficiency"] == 1.0
    assert rows[1]["efficiency"] == rows[1]["speedup"] / 2
    assert "scoring by devices: 1:" in result.output
    bad = CliRunner().invoke(cli, ["bench", "--task", "cldr-weekdays:fr", "--devices", "1,x"])
    assert bad.exit_code != 0 and "expected device counts" in bad.output


def test_bench_counts_on_a_byte_model(tmp_path):
    """`babeleval bench` on a random byte-level model (cheap): 2 questions of 7 options, every
    request's bytes but its last counted for a no-sharing engine, fewer computed."""
    from test_bad_input import byte_model

    from babeleval.evaluate import prepare_task
    from babeleval.tasks.files import find_task

    out = tmp_path / "bench.json"
    result = CliRunner().invoke(cli, ["bench", "--model", str(byte_model(tmp_path / "model")), "--task",
                                      "cldr-weekdays:fr", "--limit", "2", "--output", str(out)])
    assert result.exit_code == 0, result.output
    s = json.loads(out.read_text())["scoring"]
    unit, = prepare_task(find_task("cldr-weekdays:fr"), None, 2)
    requests = unit.kind.requests(unit.items)
    alone = sum(len((r.context + r.continuation).encode("utf-8")) for r in requests)  # BOS + bytes, less the last
    assert s["requests"] == 14 and s["tokens_without_sharing"] == alone
    assert s["tokens_computed"] < s["tokens_without_sharing"] and s["requests_per_second"] > 0


def test_bench_quantizes_at_load_and_records_it(tmp_path):
    """`bench --quantize int8`: the measured model is quantized at load; the JSON and the first line say so."""
    from test_bad_input import byte_model

    out = tmp_path / "bench.json"
    result = CliRunner().invoke(cli, ["bench", "--model", str(byte_model(tmp_path / "model")), "--task",
                                      "cldr-weekdays:fr", "--limit", "1", "--quantize", "int8", "--output", str(out)])
    assert result.exit_code == 0, result.output
    held = json.loads(out.read_text())["quantization"]
    assert held["method"] == "int8" and set(held["types"]) == {"int8", "float32"}
    assert f"int8: {held['bits_per_param']} bits per parameter" in result.output
