"""Every family: babeleval's Flax logits equal transformers + torch on tiny random models
(weights drawn with std 0.2, so that attention depends on positions), with left and right padding
in one batch; a rotary theta, rotary fraction or sliding window set wrong on purpose fails."""
import dataclasses

import numpy as np
import pytest

from babeleval.engine.forward import decoder_logits, encoder_forward
from babeleval.models.decoder import restacked
from babeleval.loading import load_model
from tiny_models import CONFIGS, ENCODERS, LEGACY, PARITY_STD, VOCAB, build, build_legacy

LENGTH = 12
# Parity: max |ours - transformers| over the unpadded positions at most RELATIVE times the largest
# |logit| (weights drawn with std PARITY_STD = 0.2: the largest logit is ~1.4..10, the fp32 error
# ~1e-6 of it, phi3's 2.3e-6 the most), so about 1e-5..1e-4 in absolute terms. A knob broken on
# purpose must move the logits a thousand times further (1% of the largest logit).
RELATIVE = 1e-5
BROKEN_FACTOR = 1000


def padded_batch(pad_id):
    rng = np.random.default_rng(0)
    ids = rng.integers(3, VOCAB, size=(3, LENGTH))
    mask = np.ones_like(ids)
    mask[1, :4] = 0  # left padding
    mask[2, 9:] = 0  # right padding
    return np.where(mask == 1, ids, pad_id), mask


@dataclasses.dataclass
class Built:
    """A tiny family saved as an HF folder, loaded by babeleval, and transformers' output on the
    padded batch (logits, or an encoder's last hidden states)."""
    family: str  # the CONFIGS entry built
    ours: object
    ids: np.ndarray
    mask: np.ndarray
    ref: np.ndarray

    @property
    def valid(self):
        return self.mask.astype(bool)

    def error(self, config) -> float:
        """max |ours - transformers| over the unpadded positions, with babeleval's config `config`."""
        if self.family in ENCODERS:
            got = encoder_forward(self.ours.params, self.ids, self.mask, config)[0]
        else:
            got = decoder_logits(restacked(self.ours.params, self.ours.config, config), self.ids, self.mask, config)
        return float(np.abs(np.asarray(got)[self.valid] - self.ref[self.valid]).max())

    @property
    def tolerance(self) -> float:
        return RELATIVE * float(np.abs(self.ref[self.valid]).max())


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """name (a CONFIGS family or legacy:NAME) -> Built, each model built and run by transformers once
    for the parity test and the broken knobs."""
    import torch

    made = {}

    def get(name):
        if name not in made:
            folder = tmp_path_factory.mktemp(name.replace(":", "-"))
            if name.startswith("deep:"):
                family = name.split(":")[1]
                torch_model = build(family, folder, initializer_range=PARITY_STD, **DEEP[family])
            elif name.startswith("legacy:"):
                torch_model = build_legacy(name.split(":")[1], folder, initializer_range=PARITY_STD)
                family = LEGACY[name.split(":")[1]][0]
            elif not name.startswith("deep:"):
                torch_model = build(name, folder, initializer_range=PARITY_STD)
                family = name
            ids, mask = padded_batch(CONFIGS[family][1].get("pad_token_id", 0))
            with torch.no_grad():
                t_ids, t_mask = torch.tensor(ids), torch.tensor(mask)
                if family in ENCODERS:
                    ref = torch_model(input_ids=t_ids, attention_mask=t_mask).last_hidden_state.numpy()
                else:
                    kwargs = {} if family == "bloom" else {"position_ids": torch.tensor(np.maximum(mask.cumsum(1) - 1, 0))}
                    ref = torch_model(input_ids=t_ids, attention_mask=t_mask, **kwargs).logits.numpy()
            made[name] = Built(family, load_model(str(folder)), ids, mask, ref)
        return made[name]

    return get


def _types(n: int, period: int) -> list:
    return ["full_attention" if (i + 1) % period == 0 else "sliding_attention" for i in range(n)]


