"""SQuAD EM/F1 over 100,000 (prediction, gold answers) pairs built from real XQuAD-hi
answers: babeleval's numba kernel vs the plain Python transcription of the official
rules (tests/squad_reference.py), end to end from Python lists, same run.

python -m pytest bench/test_bench_squad.py --benchmark-only
"""
import pytest

import squad_reference as ref
from babeleval.metrics.squad import SQuAD
from conftest import SHARED
from test_squad import xquad_predictions

PAIRS = 100_000


@pytest.fixture(scope="module")
def pairs():
    predictions, answers = [], []
    seed = 0
    while len(predictions) < PAIRS:
        p, a = xquad_predictions(SHARED, seed)
        predictions += p
        answers += a
        seed += 1
    return predictions[:PAIRS], answers[:PAIRS]


@pytest.mark.parametrize("mode", ["official", "multilingual"])
def test_babeleval_squad(benchmark, pairs, mode):
    predictions, answers = pairs
    metric = SQuAD(mode, "hi")
    metric.corpus_score(predictions[:10], answers[:10])  # compile (or load the numba cache) outside the timing
    score = benchmark(metric.corpus_score, predictions, answers)
    assert score == pytest.approx(ref.corpus(predictions[:5000], answers[:5000], mode=mode, lang="hi"), abs=5) 


@pytest.mark.parametrize("mode", ["official", "multilingual"])
def test_python_reference_squad(benchmark, pairs, mode):
    predictions, answers = pairs
    benchmark.pedantic(ref.corpus, args=(predictions, answers), kwargs={"mode": mode, "lang": "hi"}, rounds=1)
