"""Runs survive SIGKILL: `babeleval run` in a subprocess (tests/kill_worker.py) is killed
as XLA compiles, in the middle of writing a record, and while results.json is written;
each time no results.json is left that looks complete, the same command then resumes,
computes only the documents not yet written (the engine's request count says so), and ends
with the results of an uninterrupted run. (1 device against 2 and against meshes, from the CLI
too: tests/test_devices.py, tests/test_mesh.py.) The model: a random decoder shaped as SmolLM2
with its tokenizer (tiny_models.SHAPED): what a kill leaves does not depend on the weights."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.full  # SIGKILL at every kill point: subprocess runs

WORKER = Path(__file__).parent / "kill_worker.py"
TASK = "cldr-weekdays:fr,am"  # 14 documents of 7 options: 98 scoring requests
DOCS, OPTIONS = 14, 7
VOLATILE = ("seconds", "resumed")


def babeleval(point: str, out: Path, cache: Path, model: Path, devices: int = 2) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(BABELEVAL_CACHE=str(cache), BABELEVAL_CPU_DEVICES=str(devices))
    return subprocess.run([sys.executable, str(WORKER), point, "run", "--quiet", "--task", TASK, "--model", str(model),
                           "--output", str(out)], env=env, capture_output=True, text=True, timeout=900)


def complete_records(out: Path) -> list[dict]:
    path = out / "samples_cldr-weekdays.jsonl"
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    return [json.loads(line) for line in lines[:-1]]  # the last piece is "" or a torn line


def task_results(out: Path) -> dict:
    task = json.loads((out / "results.json").read_text())["tasks"]["cldr-weekdays"]
    return {k: v for k, v in task.items() if k not in VOLATILE}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, tiny_smollm2):
    root = tmp_path_factory.mktemp("kill")
    out = root / "uninterrupted"
    result = babeleval("none", out, root / "cache", tiny_smollm2)
    assert result.returncode == 0, result.stderr
    return root, out


@pytest.mark.parametrize("point, written", [("compile", 0), ("mid-line", 6), ("results", DOCS)])
def test_killed_run_resumes_to_the_same_results(uninterrupted, point, written, tiny_smollm2):
    root, reference = uninterrupted
    out = root / point
    cache = root / ("cold-cache" if point == "compile" else "cache")  # compile: nothing compiled yet
    killed = babeleval(point, out, cache, tiny_smollm2)
    assert killed.returncode == -9, killed.stderr  # SIGKILL
    assert not (out / "results.json").exists()  # nothing that looks complete
    before = complete_records(out)
    assert len(before) == written
    if point == "mid-line":
        assert not (out / "samples_cldr-weekdays.jsonl").read_bytes().endswith(b"\n")  # a torn record
    again = babeleval("none", out, cache, tiny_smollm2)
    assert again.returncode == 0, again.stderr
    summary = json.loads((out / "results.json").read_text())
    assert summary["tasks"]["cldr-weekdays"]["resumed"] == written
    assert summary["engine"].get("scoring", {}).get("requests", 0) == (DOCS - written) * OPTIONS  # nothing recomputed
    assert task_results(out) == task_results(reference)
    after = complete_records(out)
    assert sorted((r["key"], r["id"]) for r in after) == sorted((r["key"], r["id"]) for r in complete_records(reference))
    assert after[:written] == before  # what was written stays as it was
    assert not list(out.glob(".results.json.*")) or point == "results"  # only a killed write leaves its temp file