# families deep enough for scanned groups (models/stack.py): name -> (build overrides, the first group).
# Sliding and global layers scan one per step (their window and rotary base a per-layer flag);
# Qwen2-MoE's sparse layers every other layer make a period of 2.
DEEP = {
    "gemma3": dict(num_hidden_layers=13, layer_types=_types(13, 6)),  # 5 local + 1 global, twice, + 1
    "glm4_moe": dict(num_hidden_layers=5),  # a leading dense layer, then 4 MoE layers scanned
    "qwen2_moe": dict(num_hidden_layers=7, decoder_sparse_step=2, mlp_only_layers=[]),  # dense, MoE, ... : 3 repeats of 2
    "gemma2": dict(num_hidden_layers=5, layer_types=_types(5, 2)),
    "cohere2": dict(num_hidden_layers=9, layer_types=_types(9, 4)),
}
DEEP_GROUPS = {"gemma3": (0, 1, 13), "glm4_moe": (1, 1, 4), "qwen2_moe": (0, 2, 3), "gemma2": (0, 1, 5),
               "cohere2": (0, 1, 9)}


@pytest.mark.parametrize("family", [f if f in ("gemma3", "glm4_moe") else pytest.param(f, marks=pytest.mark.full)
                                    for f in DEEP])
def test_scanned_groups_match_transformers(family, built):
    """Stacks deep enough to scan (sliding and global layers in one scan; MoE layers after a dense
    one, or every other one) give transformers' logits. Gemma 3's global layers run as sliding
    ones (a scan that took its first layer's window for all) fail; Qwen2-MoE read as period 3 is
    refused, naming the layer that differs."""
    from babeleval.errors import BabelevalError
    from babeleval.models.decoder import decoder_groups

    model = built(f"deep:{family}")
    config = model.ours.config
    assert any((g.first, g.period, g.repeats) == DEEP_GROUPS[family] for g in decoder_groups(config) if g.scanned)
    assert model.error(config) <= model.tolerance
    if family == "gemma3":
        local = dataclasses.replace(config, layer_types=("sliding",) * config.num_layers)
        assert LENGTH - 3 > config.sliding_window
        assert model.error(local) > BROKEN_FACTOR * model.tolerance
    if family == "qwen2_moe":
        with pytest.raises(BabelevalError, match="layer 3 is moe but .* layer 0, .* period 3 does not fit"):
            model.error(dataclasses.replace(config, layer_period=3))


@pytest.mark.parametrize("family", list(CONFIGS) + [f"legacy:{name}" for name in LEGACY])
def test_logits_match_transformers(family, built):
    """legacy:NAME: the config.json as many hub checkpoints have it (no layer_types, Gemma 3's
    sliding_window_pattern and rope_local_base_freq, Gemma's hidden_act "gelu", Qwen2's
    use_sliding_window, a rope_scaling "type"), at 12 tokens: beyond the sliding window of 4."""
    model = built(family)
    assert model.error(model.ours.config) <= model.tolerance


# Position knobs as a wrong reading of the config would set them: name -> (model, the knob).
# Measured max |delta logit| (largest logit ~5.5): theta 3.2, theta-legacy 1.2, partial-rotary
# 3.2, partial-rotary-legacy 4.4, window-removed 7.0, window-off-by-one 5.9, window-legacy 3.3;
# the same breaks on weights drawn with std 0.02 moved them by 1.5e-3, 1.1e-4, 7.3e-4, 6.0e-4,
# 0.42, 0.21, 0.18 (the rotary ones within 1.1..15 times the old absolute tolerance of 1e-4).
POSITION_KNOBS = {
    "theta": ("llama", dict(rope_theta=1_000_000.0)),  # another family's default theta
    "theta-legacy": ("legacy:gpt_neox", dict(rope_theta=10000.0)),  # rotary_emb_base (1000) ignored
    "partial-rotary": ("gpt_neox", dict(rope_fraction=1.0)),  # rotary over the whole head, not 1/4
    "partial-rotary-legacy": ("legacy:gpt_neox", dict(rope_fraction=0.25)),  # rotary_pct (0.5) ignored
    "window-removed": ("mistral", dict(sliding_window=None)),
    "window-off-by-one": ("mistral", dict(sliding_window=5)),  # the window of 4 read as 5
    "window-legacy": ("legacy:qwen2-sliding", dict(sliding_window=None)),  # use_sliding_window ignored
}


