"""`babeleval export`: the records of real runs (SmolLM2 and Gemma 3 on XCOPA; SmolLM2 on
XCOPA under six choice orders, an axis; SmolLM2 translating, a generation task) as one
Parquet file. Read back with pyarrow it equals the samples files record for record; a
DuckDB query of the mean acc per model and subset equals each run's results.json."""
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from babeleval.cli.main import cli

EXAMPLES = Path(__file__).parents[1] / "examples"
from test_compare import RUNS  # noqa: E402  (the two XCOPA runs the comparison tests use)

FOLDERS = [*RUNS, EXAMPLES / "xcopa-orders-smollm2", EXAMPLES / "sib200-translate-smollm2"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / "runs.parquet"
    result = CliRunner().invoke(cli, ["export", *map(str, FOLDERS), "--output", str(path)])
    assert result.exit_code == 0, result.output
    return path


def _samples(folder: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(folder.glob("samples_*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines()]


def test_parquet_equals_the_samples_files(exported):
    table = pq.read_table(exported).to_pylist()
    expected = [(str(folder), r) for folder in FOLDERS for r in _samples(folder)]
    assert len(table) == len(expected)
    for row, (folder, record) in zip(table, expected):
        assert row["run"] == folder and json.loads(row["record"]) == record
        assert (row["subset"], row["variant_key"], row["id"], row["signature"]) == (
            record["subset"], record["key"], record["id"], record["signature"])
        assert dict(row["axes"]) == record["variant"]
        for metric in ("acc", "acc_norm", "acc_bytes", "chrf"):
            assert row[metric] == record.get(metric)
        assert row["loglikelihoods"] == record.get("loglikelihoods")
        assert row["prediction"] == (record["chosen"] if "chosen" in record else record["prediction"])
        assert row["gold"] == (record["target"] if "target" in record else record["references"][0])
    orders = [r for r in table if r["run"].endswith("xcopa-orders-smollm2")]
    assert {dict(r["axes"])["order"] for r in orders} == {"original", "shuffle-1", "shuffle-2", "shuffle-3",
                                                           "gold-first", "gold-last"}
    assert {r["language"] for r in table if r["task"] == "xcopa"} == {"ht", "id", "qu", "sw", "ta"}
    assert {r["script"] for r in table if r["subset"] == "ta"} == {"Taml"}


def test_duckdb_mean_acc_per_subset_equals_results(exported):
    duckdb = pytest.importorskip("duckdb")
    rows = duckdb.sql(f"SELECT run, subset, avg(acc) AS acc, count(*) AS n FROM '{exported}' "
                      "WHERE task = 'xcopa' GROUP BY run, subset ORDER BY run, subset").fetchall()
    assert len(rows) == 3 * 5
    for run, subset, acc, n in rows:
        expected = json.loads((Path(run) / "results.json").read_text())["tasks"]["xcopa"]["subsets"][subset]
        assert (acc, n) == (pytest.approx(expected["acc"], abs=1e-12), expected["n"])


def test_export_bad_input_is_one_line(tmp_path):
    result = CliRunner().invoke(cli, ["export", str(tmp_path), "--output", str(tmp_path / "x.parquet")])
    assert result.exit_code == 2 and "results.json: no such file" in result.output and "Traceback" not in result.output
