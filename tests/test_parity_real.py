"""Real weights: SmolLM2-135M and Gemma 3 270M (GGUF) and all-MiniLM-L6-v2 against transformers + torch."""
import numpy as np
import pytest

from babeleval.engine.forward import decoder_logits, encoder_forward
from real_models import ours, pad, reference

pytestmark = pytest.mark.full  # live transformers on real weights (the default tier reads the golden file: test_golden)

PROMPTS = ["The capital of France is", "Habari ya asubuhi, rafiki yangu", "नमस्ते, आप कैसे हैं?",
           "1, 2, 3, 4, 5,"]


def compare_decoder(alias: str, tolerance: float):
    import torch

    model, ref = ours(alias), reference(alias)
    rows = [model.tokenizer.prefix + ids for ids in model.tokenizer.encode_batch(PROMPTS)]
    ids, mask = pad(rows, left=True)
    got = np.asarray(decoder_logits(model.params, ids, mask, model.config))
    with torch.no_grad():
        positions = torch.tensor(np.maximum(mask.cumsum(1) - 1, 0))
        want = ref(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), position_ids=positions).logits.numpy()
    valid = mask.astype(bool)
    assert np.abs(got[valid] - want[valid]).max() <= tolerance
    assert (got[:, -1].argmax(-1) == want[:, -1].argmax(-1)).all()
    return model, got


def test_smollm2_logits_match_transformers():
    model, logits = compare_decoder("smollm2-135m", 1e-3)
    assert model.tokenizer.decode([int(logits[0, -1].argmax())]).strip() == "Paris"


def test_gemma3_270m_logits_match_transformers():
    compare_decoder("gemma3-270m", 2e-3)


def test_minilm_sentence_embeddings_match_transformers():
    import torch

    model, ref = ours("all-minilm-l6-v2"), reference("all-minilm-l6-v2")
    assert model.config.pooling == "mean" and model.config.normalize
    rows = model.tokenizer.encode_batch(["A man is playing a guitar.", "Das ist ein Test.", "Mvua inanyesha leo."],
                                        special_tokens=True)
    ids, mask = pad(rows)
    got = np.asarray(encoder_forward(model.params, ids, mask, model.config)[1])
    with torch.no_grad():
        hidden = ref(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask)).last_hidden_state
        m = torch.tensor(mask)[..., None].float()
        want = torch.nn.functional.normalize((hidden * m).sum(1) / m.sum(1), dim=-1).numpy()
    cosine = (got * want).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(want, axis=-1)
    assert cosine.min() >= 0.9999
