"""llama.cpp as a peer on the same GGUF files (issue 49): the same lm-eval requests scored by
llama.cpp (llama-cpp-python, built by bench/llama_cpp_build.sh) and by `babeleval lm-eval`, each
side a whole process of its own, timed from its start to its samples written.

llama.cpp's side is an lm-eval model written here (LlamaCppLM): each request's context and
continuation tokenized by llama.cpp's own tokenizer as lm-eval's HF backend splits them (trailing
spaces of the context moved to the continuation, the continuation's tokens the whole text's past
the context's), evaluated with logits for every position, the KV cache kept across requests up to
the longest common token prefix (so a document's options share their context, as llama.cpp's
server does with cache_prompt), and the continuation's log-probability and greedy flag read from
those logits (log-softmax in float64). babeleval's side is its lm-eval backend on the same file,
its blocks kept quantized. Workloads: 0-shot XCOPA (sw, id, ht) and 5-shot SIB-200 (swh), the task
files of bench/lm_eval_backend.py.

Reported per (file, workload): requests, each side's whole-process seconds and their ratio, and
per-sample agreement: max and median |delta log-prob| over every option, and how often the two
choose the same option (acc's argmax). llama.cpp quantizes activations to 8 bits inside its
quantized matmuls (babeleval multiplies in float32), so small differences are expected.

A control separates llama.cpp's arithmetic from either side's reading of the file: `--dense-copy
OUT.gguf --models M` writes M's GGUF with every tensor dequantized to float32 (gguf's own
dequantize; metadata as it is), which both sides then score without quantized matmuls.

  bash bench/llama_cpp_build.sh      # once, ~25 minutes on 2 cores
  python bench/llama_cpp_peer.py [--models smollm2-135m,gemma3-270m] [--limit 100] [--threads 2]
  python bench/llama_cpp_peer.py --models smollm2-135m --dense-copy /tmp/smollm2-f32.gguf
  python bench/llama_cpp_peer.py --models /tmp/smollm2-f32.gguf --only xcopa
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

sys.path.insert(0, str(ROOT / "bench"))
from lm_eval_backend import WORKLOADS as BACKEND_WORKLOADS  # noqa: E402  (stdlib only at import)

WORKLOADS = {name: tasks for name, tasks in BACKEND_WORKLOADS.items() if name.startswith(("xcopa", "sib200"))}


def llama_cpp_lm(path: str, threads: int, context: int):
    """An lm-eval model scoring log-likelihoods with llama.cpp (defined here: lm_eval and llama_cpp
    are imported only in the child that uses them)."""
    import llama_cpp
    import numpy as np
    from lm_eval.api.model import LM

    class LlamaCppLM(LM):
        def __init__(self):
            super().__init__()
            self.llm = llama_cpp.Llama(model_path=path, n_ctx=context, n_batch=512, n_threads=threads,
                                       n_threads_batch=threads, logits_all=True, verbose=False)

        def tokens(self, text: str, bos: bool) -> list[int]:
            return self.llm.tokenize(text.encode("utf-8"), add_bos=bos, special=False)

        def score(self, context: str, continuation: str) -> tuple[float, bool]:
            spaces = len(context) - len(context.rstrip())
            if spaces:
                context, continuation = context[:-spaces], context[-spaces:] + continuation
            whole = self.tokens(context + continuation, True)
            start = len(self.tokens(context, True))
            llm = self.llm
            cached = llm.input_ids[:llm.n_tokens].tolist()
            shared = 0
            while shared < min(len(cached), start) and cached[shared] == whole[shared]:
                shared += 1
            llm.n_tokens = shared  # the KV cache past the shared prefix is dropped by eval
            llm.eval(whole[shared:])
            logits = np.asarray(llm.scores[start - 1:len(whole) - 1], np.float64)
            top = logits.max(-1, keepdims=True)
            logp = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
            targets = np.asarray(whole[start:])
            total = float(logp[np.arange(len(targets)), targets].sum())
            return total, bool((logits.argmax(-1) == targets).all())

        def loglikelihood(self, requests, disable_tqdm: bool = False):
            return [self.score(*r.args) for r in requests]

        def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
            raise NotImplementedError("multiple-choice workloads only")

        def generate_until(self, requests, disable_tqdm: bool = False):
            raise NotImplementedError("multiple-choice workloads only")

    return LlamaCppLM()


def side(args) -> None:
    """(child) one side's whole run: load, lm_eval.simple_evaluate, samples as JSON."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from babeleval.loading import resolve

    path = str(resolve(args.model))
    if args.side == "llama.cpp":
        lm = llama_cpp_lm(path, args.threads, args.context)
    else:
        from babeleval.lm_eval import BabelevalLM
        from babeleval.loading import load_model

        lm = BabelevalLM(load_model(path))
    out = lm_eval.simple_evaluate(model=lm, tasks=WORKLOADS[args.workload], limit=args.limit, log_samples=True,
                                  task_manager=TaskManager(include_path=str(ROOT / "tests" / "fixtures" / "lm_eval_tasks")))
    samples = {t: [{"doc_id": s["doc_id"], "logp": [r[0][0] for r in s["resps"]],
                    "acc": s.get("acc")} for s in sorted(rows, key=lambda s: s["doc_id"])]
               for t, rows in out["samples"].items()}
    Path(args.out).write_text(json.dumps(samples))


