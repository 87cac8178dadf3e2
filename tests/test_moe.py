"""The two grouped matmuls of models/moe.py (blocks on CPU, lax.ragged_dot elsewhere) equal a
plain numpy product of each row with its own expert's weights, an expert without rows and one
with more rows than a block included."""
import numpy as np

from babeleval.models.moe import BLOCK, grouped_matmul, ragged_matmul


def test_grouped_matmuls_equal_numpy():
    rng = np.random.default_rng(0)
    sizes = np.asarray([3, 0, BLOCK + 5, 1, 17], np.int32)
    rows = rng.standard_normal((int(sizes.sum()), 24)).astype(np.float32)
    weights = rng.standard_normal((len(sizes), 24, 40)).astype(np.float32)
    expert = np.repeat(np.arange(len(sizes)), sizes)
    want = np.einsum("rk,rkf->rf", rows, weights[expert])
    for matmul in (grouped_matmul, ragged_matmul):
        np.testing.assert_allclose(np.asarray(matmul(rows, weights, sizes)), want, atol=1e-4, rtol=1e-5)


def test_the_expert_matmul_is_a_config_choice(tmp_path):
    """moe_matmul (auto: the CPU blocks here) chosen in the config, not read while tracing: the
    blocks and lax.ragged_dot give the same logits."""
    import dataclasses

    from babeleval.engine.forward import decoder_logits
    from babeleval.loading import load_model
    from babeleval.models.moe import expert_matmul, grouped_matmul, ragged_matmul
    from tiny_models import build

    assert expert_matmul("auto") is grouped_matmul and expert_matmul("ragged") is ragged_matmul
    build("qwen3_moe", tmp_path)
    model = load_model(str(tmp_path))
    ids = np.arange(3, 15)[None]
    logits = [np.asarray(decoder_logits(model.params, ids, np.ones_like(ids), dataclasses.replace(model.config, moe_matmul=m)))
              for m in ("grouped", "ragged")]
    assert np.abs(logits[0] - logits[1]).max() <= 1e-5
