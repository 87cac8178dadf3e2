"""babeleval's XCOPA-sw equals lm-evaluation-harness's own run: the per-sample
log-likelihoods, acc and acc_norm that bench/record_lm_eval_xcopa.py recorded from
lm-eval 0.4.13 (its xcopa task functions, its metrics, its HF backend on the same
SmolLM2 weights) in tests/reference/lm_eval_xcopa_sw.json. acc_norm divides by the
choice's length without the target delimiter: counting the delimiter (babeleval's old
rule) changes predictions here."""
import json
from pathlib import Path

import numpy as np
import pytest

from babeleval.evaluate import evaluate, prepare_task
from babeleval.tasks.files import find_task

pytestmark = pytest.mark.full  # live lm-eval parity on real weights and data

REFERENCE = Path(__file__).parent / "reference" / "lm_eval_xcopa_sw.json"
N = 200


@pytest.fixture(scope="module")
def both(shared_data, tmp_path_factory):
    from real_models import ours

    out = tmp_path_factory.mktemp("parity")
    summary = evaluate(ours("smollm2-135m"), ["xcopa-sw"], out, data=shared_data, limit=N, progress=False,
                       compile_cache=False)
    ours_records = [json.loads(line) for line in (out / "samples_xcopa.jsonl").read_text().splitlines()]
    reference = json.loads(REFERENCE.read_text())["samples"][:N]
    for record, question in zip(ours_records, prepare_task(find_task("xcopa-sw"), shared_data, N)[0].items):
        record["choice_texts"] = question.choices
    return summary["tasks"]["xcopa"], ours_records, reference


def test_per_sample_loglikelihoods_match(both):
    _, ours_records, reference = both
    assert [r["id"] for r in ours_records] == [str(s["idx"]) for s in reference]
    got = np.array([r["loglikelihoods"] for r in ours_records])
    want = np.array([s["loglikelihoods"] for s in reference])
    assert np.abs(got - want).max() <= 1e-3


def test_acc_and_acc_norm_equal_lm_eval(both):
    summary, ours_records, reference = both
    assert [r["acc"] for r in ours_records] == [s["acc"] for s in reference]
    assert [r["acc_norm"] for r in ours_records] == [s["acc_norm"] for s in reference]
    assert summary["metrics"]["acc"] == pytest.approx(np.mean([s["acc"] for s in reference]))
    assert summary["metrics"]["acc_norm"] == pytest.approx(np.mean([s["acc_norm"] for s in reference]))


def test_counting_the_delimiter_would_differ(both):
    """The reference can tell the two rules apart: on these questions the old rule (divide by
    len(" " + choice)) predicts differently at least once."""
    _, ours_records, reference = both
    changed = 0
    for r in ours_records:
        old = np.argmax(np.array(r["loglikelihoods"]) / np.array([len(" " + o) for o in r["choice_texts"]]))
        changed += float(old == r["gold"]) != r["acc_norm"]
    assert changed > 0
