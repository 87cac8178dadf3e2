"""The two expert MLPs of models/moe.py (blocks on CPU, lax.ragged_dot elsewhere) equal a
plain numpy gated MLP of each row with its own expert's weights, an expert without rows and one
with more rows than a block included."""
import jax
import jax.numpy as jnp
import numpy as np

from babeleval.models.moe import BLOCK, blocked_mlp, ragged_mlp


def test_expert_mlps_equal_numpy():
    rng = np.random.default_rng(0)
    sizes = np.asarray([3, 0, BLOCK + 5, 1, 17], np.int32)
    rows = rng.standard_normal((int(sizes.sum()), 24)).astype(np.float32)
    gate, up = (rng.standard_normal((len(sizes), 24, 40)).astype(np.float32) for _ in range(2))
    down = rng.standard_normal((len(sizes), 40, 24)).astype(np.float32) / 8
    expert = np.repeat(np.arange(len(sizes)), sizes)
    g, u = (np.einsum("rk,rkf->rf", rows, w[expert]) for w in (gate, up))
    want = np.einsum("rf,rfk->rk", g / (1 + np.exp(-g)) * u, down[expert])
    for mlp in (blocked_mlp, ragged_mlp):
        got = mlp(*map(jnp.asarray, (rows, gate, up, down, sizes)), jax.nn.silu, jnp.float32)
        np.testing.assert_allclose(np.asarray(got), want, atol=2e-3, rtol=1e-4)


def test_the_expert_matmul_is_a_config_choice(tmp_path):
    """moe_matmul (auto: the CPU blocks here) chosen in the config, not read while tracing: the
    blocks and lax.ragged_dot give the same logits."""
    import dataclasses

    from babeleval.engine.forward import decoder_logits
    from babeleval.loading import load_model
    from babeleval.models.moe import expert_mlp
    from tiny_models import build

    assert expert_mlp("auto") is blocked_mlp and expert_mlp("ragged") is ragged_mlp
    build("qwen3_moe", tmp_path)
    model = load_model(str(tmp_path))
    ids = np.arange(3, 15)[None]
    logits = [np.asarray(decoder_logits(model.params, ids, np.ones_like(ids), dataclasses.replace(model.config, moe_matmul=m)))
              for m in ("grouped", "ragged")]
    assert np.abs(logits[0] - logits[1]).max() <= 1e-5
