"""bench/gpu_run.sh's CPU dry run: every part of the GPU check (the tiny fp32 reference, and per
model shape: scoring, 5-shot scoring, generation, bf16 vs fp32) runs on tiny versions of the
shapes (a 240-second budget: the dry run takes 45-80 s on this 2-core host, most of it compiling) and the JSON carries every field, so the prepared command
cannot break unnoticed before a GPU session."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.full
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def test_dry_run_runs_every_part_and_writes_every_field(tmp_path, shared_data):  # bench/gpu_check.py reads ../shared/data
    from gpu_check import FP32_COMPARED, QUANTIZED_RUNS, RUNS

    env = {**os.environ, "OUT": str(tmp_path), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "BABELEVAL_GPU_INSTALL": "0"}
    done = subprocess.run(["bash", "bench/gpu_run.sh", "--dry-run", "--budget-s", "240"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "gpu.json").read_text())
    assert report["skipped"] == [] and report["errors"] == {}, (report["skipped"], report["errors"])
    assert report["dry_run"] and report["platform"] == "cpu" and report["jax"] and report["attention"]
    assert report["reference"]["within_1e-3"] and report["reference"]["requests"] == 24
    assert set(report["models"]) == set(RUNS)
    for name, entry in report["models"].items():
        assert entry["params"] >= entry["active_params"] > 0, name
        for part in ("scoring", "scoring_5shot"):
            assert entry[part]["tokens_per_s"] > 0 and 0 < entry[part]["mfu"], (name, part)
        five = entry["scoring_5shot"]
        if name == "mt5-base":  # an encoder-decoder: each question's context encoded once for its 7 options
            assert 0 < five["contexts_encoded"] * 7 <= five["requests"], name
        else:
            assert five["prefix_tokens_reused"] > 0, name  # the demonstrations were cached
        assert entry["generation"]["prompts"] == 4 and entry["generation"]["new_tokens_per_s"] > 0, name
        assert ("bf16_vs_fp32" in entry) == (name in FP32_COMPARED), name
    for name in QUANTIZED_RUNS:  # the 8B shape's matmul weights as int8 / int4 codes: bytes placed, FLOPs of the dense model
        dense, held = report["models"][name.split("@")[0]], report["models"][name]
        assert held["active_params"] == dense["active_params"]
        assert held["weight_bytes"] < (0.3 if name.endswith("int8") else 0.2) * dense["weight_bytes"], name
    moe = report["models"]["qwen3-moe-small"]
    assert moe["active_params"] < moe["params"]  # 2 of 8 experts per token
    assert report["seconds"] < 600
