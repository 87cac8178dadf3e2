"""Quantized GGUF weights kept quantized (issue 49): peak host memory of load_model and scoring
speed, quantized vs dequantized to float32, on the packaged GGUF files (SmolLM2-135M Q4_1,
Gemma 3 270M Q4_K_M).

Each (model, mode) runs in a fresh process: the peak resident set size (VmHWM) after load_model,
the process's size before it, the placed weights' bytes, then `babeleval bench`'s scoring
measurement (bench.bench: the same XCOPA requests answered twice, the second timed) in tokens
computed per second. Modes: keep (the file's blocks as QArrays, dequantized in the forward),
none (every weight dequantized to float32 at load), before (the code at --before, a checkout of
the loader that dequantized everything: `git worktree add /tmp/before 1069e2f`).

  nice -n 10 python bench/quantized_load.py [--models smollm2-135m,gemma3-270m] [--modes keep,none]
      [--task xcopa:sw,ta] [--limit 50] [--before /tmp/before]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def high_water_mark() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def measure(spec: str, mode: str, task: str, limit: int) -> None:
    import jax

    from babeleval.bench import bench
    from babeleval.loading import load_model

    jax.devices()
    before = high_water_mark()
    start = time.perf_counter()
    model = load_model(spec) if mode == "before" else load_model(spec, quantize=mode)
    seconds = time.perf_counter() - start
    peak = high_water_mark()
    weights = sum(x.nbytes for x in jax.tree.leaves(model.params))
    out = {"model": spec, "mode": mode, "file_bytes": Path(model.source).stat().st_size, "params": model.num_params,
           "weight_bytes": weights, "rss_before": before, "peak_rss_load": peak, "load_seconds": round(seconds, 2)}
    if limit:
        scoring = bench(model, [task], limit=limit)["scoring"]
        out.update(requests=scoring["requests"], tokens=scoring["tokens_computed"], seconds=scoring["seconds"],
                   tokens_per_second=round(scoring["tokens_per_second"], 1), peak_rss_run=high_water_mark())
    print(json.dumps(out), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="smollm2-135m,gemma3-270m")
    parser.add_argument("--modes", default="keep,none")
    parser.add_argument("--task", default="xcopa:sw,ta")
    parser.add_argument("--limit", type=int, default=50, help="documents per subset scored (0: load only)")
    parser.add_argument("--before", default=None, help="a checkout whose src/ is the loader to compare against")
    parser.add_argument("--measure", nargs=2, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        return measure(*args.measure, args.task, args.limit)
    modes = args.modes.split(",") + (["before"] if args.before else [])
    for spec in args.models.split(","):
        for mode in modes:
            env = dict(os.environ)
            if mode == "before":
                env["PYTHONPATH"] = str(Path(args.before) / "src") + os.pathsep + env.get("PYTHONPATH", "")
            subprocess.run([sys.executable, __file__, "--measure", spec, mode, "--task", args.task,
                            "--limit", str(args.limit)], check=True, env=env)


if __name__ == "__main__":
    main()
