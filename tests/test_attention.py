"""Causal attention in query chunks with key blocks merged online equals a plain softmax
over the whole masked score matrix (padding and packed blocks, grouped heads, soft-capping,
ALiBi-style bias, a first key block that is all padding)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from babeleval.models.attention import NEG_INF, attend, causal_chunks


def plain_attention(q, k, v, mask, scale, softcap, bias):
    """The textbook definition: every query head against its KV head's keys, one softmax."""
    h, hkv = q.shape[2], k.shape[1]
    k, v = jnp.repeat(k, h // hkv, axis=1), jnp.repeat(v, h // hkv, axis=1)  # [B, H, S, D]
    scores = jnp.einsum("bthd,bhsd->bhts", q, k) * scale
    if softcap:
        scores = jnp.tanh(scores / softcap) * softcap
    if bias is not None:
        scores = scores + bias
    probs = jax.nn.softmax(jnp.where(mask[:, None], scores, NEG_INF), axis=-1)
    out = jnp.einsum("bhts,bhsd->bthd", probs, v)
    return out.reshape(q.shape[0], q.shape[1], -1)


@pytest.mark.parametrize("t", [90, 165, 400, 600, 1100, 1300])
@pytest.mark.parametrize("softcap,with_bias", [(None, False), (50.0, True)])
def test_chunked_causal_attention_equals_plain_softmax(t, softcap, with_bias):
    chunk, block = causal_chunks(t)
    assert t > chunk and (t > block) == (t > 256)  # 90: fewer keys than a block; 165: one block per chunk; 600, 1100: several
    # every length loops over its query chunks (1100, 1300: not whole chunks)
    rng = np.random.default_rng(t)
    b, h, hkv, d = 2, 6, 2, 16
    q = jnp.asarray(rng.normal(size=(b, t, h, d)), jnp.float32)
    k = jnp.asarray(rng.normal(size=(b, hkv, t + 5, d)), jnp.float32)  # a cache longer than the prompt
    v = jnp.asarray(rng.normal(size=(b, hkv, t + 5, d)), jnp.float32)
    causal = np.tril(np.ones((t, t + 5), bool))
    keep = rng.random((b, t, t + 5)) > 0.2  # padding / block structure, still lower triangular
    keep[1, :, : t // 2] = False  # row 1: left padding longer than a key block
    mask = jnp.asarray(causal[None] & keep | np.eye(t, t + 5, dtype=bool)[None])
    bias = jnp.asarray(rng.normal(size=(b, h, t, t + 5)), jnp.float32) if with_bias else None
    want = plain_attention(q, k, v, mask, 0.25, softcap, bias)
    for causal_flag in (True, False):
        got = jax.jit(attend, static_argnames=("scale", "softcap", "causal"))(q, k, v, mask, 0.25, softcap, bias, causal=causal_flag)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-5)


@pytest.mark.parametrize("t", [300, 1300])
def test_rows_after_a_cached_prefix_equal_plain_softmax(t):
    """Queries after a 200-key prefix (offset) run as looped chunks (300: 64-query chunks, the last
    one partial; 1300: 128-query chunks)."""
    rng = np.random.default_rng(t)
    b, h, hkv, d, p = 2, 6, 2, 16, 200
    q = jnp.asarray(rng.normal(size=(b, t, h, d)), jnp.float32)
    k = jnp.asarray(rng.normal(size=(b, hkv, p + t, d)), jnp.float32)
    v = jnp.asarray(rng.normal(size=(b, hkv, p + t, d)), jnp.float32)
    seen = np.arange(p) < 150  # a bucketed prefix: its last 50 slots are padding
    own = np.tril(np.ones((t, t), bool)) & (rng.random((b, t, t)) > 0.2) | np.eye(t, dtype=bool)
    mask = jnp.asarray(np.concatenate([np.broadcast_to(seen, (b, t, p)), own], axis=2))
    want = plain_attention(q, k, v, mask, 0.25, None, None)
    got = attend(q, k, v, mask, 0.25, causal=True, offset=p)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-5)


@pytest.mark.parametrize("softcap,with_bias", [(None, False), (50.0, True)])
def test_one_query_decode_step_equals_plain_softmax(softcap, with_bias):
    """A decode step (one query per row, keys-major products) against a cache with left padding
    and empty future slots, grouped heads, soft-capping and an ALiBi-style bias."""
    rng = np.random.default_rng(7)
    b, h, hkv, d, s = 3, 6, 2, 16, 300
    q = jnp.asarray(rng.normal(size=(b, 1, h, d)), jnp.float32)
    k = jnp.asarray(rng.normal(size=(b, hkv, s, d)), jnp.float32)
    v = jnp.asarray(rng.normal(size=(b, hkv, s, d)), jnp.float32)
    mask = np.zeros((b, 1, s), bool)
    mask[0, 0, 40:250], mask[1, 0, :251], mask[2, 0, 299] = True, True, True  # padding, future slots, one key
    bias = jnp.asarray(rng.normal(size=(b, h, 1, s)), jnp.float32) if with_bias else None
    want = plain_attention(q, k, v, jnp.asarray(mask), 0.25, softcap, bias)
    got = attend(q, k, v, jnp.asarray(mask), 0.25, softcap, bias, causal=True)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-5)


@pytest.mark.parametrize("t", [1100, 2100])
def test_prompts_packed_in_one_line_equal_plain_softmax(t):
    """A line of three prompts (block-diagonal causal mask, as a packed prefill's): a query chunk's
    loop starts at the first key block its prompt reaches, past the earlier prompts' blocks."""
    rng = np.random.default_rng(t)
    h, hkv, d = 6, 2, 16
    q = jnp.asarray(rng.normal(size=(1, t, h, d)), jnp.float32)
    k = jnp.asarray(rng.normal(size=(1, hkv, t, d)), jnp.float32)
    v = jnp.asarray(rng.normal(size=(1, hkv, t, d)), jnp.float32)
    ends = np.repeat([t // 5, 3 * t // 5, t], [t // 5, 3 * t // 5 - t // 5, t - 3 * t // 5])
    idx = np.arange(t)
    mask = jnp.asarray(((idx[:, None] >= idx[None, :]) & (idx[:, None] < ends[None, :]))[None])
    want = plain_attention(q, k, v, mask, 0.25, None, None)
    got = attend(q, k, v, mask, 0.25, causal=True)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-5)
