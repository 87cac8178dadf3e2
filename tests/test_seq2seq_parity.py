"""Encoder-decoders: babeleval's Flax logits equal transformers + torch on tiny random T5,
T5 v1.1, mT5, umT5 and M2M100 folders (padded encoder and decoder rows), and each family knob
broken on purpose shows as a mismatch."""
import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

from babeleval.loading import load_model
from babeleval.engine.forward import padded_causal
from babeleval.models.seq2seq import encoder_inputs
from tiny_models import PARITY_STD, SEQ2SEQ, VOCAB, build_seq2seq

ENCODED, DECODED = 24, 20  # past the tiny configs' max distance of 20: log and clipped buckets
RELATIVE = 1e-5  # parity: max |ours - transformers| at most this much of the largest |logit|


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """family -> (folder, transformers' model loaded from it), each built once. M2M100 drawn with
    std 0.2 (tiny_models.PARITY_STD; its init_std defaults to 0.02, where attention is nearly
    uniform); T5's own initializer already gives keys ~0.125 and bucket biases of std 0.125, at
    which a wrong max distance or umT5's tables read as shared move the logits by 7% of the
    largest (the parity error is ~5e-7 of it)."""
    made = {}

    def get(family):
        if family not in made:
            folder = tmp_path_factory.mktemp(family)
            made[family] = folder, build_seq2seq(family, folder, **({"init_std": PARITY_STD} if family == "m2m_100" else {}))
        return made[family]

    return get


def batch(config):
    """Two encoder rows (the second right-padded) and decoder rows that start with the decoder
    start token (the second padded too)."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(3, VOCAB, (2, ENCODED))
    valid = np.ones((2, ENCODED), bool)
    valid[1, 17:] = False
    dec = rng.integers(3, VOCAB, (2, DECODED))
    dec[:, 0] = config.decoder_start_token_id
    dec_valid = np.ones((2, DECODED), bool)
    dec_valid[1, 15:] = False
    pad = config.pad_token_id
    return np.where(valid, tokens, pad), valid, np.where(dec_valid, dec, pad), dec_valid


def max_error(model, config, torch_model) -> float:
    """max |ours - transformers| over the unpadded decoder positions, over the largest |logit|."""
    import torch

    tokens, valid, dec, dec_valid = batch(config)
    with torch.no_grad():
        want = torch_model(input_ids=torch.tensor(tokens), attention_mask=torch.tensor(valid.astype(np.int64)),
                           decoder_input_ids=torch.tensor(dec),
                           decoder_attention_mask=torch.tensor(dec_valid.astype(np.int64))).logits.numpy()
    got = flax_logits(model.params, config, tokens, valid, dec, dec_valid)
    return float(np.abs(np.asarray(got) - want)[dec_valid].max() / np.abs(want[dec_valid]).max())


def flax_logits(params, config, tokens, valid, dec, dec_valid):
    """Our logits [B, T_dec, V] of padded encoder and decoder rows (batch's)."""
    from babeleval.models import build_module

    pos, mask = encoder_inputs(jnp.asarray(valid))
    dec_pos, dec_mask = padded_causal(jnp.asarray(dec_valid))
    cross_mask = jnp.broadcast_to(jnp.asarray(valid)[:, None, :], (*dec.shape, valid.shape[1]))
    return build_module(config).apply({"params": params}, jnp.asarray(tokens), pos, mask, jnp.asarray(dec), dec_pos,
                                      dec_mask, cross_mask)


@pytest.mark.parametrize("family", list(SEQ2SEQ))
def test_logits_match_transformers(family, folders):
    folder, torch_model = folders(family)
    model = load_model(str(folder))
    assert model.config.kind == "seq2seq"
    assert max_error(model, model.config, torch_model) <= RELATIVE


# family -> the knob, changed as a wrong reading of the config would
BROKEN = {
    "t5": dict(head_scale=False),  # original T5 scales its tied head's input
    "mt5": dict(relative_per_layer=True),  # mT5 shares layer 0's buckets: a per-layer read finds no tables
    "umt5": dict(relative_per_layer=False),  # umT5 has a table per layer
    "t5-gated": dict(relative_max_distance=128),  # the config's max distance
    "m2m_100": dict(embed_scale=False),
}


@pytest.mark.parametrize("family", list(BROKEN))
def test_a_broken_knob_fails(family, folders):
    """The parity test can fail: each family's distinguishing knob set wrong gives other logits
    (a thousand times the tolerance: 1% of the largest logit) or parameters that do not load."""
    from flax.errors import ScopeCollectionNotFound, ScopeParamNotFoundError

    folder, torch_model = folders(family)
    model = load_model(str(folder))
    wrong = dataclasses.replace(model.config, **BROKEN[family])
    try:
        error = max_error(model, wrong, torch_model)
    except (ScopeParamNotFoundError, ScopeCollectionNotFound) as exc:  # a bucket table the parameters lack
        assert "relative_bias" in str(exc)
        return
    assert error > 1000 * RELATIVE


def test_untied_head_is_read_from_the_file(folders):
    """transformers 5 writes tie_word_embeddings true for every T5: the head comes from the file."""
    import json

    folder, _ = folders("mt5")
    assert json.loads((folder / "config.json").read_text())["tie_word_embeddings"] is True
    model = load_model(str(folder))
    assert not model.config.tie_embeddings and "lm_head" in model.params