@pytest.mark.parametrize("knob", list(POSITION_KNOBS))
def test_a_broken_position_knob_fails(knob, built):
    """The parity test sees position bugs: on the same models and batch (12 tokens, 9 in the
    right-padded row, past every window here), the rotary theta, the rotary fraction or the
    sliding window set wrong moves the logits a thousand times past the tolerance the right
    config meets."""
    name, broken = POSITION_KNOBS[knob]
    model = built(name)
    right = model.ours.config
    wrong = dataclasses.replace(right, **broken)
    assert wrong != right
    windows = [w for w in (right.sliding_window, wrong.sliding_window) if w]
    assert LENGTH - 3 > max(windows, default=0)
    assert model.error(right) <= model.tolerance
    assert model.error(wrong) > BROKEN_FACTOR * model.tolerance, (model.error(wrong), model.tolerance)


def test_missing_and_unexpected_keys_are_listed(tmp_path):
    from safetensors.numpy import load_file, save_file

    from babeleval.errors import BabelevalError

    build("llama", tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    tensors["model.layers.0.self_attn.extra.weight"] = tensors.pop("model.layers.1.mlp.up_proj.weight")
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(BabelevalError) as err:
        load_model(str(tmp_path))
    assert "missing keys: layers_1/mlp/up/kernel" in str(err.value)
    assert "unexpected keys: model.layers.0.self_attn.extra.weight" in str(err.value)


def test_shape_mismatch_names_key(tmp_path):
    from safetensors.numpy import load_file, save_file

    from babeleval.errors import BabelevalError

    build("qwen2", tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    tensors["model.layers.2.self_attn.q_proj.bias"] = tensors["model.layers.2.self_attn.q_proj.bias"][:10]
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(BabelevalError, match=r"shape mismatch for layers_2/attn/q/bias: expected \(64,\), found \(10,\)"):
        load_model(str(tmp_path))


def test_unsupported_architecture_is_named(tmp_path):
    from babeleval.errors import BabelevalError

    (tmp_path / "config.json").write_text('{"model_type": "mamba", "architectures": ["MambaForCausalLM"]}')
    with pytest.raises(BabelevalError, match="unsupported architecture 'mamba'.*supported: llama"):
        load_model(str(tmp_path))


def test_corrupt_safetensors_names_file(tmp_path):
    from babeleval.errors import BabelevalError

    build("gpt2", tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(BabelevalError, match="model.safetensors: unreadable"):
        load_model(str(tmp_path))


# The last-layer trick is engine logic: the default tier checks it on one family per block
# shape (plain, sliding + soft-capped, ALiBi, learned positions, parallel, post-norm, MoE);
# the full tier on every family.
LAST_LAYER_DEFAULT = ("llama", "gemma2", "bloom", "gpt2", "cohere", "olmo2", "qwen2_moe")


@pytest.mark.parametrize("family", [f if f in LAST_LAYER_DEFAULT else pytest.param(f, marks=pytest.mark.full)
                                    for f in CONFIGS if f not in ENCODERS])
def test_last_layer_at_chosen_positions_only(family, built):
    """Decoder(outputs=...): the last layer's queries and MLP at the chosen positions only give
    the hidden states of the full forward there, and the same keys and values (sliding windows,
    ALiBi, soft-capping and padded rows included)."""
    from babeleval.engine.forward import padded_causal
    from babeleval.models import build_module
    from babeleval.models.decoder import empty_cache

    model = built(family)
    ours, ids, mask = model.ours, model.ids, model.mask
    positions, full_mask = padded_causal(mask)
    module = build_module(ours.config)
    apply = lambda **k: module.apply({"params": ours.params}, ids, positions, full_mask,
                                     cache=empty_cache(ours.config, 3, LENGTH), cache_index=0, **k)
    everywhere, cache = apply()
    chosen = np.asarray([[11, 5], [11, 4], [8, 0]])  # last tokens, a middle one, a padded row's first
    picked, picked_cache = apply(outputs=chosen)
    want = np.take_along_axis(np.asarray(everywhere), chosen[..., None], axis=1)
    assert picked.shape == (3, 2, everywhere.shape[-1])
    assert np.abs(np.asarray(picked) - want).max() <= RELATIVE * np.abs(want).max()
    import jax

    for ours_kv, full_kv in zip(jax.tree.leaves(picked_cache), jax.tree.leaves(cache), strict=True):
        # the last repeat runs apart from the scan (other fusions): equal up to float32 rounding
        full_kv = np.asarray(full_kv)
        np.testing.assert_allclose(np.asarray(ours_kv), full_kv, rtol=0, atol=RELATIVE * np.abs(full_kv).max())


def test_legacy_gemma_gelu_is_the_tanh_approximation():
    """Gemma's hub configs say hidden_act "gelu" (hidden_activation null); transformers takes it
    for the tanh approximation, whose logits on the tiny model differ by less than the tolerance."""
    from babeleval.loading.hf_config import config_from_hf

    raw = dict(CONFIGS["gemma"][1], model_type="gemma", hidden_act="gelu", hidden_activation=None)
    assert config_from_hf(raw).activation == "gelu_tanh"
    assert config_from_hf(dict(raw, hidden_act="gelu_new")).activation == "gelu_tanh"
    assert config_from_hf(dict(raw, model_type="llama", hidden_act="gelu")).activation == "gelu"


# family -> the knob set as a wrong reading of its config would set it (the position knobs of
# gpt_neox and mistral: POSITION_KNOBS above)
BROKEN = {
    "cohere": dict(logit_scale=None),  # logit_scale ignored
    "cohere2": dict(rope_sliding_only=False),  # rotary on the global layers too
    "qwen2_moe": dict(shared_expert_size=0),  # the shared expert dropped
    "qwen3_moe": dict(moe_norm_topk=False),  # top-k router weights not renormalised
    "mixtral": dict(experts_per_token=1),
    "gemma2": dict(attn_scale=None),  # query_pre_attn_scalar ignored
    "gemma3": dict(rope_local_theta=None),  # local layers with the global theta
    "phi3": dict(rope_scaling=()),  # LongRoPE's factors ignored
    "xglm": dict(position_offset=0),  # fairseq's +2 forgotten
    "olmo2": dict(qk_norm_shape="head"),  # one norm per head instead of over all heads
    "glm4_moe": dict(moe_scale=1.0),  # routed_scaling_factor ignored
    "sarvam_moe": dict(moe_groups=1),  # experts chosen outside the best group too
}


@pytest.mark.parametrize("family", [f if f in ("cohere", "qwen2_moe") else pytest.param(f, marks=pytest.mark.full)
                                    for f in BROKEN])
def test_a_broken_knob_fails(family, built):
    """The parity test above can fail: each family's distinguishing knob set wrong moves the
    logits a thousand times past the parity tolerance (on the parity test's models and batch), or
    leaves parameters that do not fit."""
    from flax.errors import ScopeParamShapeError

    model = built(family)
    assert model.error(model.ours.config) <= model.tolerance
    try:
        wrong = model.error(dataclasses.replace(model.ours.config, **BROKEN[family]))
    except ScopeParamShapeError:  # a norm over one head where the weights cover all of them
        assert family == "olmo2"
        return
    assert wrong > BROKEN_FACTOR * model.tolerance, (wrong, model.tolerance)
