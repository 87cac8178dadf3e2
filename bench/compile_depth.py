"""Compile time against depth (issue 51): narrow random Llamas (hidden 64, MLP 128, 4 heads, 2 KV
heads, SmolLM2's tokenizer) of several depths, each running the same `babeleval run` twice in a
fresh process: cold (an empty compile cache) and warm (the cache the cold run filled). Cold minus
warm is the time spent compiling. With the layer stack a scan over groups of identical layers
(models/stack.py) a program no longer grows with the number of layers, so the target is that
cold - warm grows by <= 1 s from 2 to 80 layers (before the scan: ~7.5 s).

Every program goes into the cache (BABELEVAL_COMPILE_MIN_SECONDS=0 unless set), so a shallow
model's short compiles are counted too; each run writes to a fresh output folder, so none resumes.
On a busy machine, --repeat N takes the fastest of N cold and of N warm runs.

  nice -n 10 python bench/compile_depth.py [--layers 2,8,32,80] [--task xcopa:sw] [--limit 40]
      [--repeat 1] [--data DIR] [--folder DIR] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
DATA = Path(os.environ.get("BABELEVAL_DATA", ROOT.parent / "shared" / "data"))
TARGET_S = 1.0


def build(layers: int, folder: Path) -> Path:
    """tiny_models' random Llama (hidden 64, MLP 128, 4 heads, 2 KV heads) with `layers` layers."""
    from tiny_models import build_with_real_tokenizer

    if not (folder / "config.json").exists():
        build_with_real_tokenizer("llama", folder, num_hidden_layers=layers, max_position_embeddings=2048)
    return folder


def timed_run(model: Path, cache: Path, output: Path, args) -> float:
    """Wall seconds of one `babeleval run` process with its caches (compiled programs) in `cache`."""
    shutil.rmtree(output, ignore_errors=True)
    env = dict(os.environ, BABELEVAL_CACHE=str(cache), BABELEVAL_DATA=str(args.data))
    env.setdefault("BABELEVAL_COMPILE_MIN_SECONDS", "0")
    command = [sys.executable, "-m", "babeleval.cli.main", "run", "--model", str(model), "--task", args.task,
               "--limit", str(args.limit), "--output", str(output), "--quiet"]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{(done.stderr or done.stdout)[-2000:]}")
    return seconds


def measure(layers: int, folder: Path, args) -> dict:
    model = build(layers, folder / f"llama-{layers}")
    cache = folder / f"cache-{layers}"
    colds, warms = [], []
    for _ in range(args.repeat):
        shutil.rmtree(cache, ignore_errors=True)
        colds.append(timed_run(model, cache, folder / f"out-{layers}-cold", args))
        warms.append(timed_run(model, cache, folder / f"out-{layers}-warm", args))
    cold, warm = min(colds), min(warms)
    return {"layers": layers, "cold_s": round(cold, 2), "warm_s": round(warm, 2), "compile_s": round(cold - warm, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="2,8,32,80")
    parser.add_argument("--task", default="xcopa:sw")
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--data", type=Path, default=DATA,
                        help="benchmark files (default: $BABELEVAL_DATA, else ../shared/data)")
    parser.add_argument("--repeat", type=int, default=1, help="cold/warm pairs per depth; the fastest of each counts")
    parser.add_argument("--folder", type=Path, default=None, help="models, caches and outputs (default: a temp folder)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    depths = sorted(int(n) for n in args.layers.split(","))
    with tempfile.TemporaryDirectory() as temp:
        folder = args.folder or Path(temp)
        print("| layers | cold s | warm s | cold - warm s |\n|---:|---:|---:|---:|", flush=True)
        rows = []
        for layers in depths:
            rows.append(measure(layers, folder, args))
            print("| {layers} | {cold_s:.2f} | {warm_s:.2f} | {compile_s:.2f} |".format(**rows[-1]), flush=True)
    growth = round(rows[-1]["compile_s"] - rows[0]["compile_s"], 2)
    verdict = "meets" if growth <= TARGET_S else "misses"
    print(f"\ncold - warm grows by {growth:.2f} s from {depths[0]} to {depths[-1]} layers "
          f"({verdict} the target of <= {TARGET_S:g} s; before the scan: ~7.5 s from 2 to 80)")
    if args.json:
        report = {"task": args.task, "limit": args.limit, "repeat": args.repeat, "rows": rows, "growth_s": growth,
                  "target_s": TARGET_S}
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
