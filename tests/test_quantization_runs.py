"""`babeleval run --quantize none,int4`: one model loaded once per choice, the tasks prepared once,
one run per choice under OUTPUT/<choice>/, and quantization.json/.md: per language, each choice's
change against the unquantized run with compare's paired test (Holm across languages), the
languages with the largest loss first."""
import json

import pytest
from click.testing import CliRunner

from babeleval.cli.main import cli


@pytest.mark.full
def test_one_command_runs_every_quantization_and_says_which_languages_lose(tiny_smollm2, tmp_path, monkeypatch):
    import babeleval.evaluate as evaluate

    prepared = []
    real = evaluate.prepare_task
    monkeypatch.setattr(evaluate, "prepare_task", lambda *a, **k: prepared.append(a[0].name) or real(*a, **k))
    out = tmp_path / "runs"
    result = CliRunner().invoke(cli, ["run", "--quiet", "--model", str(tiny_smollm2), "--task", "xcopa:sw,ta",
                                      "--limit", "20", "--quantize", "none,int4", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert prepared == ["xcopa"]  # data and prompts once for both runs
    runs = {q: json.loads((out / q / "results.json").read_text()) for q in ("none", "int4")}
    assert runs["none"]["model"]["quantization"] is None and runs["int4"]["model"]["quantization"]["method"] == "int4"
    effects = json.loads((out / "quantization.json").read_text())
    assert effects["baseline"] == "none" and effects["choices"] == ["none", "int4"]
    languages = effects["tasks"]["xcopa"]["languages"]
    assert {lang["subset"] for lang in languages} == {"sw", "ta"}
    changes = [lang["changes"]["int4"]["difference"] for lang in languages]
    assert changes == sorted(changes)  # largest loss first
    for lang in languages:
        change = lang["changes"]["int4"]
        acc = {q: runs[q]["tasks"]["xcopa"]["subsets"][lang["subset"]]["acc"] for q in runs}
        assert lang["baseline"] == acc["none"] and change["difference"] == acc["int4"] - acc["none"]
        assert change["n"] == 20 and change["p_corrected"] is not None and change["low"] <= change["difference"] <= change["high"]
    assert "| sw |" in (out / "quantization.md").read_text() and "int4 change" in (out / "quantization.md").read_text()


def test_changes_are_each_choice_minus_the_baseline_largest_loss_first(monkeypatch, tmp_path):
    """compare's difference is a - b whichever run is a: the change must come out as choice - none."""
    import babeleval.compare.quantization as quantization

    def cell(name, a, b, va, vb):
        return {"cell": name, "subset": name, "a": a, "b": b, "a_value": va, "b_value": vb, "difference": va - vb,
                "low": va - vb - 0.1, "high": va - vb + 0.1, "p": 0.01, "p_corrected": 0.02, "n": 40, "status": "tested"}

    differences = [cell("sw", "none", "int4", 0.6, 0.4), cell("ta", "int4", "none", 0.55, 0.5),
                   cell("sw", "int8", "int4", 0.6, 0.4)]
    monkeypatch.setattr(quantization, "load_runs", lambda folders: [type("Run", (), {})() for _ in folders])
    monkeypatch.setattr(quantization, "compare", lambda *a, **k: {"tasks": {"t": {"metric": "acc", "differences": differences}}})
    effects = quantization.quantization_effects(tmp_path, ["int8", "none", "int4"])
    sw, ta = effects["tasks"]["t"]["languages"]
    assert effects["baseline"] == "none" and (sw["subset"], ta["subset"]) == ("sw", "ta")
    assert sw["baseline"] == 0.6 and sw["changes"]["int4"]["difference"] == pytest.approx(-0.2)
    assert (sw["changes"]["int4"]["low"], sw["changes"]["int4"]["high"]) == pytest.approx((-0.3, -0.1))
    assert ta["baseline"] == 0.5 and abs(ta["changes"]["int4"]["difference"] - 0.05) < 1e-12
    assert "int8" not in sw["changes"]  # pairs without the baseline are not its changes


def test_a_language_with_too_few_questions_is_shown_untested():
    """Fewer than 20 shared questions: compare gives no interval or p; the table shows the change
    and why it is not tested (a 5-question run wrote no quantization.md before)."""
    from babeleval.compare.quantization import markdown

    change = {"difference": -0.2, "low": None, "high": None, "p": None, "p_corrected": None, "n": 5,
              "status": "not tested: 5 shared questions (fewer than 20)"}
    effects = {"baseline": "none", "choices": ["none", "keep"], "tasks": {"xcopa": {"metric": "acc", "correction": "holm", "languages": [
        {"cell": "sw", "baseline": 0.6, "changes": {"keep": change}}]}}}
    assert "| sw | 0.6000 | -0.2000 (not tested: 5 shared questions (fewer than 20)) |" in markdown(effects)
