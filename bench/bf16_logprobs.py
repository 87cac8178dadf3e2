"""bf16 against fp32 per-option log-probs on real tasks (same model file, same engine, CPU):
max and mean absolute difference, and the share of questions whose chosen option (the
arg-max of the raw log-probs) is the same. The bf16 tolerance in docs/devices.md comes from here.

  nice -n 10 python bench/bf16_logprobs.py [--model smollm2-135m] [--limit 20] [--fewshot-limit 8]
      [--reference bench/reference/fp32_logprobs.json]   (the fp32 log-probs as JSON)
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
TASKS = (("xcopa-sw", "sw"), ("xcopa-ta", "ta"), ("sib200-milu", "swh_Latn"))


def task_units(limit: int, fewshot_limit: int):
    from babeleval.evaluate import prepare_task
    from babeleval.tasks.files import find_task

    for name, subset in TASKS:
        n = fewshot_limit if name.startswith("sib200") else limit
        yield name, next(u for u in prepare_task(find_task(name), DATA, limit=n) if u.variant.key == subset)


def compare(fp32: np.ndarray, bf16: np.ndarray, counts: list[int]) -> dict:
    bounds = np.cumsum([0] + counts)
    same = [np.argmax(fp32[a:b]) == np.argmax(bf16[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    diff = np.abs(fp32 - bf16)
    return {"questions": len(counts), "options": int(bounds[-1]), "max_abs_diff": float(diff.max()),
            "mean_abs_diff": float(diff.mean()), "max_rel_diff": float((diff / np.maximum(np.abs(fp32), 1e-9)).max()),
            "same_choice": float(np.mean(same))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--fewshot-limit", type=int, default=8)
    parser.add_argument("--reference", type=Path, default=None, help="write the fp32 log-probs here (JSON)")
    args = parser.parse_args()
    from babeleval.engine.scoring import Scorer
    from babeleval.loading import load_model

    models = {d: load_model(args.model, dtype=d) for d in ("float32", "bfloat16")}
    out, reference = {}, {"model": args.model, "limit": args.limit, "fewshot_limit": args.fewshot_limit}
    for name, unit in task_units(args.limit, args.fewshot_limit):
        requests = unit.kind.requests(unit.items)
        lp = {d: np.asarray([r.logprob for r in Scorer(m).loglikelihood(requests)]) for d, m in models.items()}
        out[name] = compare(lp["float32"], lp["bfloat16"], [len(q.choices) for q in unit.items])
        reference[name] = {"logprob": lp["float32"].tolist(), "options": [len(q.choices) for q in unit.items]}
        print(name, json.dumps(out[name]), flush=True)
    print(json.dumps(out))
    if args.reference:
        args.reference.parent.mkdir(parents=True, exist_ok=True)
        args.reference.write_text(json.dumps(reference))


if __name__ == "__main__":
    main()
