"""bf16 (the default on GPU/TPU) against fp32 on the same model file: the tolerance docs/devices.md
promises, on real XCOPA-sw and XCOPA-ta questions (bench/bf16_logprobs.py measured it on
more: bench/RESULTS.md). Norms, softmax, the vocabulary logits, log-softmax and the sums
are fp32 in both, so what differs is the bf16 weights and activations."""
import numpy as np
import pytest
from real_models import ours

from babeleval.engine.scoring import Scorer
from babeleval.evaluate import prepare_task
from babeleval.loading import load_model
from babeleval.tasks.files import find_task

pytestmark = pytest.mark.full

RELATIVE, ABSOLUTE = 0.02, 0.15  # docs/devices.md: |bf16 - fp32| <= 0.02 |logp| + 0.15 per option


def test_bf16_logprobs_within_the_promised_tolerance(shared_data):
    fp32, bf16 = ours("smollm2-135m"), load_model("smollm2-135m", dtype="bfloat16")
    for subset in ("xcopa-sw", "xcopa-ta"):
        unit, = prepare_task(find_task(subset), shared_data, limit=6)
        requests = unit.kind.requests(unit.items)
        a, b = (np.asarray([r.logprob for r in Scorer(m).loglikelihood(requests)]) for m in (fp32, bf16))
        assert np.all(np.abs(a - b) <= RELATIVE * np.abs(a) + ABSOLUTE), (subset, np.abs(a - b).max())
        assert np.abs(a - b).max() > 1e-3  # bf16 did run: its rounding shows
        chosen = lambda lp: lp.reshape(-1, 2).argmax(axis=1)  # noqa: E731  (two options per question)
        assert (chosen(a) == chosen(b)).all(), subset
