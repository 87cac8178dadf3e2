"""Multiple-choice log-likelihood scoring with SmolLM2-135M (fp32, CPU), same requests, same
run, identical accuracy required:
- babeleval's packed engine (context once per question, log-softmax only where scored);
- lm-evaluation-harness's HF backend (HFLM.loglikelihood, batch size 8) on the same model;
- transformers + torch one request at a time (the seed's serial baseline; first
  SERIAL_QUESTIONS questions per language only, it is slow).
babeleval and lm-eval take turns over BENCH_SLICES slices of the questions (the machine is
shared and its speed drifts by 20% and more within minutes; taking turns spreads that over
both). Compilation happens before the timing, on the same slices.
Tasks: XCOPA sw+ta test (2 options, short contexts) and SIB-200 eng/hin/swh/amh test as
7-way multiple choice (long shared context, 7 short options); issue 15's two prefix-cache
workloads on the same four languages: sib200-milu (MILU's prompt, 5 demonstrations from dev,
the first five: most of every context is the same 5-shot block) and
bench/tasks/sib200-proverbeval-header.yaml (ProverbEval's long English instruction header,
4 topics listed as choices, 0-shot).

XCOPA_QUESTIONS=500 SIB_QUESTIONS=50 SERIAL_QUESTIONS=25 BENCH_SLICES=4 python -m pytest bench/test_bench_scoring.py --benchmark-only -s
MILU_QUESTIONS=12 HEADER_QUESTIONS=50 python -m pytest bench/test_bench_scoring.py --benchmark-only -s -k "lm_eval and (milu or header)"
"""
import os
import time
from pathlib import Path

import numpy as np
import pytest

from babeleval.engine.scoring import Scorer
from babeleval.engine.tokenize import split_pairs
from babeleval.evaluate import prepare_task
from babeleval.requests import LoglikelihoodResult
from babeleval.tasks.files import find_task
from conftest import SHARED
from lm_eval_peer import lm_eval_loglikelihood, lm_eval_model
from real_models import ours, reference

XCOPA_N = int(os.environ.get("XCOPA_QUESTIONS", "500"))  # per language
SIB_N = int(os.environ.get("SIB_QUESTIONS", "50"))  # per language
SERIAL_N = int(os.environ.get("SERIAL_QUESTIONS", "25"))  # per language
MILU_N = int(os.environ.get("MILU_QUESTIONS", "12"))  # per language
HEADER_N = int(os.environ.get("HEADER_QUESTIONS", "50"))  # per language
SLICES = int(os.environ.get("BENCH_SLICES", "4"))  # the systems take turns slice by slice
LANGUAGES = "eng_Latn,hin_Deva,swh_Latn,amh_Ethi"
HEADER_TASK = Path(__file__).parent / "tasks" / "sib200-proverbeval-header.yaml"
TASKS = {"xcopa": "xcopa:sw,ta", "sib200": f"sib200:{LANGUAGES}", "milu": f"sib200-milu:{LANGUAGES}",
         "header": str(HEADER_TASK)}
SIZES = {"xcopa": XCOPA_N, "sib200": SIB_N, "milu": MILU_N, "header": HEADER_N}
RESULTS = {}


def serial_torch(model, ref, requests):
    import torch

    out = []
    with torch.no_grad():
        for context, continuation in split_pairs(model.tokenizer, [(r.context, r.continuation) for r in requests]):
            logits = ref(input_ids=torch.tensor([context + continuation])).logits[0]
            logp = torch.log_softmax(logits[len(context) - 1: -1], -1)
            out.append(float(logp[torch.arange(len(continuation)), torch.tensor(continuation)].sum()))
    return out


SPREAD = {"milu", "header"}  # questions spread over the test file (sorted by topic: the first n are one topic)


