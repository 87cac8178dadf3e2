"""Query-chunked causal attention equals one block over the whole sequence (masks with
padding and packed blocks, grouped heads, soft-capping, ALiBi-style bias)."""
import jax.numpy as jnp
import numpy as np
import pytest

from babeleval.models.layers import QUERY_CHUNK, attend


@pytest.mark.parametrize("softcap,with_bias", [(None, False), (50.0, True)])
def test_chunked_causal_attention_equals_one_block(softcap, with_bias):
    rng = np.random.default_rng(0)
    b, t, h, hkv, d = 2, QUERY_CHUNK * 2 + 37, 6, 2, 16
    q = jnp.asarray(rng.normal(size=(b, t, h, d)), jnp.float32)
    k = jnp.asarray(rng.normal(size=(b, hkv, t + 5, d)), jnp.float32)  # a cache longer than the prompt
    v = jnp.asarray(rng.normal(size=(b, hkv, t + 5, d)), jnp.float32)
    causal = np.tril(np.ones((t, t + 5), bool))
    keep = rng.random((b, t, t + 5)) > 0.2  # padding / block structure, still lower triangular
    mask = jnp.asarray(causal[None] & keep | np.eye(t, t + 5, dtype=bool)[None])
    bias = jnp.asarray(rng.normal(size=(b, h, t, t + 5)), jnp.float32) if with_bias else None
    whole = attend(q, k, v, mask, 0.25, softcap, bias, causal=False)
    chunked = attend(q, k, v, mask, 0.25, softcap, bias, causal=True)
    np.testing.assert_allclose(np.asarray(chunked), np.asarray(whole), atol=1e-5)
