"""SmolLM2-135M's real log-probs against a stored transformers golden file (default tier);
tests/reference/make_smollm2_golden.py regenerates it, test_parity_real.py compares live."""
import json
from pathlib import Path

import numpy as np
from scipy.special import log_softmax

from babeleval.engine.forward import decoder_logits
from real_models import ours, pad

GOLDEN = json.loads((Path(__file__).parent / "reference" / "smollm2_golden.json").read_text())


def test_smollm2_logprobs_equal_the_transformers_golden_file():
    model = ours(GOLDEN["model"])
    rows = [model.tokenizer.prefix + ids for ids in model.tokenizer.encode_batch([r["prompt"] for r in GOLDEN["rows"]])]
    assert rows == [r["ids"] for r in GOLDEN["rows"]]
    ids, mask = pad(rows, left=True)
    logits = np.asarray(decoder_logits(model.params, ids, mask, model.config), dtype=np.float64)
    logprobs = log_softmax(logits, axis=-1)
    width = ids.shape[1]
    for i, row in enumerate(GOLDEN["rows"]):
        start = width - len(row["ids"])
        got = [logprobs[i, start + t, row["ids"][t + 1]] for t in range(len(row["ids"]) - 1)]
        np.testing.assert_allclose(got, row["logprobs"], atol=2e-3, rtol=0)
        assert logits[i, start:].argmax(-1).tolist() == row["argmax"]
    assert model.tokenizer.decode([GOLDEN["rows"][0]["argmax"][-1]]).strip() == "Paris"