def dense_copy(model: str, out: Path) -> None:
    """model's GGUF with every tensor dequantized to float32, its metadata copied."""
    import gguf
    import numpy as np
    from gguf.quants import dequantize

    from babeleval.loading import resolve

    reader = gguf.GGUFReader(str(resolve(model)))
    writer = gguf.GGUFWriter(str(out), reader.fields["general.architecture"].contents())
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key in ("general.architecture", "general.file_type"):
            continue
        kind = field.types[0]
        writer.add_key_value(key, field.contents(), kind, sub_type=field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    for tensor in reader.tensors:
        shape = tuple(reversed([int(x) for x in tensor.shape]))
        writer.add_tensor(tensor.name, np.asarray(dequantize(tensor.data, tensor.tensor_type), np.float32).reshape(shape))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {out} ({out.stat().st_size / 1e6:.0f} MB)")


def run_side(name: str, model: str, workload: str, limit: int, threads: int, out: Path) -> float:
    command = [sys.executable, __file__, "--side", name, "--model", model, "--workload", workload,
               "--limit", str(limit), "--threads", str(threads), "--out", str(out)]
    start = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT)
    return time.perf_counter() - start


def agreement(ours: dict, theirs: dict) -> dict:
    import numpy as np

    deltas, same, docs = [], 0, 0
    for task in theirs:
        for a, b in zip(ours[task], theirs[task], strict=True):
            deltas += [abs(x - y) for x, y in zip(a["logp"], b["logp"], strict=True)]
            same += int(np.argmax(a["logp"]) == np.argmax(b["logp"]))
            docs += 1
    acc = {side: float(np.mean([s["acc"] for t in rows for s in rows[t]])) for side, rows in
           (("babeleval", ours), ("llama.cpp", theirs))}
    return {"documents": docs, "options": len(deltas), "max_abs_delta_logp": float(np.max(deltas)),
            "median_abs_delta_logp": float(np.median(deltas)), "same_choice": same / docs, "acc": acc}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="smollm2-135m,gemma3-270m")
    parser.add_argument("--limit", type=int, default=100, help="documents per lm-eval task")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--context", type=int, default=2048, help=argparse.SUPPRESS)
    parser.add_argument("--only", default=None, help="the workloads whose name contains this")
    parser.add_argument("--json", default=None)
    parser.add_argument("--dense-copy", default=None, help="write the first model's GGUF dequantized to float32 here")
    parser.add_argument("--side", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--model", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--workload", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.chdir(ROOT)  # the task files' data_files are relative to the repository root
    if args.side:
        return side(args)
    if args.dense_copy:
        return dense_copy(args.models.split(",")[0], Path(args.dense_copy))
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="llama-cpp-peer-"))
    rows = []
    for model in args.models.split(","):
        for workload in WORKLOADS:
            if args.only and args.only not in workload:
                continue
            seconds, samples = {}, {}
            for name in ("llama.cpp", "babeleval"):
                out = folder / f"{model}-{name}-{workload.split()[0]}.json"
                seconds[name] = run_side(name, model, workload, args.limit, args.threads, out)
                samples[name] = json.loads(out.read_text())
            row = {"model": model, "workload": workload, "threads": args.threads,
                   "seconds": {k: round(v, 1) for k, v in seconds.items()},
                   "ratio": seconds["llama.cpp"] / seconds["babeleval"],
                   **agreement(samples["babeleval"], samples["llama.cpp"])}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| model | workload | docs (options) | llama.cpp s | babeleval s | ratio | max / median abs delta logp "
          "| same choice | acc babeleval / llama.cpp |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['workload']} | {r['documents']} ({r['options']}) | {r['seconds']['llama.cpp']} | "
              f"{r['seconds']['babeleval']} | {r['ratio']:.2f}x | {r['max_abs_delta_logp']:.3g} / "
              f"{r['median_abs_delta_logp']:.3g} | {r['same_choice']:.3f} | {r['acc']['babeleval']:.3f} / "
              f"{r['acc']['llama.cpp']:.3f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
