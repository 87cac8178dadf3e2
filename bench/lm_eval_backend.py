"""lm-eval's HF backend vs `babeleval lm-eval` on the same lm-eval task files, in one process,
taking turns: 0-shot XCOPA (sw, id, ht: lm-eval's own prompt functions), 5-shot SIB-200 with
MILU's prompt (first_n demonstrations), and XQuAD-hi generation until a newline
(tests/fixtures/lm_eval_tasks). Both run lm_eval.simple_evaluate on SmolLM2-135M-Instruct
(HFLM: the GGUF dequantised by transformers, fp32, batch size 8; babeleval: the same GGUF,
fp32). babeleval runs twice with fresh backends: the first includes compiling, the second is
the steady state. lm-eval's own once-per-process costs are paid before anything is timed.
Reported per workload: requests, seconds and requests/s of each, the ratio, and whether the
per-sample results are identical (log-likelihoods within max(1e-3, 5e-5 |logp|), acc/acc_norm
equal, generations equal).

nice -n 10 python bench/lm_eval_backend.py --limit 8 [--json out.json]   (from the repository root)

--model DIR runs both backends on an HF folder instead (HFLM: transformers' fp32 model and the
folder's tokenizer; babeleval: load_model(DIR)), e.g. a random mixture of experts written by
bench/random_models.py. An encoder-decoder folder (mT5) runs HFLM with backend="seq2seq" over
transformers' model with its own head (HFLM's tie_weights() would tie every T5's lm_head to the
embedding under transformers 5: tests/test_seq2seq_lm_eval.py).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

TASKS = ROOT / "tests" / "fixtures" / "lm_eval_tasks"
WORKLOADS = {"xcopa 0-shot (sw, id, ht)": ["xcopa_sw_local", "xcopa_id_local", "xcopa_ht_local"],
             "sib200 5-shot MILU-style (swh)": ["sib200_milu_5shot_swh"],
             "xquad-hi generate_until": ["xquad_hi_gen"],
             "xnli-style whole options (jv, su, ban, ace)": [f"nusax_xnli_style_{l}" for l in
                                                           ("javanese", "sundanese", "balinese", "acehnese")],
             "xquad-hi loglikelihood_rolling": ["xquad_hi_rolling"]}


def timed_run(lm, tasks: list[str], limit: int) -> tuple[dict, float]:
    import lm_eval
    from lm_eval.tasks import TaskManager

    start = time.perf_counter()
    out = lm_eval.simple_evaluate(model=lm, tasks=tasks, limit=limit, task_manager=TaskManager(include_path=str(TASKS)),
                                  log_samples=True)
    return {t: sorted(s, key=lambda s: s["doc_id"]) for t, s in out["samples"].items()}, time.perf_counter() - start


def pay_lm_evals_first_time_costs(tasks: list[str]) -> None:
    """lm-eval's costs that only a process's first simple_evaluate pays (importing its evaluator
    and task modules, building each task's dataset into the datasets cache, importing torch for
    its seed), paid before any backend is timed: babeleval's first call runs first and would
    otherwise pay them for HFLM too (~5 s of a 30 s first call on the MoE XCOPA workload)."""
    import lm_eval.evaluator  # noqa: F401
    import torch  # noqa: F401
    from lm_eval.tasks import TaskManager, get_task_dict

    get_task_dict(tasks, TaskManager(include_path=str(TASKS)))


def identical(ours: dict, hf: dict) -> bool:
    for task in hf:
        for a, b in zip(ours[task], hf[task], strict=True):
            if isinstance(b["resps"][0][0], str):
                if a["resps"] != b["resps"]:
                    return False
                continue
            first = lambda r: r[0][0] if isinstance(r[0], (list, tuple)) else r[0]  # noqa: E731  (rolling: a float)
            if any(abs(first(x) - first(y)) > max(1e-3, 5e-5 * abs(first(y))) for x, y in zip(a["resps"], b["resps"])):
                return False
            if any(a.get(m) != b.get(m) for m in ("acc", "acc_norm")):
                return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--json", default=None)
    parser.add_argument("--only", default=None, help="run the workloads whose name contains this")
    parser.add_argument("--model", default=None, help="an HF folder both backends load (default: SmolLM2's GGUF)")
    args = parser.parse_args()
    os.chdir(ROOT)  # the task files' data_files are relative to the repository root

    import transformers
    from lm_eval.models.huggingface import HFLM
    from real_models import ours, reference

    from babeleval.lm_eval import BabelevalLM
    from babeleval.loading import resolve

    backend = "default"  # HFLM's: causal, or seq2seq for an encoder-decoder folder
    if args.model:
        from babeleval.loading import load_model

        folder = args.model
        model = load_model(folder)
        ours = lambda _: model  # noqa: E731
        seq2seq = model.config.kind == "seq2seq"
        auto = transformers.AutoModelForSeq2SeqLM if seq2seq else transformers.AutoModelForCausalLM
        hf_model = auto.from_pretrained(folder, dtype="float32").eval()
        if seq2seq:
            hf_model.tie_weights = lambda *a, **k: None
            backend = "seq2seq"
        reference = lambda _: hf_model  # noqa: E731
        hf_tok = transformers.AutoTokenizer.from_pretrained(folder)
    else:
        path = resolve("smollm2-135m")
        hf_tok = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    rows = []
    for name, tasks in WORKLOADS.items():
        if args.only and args.only not in name:
            continue
        pay_lm_evals_first_time_costs(tasks)
        cold_lm = BabelevalLM(ours("smollm2-135m"))
        _, cold = timed_run(cold_lm, tasks, args.limit)
        lm = BabelevalLM(ours("smollm2-135m"))
        mine, warm = timed_run(lm, tasks, args.limit)
        hf, hf_seconds = timed_run(HFLM(pretrained=reference("smollm2-135m"), tokenizer=hf_tok, batch_size=8,
                                        device="cpu", backend=backend), tasks, args.limit)
        requests = sum(len(s["resps"]) for t in hf for s in hf[t])
        stats = lm.engine_stats()
        rows.append({"workload": name, "documents": sum(len(hf[t]) for t in hf), "requests": requests,
                     "hf_seconds": round(hf_seconds, 2), "hf_requests_per_second": requests / hf_seconds,
                     "babeleval_seconds_first": round(cold, 2), "babeleval_seconds": round(warm, 2),
                     "babeleval_requests_per_second": requests / warm, "ratio": hf_seconds / warm,
                     "ratio_first": hf_seconds / cold, "identical": identical(mine, hf), "engine": stats})
        print(json.dumps(rows[-1]), flush=True)
    print("\n| workload | docs | requests | lm-eval HF req/s | babeleval req/s (first call) | ratio (first call) | identical |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['documents']} | {r['requests']} | {r['hf_requests_per_second']:.2f} | "
              f"{r['babeleval_requests_per_second']:.2f} ({r['requests'] / r['babeleval_seconds_first']:.2f}) | "
              f"{r['ratio']:.2f}x ({r['ratio_first']:.2f}x) | {'yes' if r['identical'] else 'NO'} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
