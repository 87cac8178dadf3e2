"""Multiple-choice log-likelihood scoring with SmolLM2-135M (fp32, CPU), same requests, same
run, identical accuracy required:
- babeleval's packed engine (context once per question, log-softmax only where scored);
- lm-evaluation-harness's HF backend (HFLM.loglikelihood, batch size 8) on the same model;
- transformers + torch one request at a time (the seed's serial baseline; first
  SERIAL_QUESTIONS questions per language only, it is slow).
Tasks: XCOPA sw+ta test (2 options, short contexts) and SIB-200 eng/hin/swh/amh test as
7-way multiple choice (long shared context, 7 short options).

XCOPA_QUESTIONS=500 SIB_QUESTIONS=50 python -m pytest bench/test_bench_scoring.py --benchmark-only -s
"""
import os
import time

import numpy as np
import pytest

from babeleval.engine.scoring import Scorer
from babeleval.engine.tokenize import split_pairs
from babeleval.tasks.multiple_choice import aggregate, requests_for, score_questions
from babeleval.tasks.sib200 import load_sib200
from babeleval.tasks.xcopa import load_xcopa
from babeleval.engine.requests import LoglikelihoodResult
from conftest import SHARED
from lm_eval_peer import lm_eval_loglikelihood, lm_eval_model
from real_models import ours, reference

XCOPA_N = int(os.environ.get("XCOPA_QUESTIONS", "500"))  # per language
SIB_N = int(os.environ.get("SIB_QUESTIONS", "50"))  # per language
SERIAL_N = int(os.environ.get("SERIAL_QUESTIONS", "25"))  # per language
TASKS = {
    "xcopa": lambda n: [q for lang in ("sw", "ta")
                        for q in load_xcopa(SHARED / "xcopa" / lang / f"test.{lang}.jsonl", lang)[:n]],
    "sib200": lambda n: [q for lang in ("eng_Latn", "hin_Deva", "swh_Latn", "amh_Ethi")
                         for q in load_sib200(SHARED / "sib200" / lang)[:n]],
}
SIZES = {"xcopa": XCOPA_N, "sib200": SIB_N}
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


def accuracy(questions, logprobs):
    results = [LoglikelihoodResult(lp, False, 1) for lp in logprobs]
    return aggregate(score_questions(questions, results))["acc"]


def record(benchmark, task, system, questions, fn):
    requests = requests_for(questions)
    start = time.perf_counter()
    logprobs = benchmark.pedantic(fn, args=(requests,), rounds=1, iterations=1)
    seconds = time.perf_counter() - start
    RESULTS[(task, system)] = (np.asarray(logprobs), len(requests) / seconds, accuracy(questions, logprobs))
    benchmark.extra_info.update(requests_per_s=len(requests) / seconds, acc=RESULTS[(task, system)][2])
    print(f"\n{task} {system}: {len(requests)} requests, {len(requests) / seconds:.1f} requests/s, "
          f"acc {RESULTS[(task, system)][2]:.4f}")


@pytest.mark.parametrize("task", TASKS)
def test_babeleval(benchmark, task):
    model = ours("smollm2-135m")
    questions = TASKS[task](SIZES[task])
    warm = Scorer(model)
    start = time.perf_counter()
    warm.loglikelihood(requests_for(questions))  # compiles every shape the task needs
    compile_run = time.perf_counter() - start
    scorer = Scorer(model)
    record(benchmark, task, "babeleval", questions, lambda r: [x.logprob for x in scorer.loglikelihood(r)])
    stats = scorer.stats
    print(f"{stats.tokens_computed / stats.seconds:.0f} tokens/s computed, {stats.compiles.count} compiled shapes, "
          f"compile time ~{compile_run - stats.seconds:.1f} s (first run minus second), "
          f"padding {stats.tokens_padded / stats.tokens_computed:.2f}x")


@pytest.mark.parametrize("task", TASKS)
def test_lm_eval_hf(benchmark, task):
    lm = lm_eval_model(ours("smollm2-135m"), reference("smollm2-135m"))
    record(benchmark, task, "lm_eval", TASKS[task](SIZES[task]), lambda r: lm_eval_loglikelihood(lm, r))
    ours_lp, _, ours_acc = RESULTS[(task, "babeleval")]
    lp, _, acc = RESULTS[(task, "lm_eval")]
    # summed log-probs reach -200 on long Tamil rows: fp32 sums agree to 1e-5 relative
    assert np.all(np.abs(lp - ours_lp) <= 1e-3 + 1e-5 * np.abs(lp)) and acc == ours_acc
    print(f"speed-up vs lm-eval HF: {RESULTS[(task, 'babeleval')][1] / RESULTS[(task, 'lm_eval')][1]:.2f}x")


@pytest.mark.parametrize("task", TASKS)
def test_transformers_serial(benchmark, task):
    model, ref = ours("smollm2-135m"), reference("smollm2-135m")
    record(benchmark, task, "serial", TASKS[task](SERIAL_N), lambda r: serial_torch(model, ref, r))
    print(f"speed-up vs serial: {RESULTS[(task, 'babeleval')][1] / RESULTS[(task, 'serial')][1]:.2f}x")