def load(task, n):
    """The task's multiple-choice kind and n questions of each language: the first n, or for
    SPREAD tasks n spread evenly over the file."""
    spec = find_task(TASKS[task])
    if task == "header":
        spec = spec.select(LANGUAGES.split(","))
    if task not in SPREAD:
        units = prepare_task(spec, SHARED, n)
        return units[0].kind, [q for u in units for q in u.items]
    units = prepare_task(spec, SHARED, None)
    return units[0].kind, [q for u in units for q in u.items[::len(u.items) // n][:n]]


def accuracy(kind, questions, logprobs):
    results = [LoglikelihoodResult(lp, False, 1) for lp in logprobs]
    return kind.aggregate(kind.score(questions, results))["acc"]


def interleaved(kind, questions, systems):
    """Every system answers the same SLICES slices of the questions in turn (slice 1: A then
    B, slice 2: A then B, ...), so a shared machine that slows down mid-run slows all of them
    alike. Returns the questions in the order answered and, per system, (log-probs, seconds)."""
    slices = [questions[k::SLICES] for k in range(SLICES)]
    out = {name: ([], 0.0) for name in systems}
    for part in slices:
        requests = kind.requests(part)
        for name, fn in systems.items():
            start = time.perf_counter()
            logprobs = fn(requests)
            logs, seconds = out[name]
            out[name] = (logs + list(logprobs), seconds + time.perf_counter() - start)
    return [q for part in slices for q in part], out


@pytest.mark.parametrize("task", TASKS)
def test_babeleval_vs_lm_eval_hf(benchmark, task):
    model = ours("smollm2-135m")
    kind, questions = load(task, SIZES[task])
    lm = lm_eval_model(model, reference("smollm2-135m"))
    warm = Scorer(model)
    start = time.perf_counter()
    for k in range(SLICES):  # compiles every shape the slices need, outside the timing
        warm.loglikelihood(kind.requests(questions[k::SLICES]))
    warm_seconds = time.perf_counter() - start
    scorers = []

    def babeleval(requests):
        scorers.append(Scorer(model))
        return [r.logprob for r in scorers[-1].loglikelihood(requests)]

    systems = {"babeleval": babeleval, "lm_eval": lambda r: lm_eval_loglikelihood(lm, r)}
    ordered, out = benchmark.pedantic(interleaved, args=(kind, questions, systems), rounds=1, iterations=1)
    requests = len(kind.requests(ordered))
    for name, (logprobs, seconds) in out.items():
        RESULTS[(task, name)] = (np.asarray(logprobs), requests / seconds, accuracy(kind, ordered, logprobs))
        print(f"\n{task} {name}: {requests} requests in {seconds:.1f} s, {requests / seconds:.1f} requests/s, "
              f"acc {RESULTS[(task, name)][2]:.4f}")
    tokens = sum(s.stats.tokens_computed for s in scorers)
    seconds = out["babeleval"][1]
    print(f"babeleval: {tokens / seconds:.0f} tokens/s computed, {warm.stats.compiles.count} compiled shapes, "
          f"compile time ~{warm_seconds - seconds:.1f} s (first run minus second), "
          f"padding {sum(s.stats.tokens_padded for s in scorers) / tokens:.2f}x")
    reused = sum(s.stats.prefix_tokens_reused for s in scorers)
    prefix_tokens = sum(s.stats.prefix_tokens for s in scorers)
    pairs = split_pairs(model.tokenizer, [(r.context, r.continuation) for r in kind.requests(ordered)])
    print(f"tokens: babeleval {tokens:,} ({sum(s.stats.prefixes for s in scorers)} prefixes, {prefix_tokens:,} "
          f"prefix tokens computed once, {reused:,} not recomputed); without the prefix cache {tokens + reused - prefix_tokens:,}; "
          f"lm-eval (context + continuation per request) {sum(len(c) + len(k) for c, k in pairs):,}")
    ours_lp, ours_rate, ours_acc = RESULTS[(task, "babeleval")]
    lp, rate, acc = RESULTS[(task, "lm_eval")]
    # summed log-probs reach -200 on long Tamil rows: fp32 sums agree to 1e-5 relative
    assert np.all(np.abs(lp - ours_lp) <= 1e-3 + 1e-5 * np.abs(lp)) and acc == ours_acc
    benchmark.extra_info.update(babeleval_requests_per_s=ours_rate, lm_eval_requests_per_s=rate, speedup=ours_rate / rate)
    print(f"speed-up vs lm-eval HF: {ours_rate / rate:.2f}x")


@pytest.mark.parametrize("task", TASKS)
def test_transformers_serial(benchmark, task):
    model, ref = ours("smollm2-135m"), reference("smollm2-135m")
    kind, questions = load(task, SERIAL_N)
    requests = kind.requests(questions)
    start = time.perf_counter()
    logprobs = benchmark.pedantic(lambda: serial_torch(model, ref, requests), rounds=1, iterations=1)
    rate = len(requests) / (time.perf_counter() - start)
    print(f"\n{task} serial: {len(requests)} requests, {rate:.1f} requests/s, acc {accuracy(kind, questions, logprobs):.4f}")
    print(f"speed-up vs serial: {RESULTS[(task, 'babeleval')][1] / rate:.2f}x")
