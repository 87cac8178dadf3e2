"""Corpus chrF over 20,000 real NusaX-MT pairs (12 languages cross-paired): babeleval's
numba kernel vs sacrebleu.corpus_chrf, end to end from Python lists, same run.

python -m pytest bench/test_bench_chrf.py --benchmark-only
"""
import csv

import pytest
import sacrebleu

from babeleval.metrics.chrf import CHRF
from conftest import SHARED


@pytest.fixture(scope="module")
def pairs():
    hyps, refs = [], []
    for split in ("train", "valid", "test"):
        rows = list(csv.DictReader(open(SHARED / "nusax" / "mt" / f"{split}.csv", encoding="utf-8")))
        langs = [k for k in rows[0] if k]
        for i, lang in enumerate(langs):
            for r in rows:
                hyps.append(r[lang])
                refs.append(r[langs[(i + 1) % len(langs)]])
    return hyps[:20000], refs[:20000]


@pytest.mark.parametrize("word_order", [0, 2])
def test_babeleval_chrf(benchmark, pairs, word_order):
    hyps, refs = pairs
    metric = CHRF(word_order=word_order)
    metric.corpus_score(hyps[:10], [refs[:10]])  # compile (or load the numba cache) outside the timing
    score = benchmark(metric.corpus_score, hyps, [refs])
    assert abs(score - sacrebleu.corpus_chrf(hyps, [refs], word_order=word_order).score) <= 1e-9


@pytest.mark.parametrize("word_order", [0, 2])
def test_sacrebleu_chrf(benchmark, pairs, word_order):
    hyps, refs = pairs
    benchmark.pedantic(sacrebleu.corpus_chrf, args=(hyps, [refs]), kwargs={"word_order": word_order}, rounds=2)
