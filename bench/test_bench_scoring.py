"""XCOPA sw+ta log-likelihood scoring with SmolLM2-135M (fp32, CPU): babeleval's packed
engine vs transformers + torch one request at a time (the seed's serial baseline),
same requests, same run; accuracy must be identical.

python -m pytest bench/test_bench_scoring.py --benchmark-only -s
"""
import os

import numpy as np
import pytest

from babeleval.engine.scoring import Scorer
from babeleval.engine.tokenize import split_pairs
from babeleval.tasks.multiple_choice import aggregate, requests_for, score_questions
from babeleval.tasks.xcopa import load_xcopa
from conftest import SHARED
from real_models import ours, reference

N = int(os.environ.get("BENCH_QUESTIONS", "100"))  # per language


@pytest.fixture(scope="module")
def questions():
    return [q for lang in ("sw", "ta") for q in load_xcopa(SHARED / "xcopa" / lang / f"test.{lang}.jsonl", lang)[:N]]


def serial_torch(model, ref, requests):
    import torch

    out = []
    with torch.no_grad():
        for context, continuation in split_pairs(model.tokenizer, [(r.context, r.continuation) for r in requests]):
            logits = ref(input_ids=torch.tensor([context + continuation])).logits[0]
            logp = torch.log_softmax(logits[len(context) - 1: -1], -1)
            out.append(float(logp[torch.arange(len(continuation)), torch.tensor(continuation)].sum()))
    return out


def test_babeleval_engine(benchmark, questions):
    model = ours("smollm2-135m")
    requests = requests_for(questions)
    scorer = Scorer(model)
    scorer.loglikelihood(requests[:8])  # compile outside the timing
    results = benchmark.pedantic(scorer.loglikelihood, args=(requests,), rounds=1)
    stats = scorer.stats
    print(f"\nbabeleval: {len(requests) / benchmark.stats['mean']:.1f} requests/s, "
          f"{stats.tokens_computed / max(stats.seconds, 1e-9):.0f} tokens/s computed, "
          f"{stats.compiles.count} compiled shapes, padding {stats.tokens_padded / stats.tokens_computed:.2f}x")
    reference_acc = aggregate(score_questions(questions, results))["acc"]
    benchmark.extra_info["acc"] = reference_acc


def test_transformers_serial(benchmark, questions):
    model, ref = ours("smollm2-135m"), reference("smollm2-135m")
    requests = requests_for(questions)
    lls = benchmark.pedantic(serial_torch, args=(model, ref, requests), rounds=1)
    print(f"\ntransformers serial: {len(requests) / benchmark.stats['mean']:.1f} requests/s")
    ours_results = Scorer(model).loglikelihood(requests)
    assert np.abs(np.array(lls) - np.array([r.logprob for r in ours_results])).max() <= 1e-3
