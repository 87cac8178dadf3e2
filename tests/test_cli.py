"""The CLI: the default run (embedded model + embedded CLDR data) writes results and
per-question samples, keeps its compiled programs on disk, and resumes; bad input is a
one-line error."""
import json

from click.testing import CliRunner

from babeleval.cli.main import cli
from babeleval.loading import cache_dir


def test_default_run_writes_results_and_resumes(tmp_path):
    runner = CliRunner()
    out = tmp_path / "run"
    result = runner.invoke(cli, ["run", "--task", "cldr-weekdays", "--limit", "14", "--output", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "results.json").read_text())
    task = summary["tasks"][0]
    assert task["metrics"]["n"] == 14 and 0.0 <= task["metrics"]["acc"] <= 1.0
    assert summary["model"]["arch"] == "llama" and summary["model"]["params"] == 134_515_008
    assert any((cache_dir() / "jax").glob("jit_score_lines-*"))  # compiled programs kept for the next run
    samples = (out / "samples_cldr-weekdays.jsonl").read_text().splitlines()
    assert len(samples) == 14 and len(json.loads(samples[0])["loglikelihoods"]) == 7
    again = runner.invoke(cli, ["run", "--task", "cldr-weekdays", "--limit", "14", "--output", str(out)])
    assert again.exit_code == 0
    assert json.loads((out / "results.json").read_text())["tasks"][0]["resumed"] == 14
    assert json.loads((out / "results.json").read_text())["tasks"][0]["metrics"] == task["metrics"]


def test_info_reports_architecture():
    result = CliRunner().invoke(cli, ["info", "all-minilm-l6-v2"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["arch"] == "bert" and info["vocab_size"] == 30522 and info["params"] > 22_000_000


def test_unknown_task_and_missing_model_are_one_line_errors(tmp_path):
    result = CliRunner().invoke(cli, ["run", "--task", "nope", "--output", str(tmp_path)])
    assert result.exit_code == 2 and "unknown task 'nope'" in result.output
    result = CliRunner().invoke(cli, ["info", str(tmp_path / "missing.gguf")])
    assert result.exit_code == 2 and "missing.gguf: no such file" in result.output
