"""Building blocks shared by every model family: norms, rotary and ALiBi positions,
attention over an explicit mask, and the two MLP shapes."""
from __future__ import annotations

import math
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ..errors import BabelevalError

ACTIVATIONS = {
    "silu": jax.nn.silu,
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_tanh": lambda x: jax.nn.gelu(x, approximate=True),
}
NEG_INF = -1e30


class Norm(nn.Module):
    """RMSNorm (optionally scaled by 1 + w, as Gemma) or LayerNorm (with or without bias, as
    Cohere); computed in fp32. per_head: one scale per head over the last axis of [.., H, D]
    (Cohere's qk-norm), else one over the last axis."""

    kind: str = "rms"
    eps: float = 1e-6
    offset: float = 0.0
    bias: bool = True
    per_head: bool = False

    @nn.compact
    def __call__(self, x):
        shape = x.shape[-2:] if self.per_head else x.shape[-1:]
        h = x.astype(jnp.float32)
        if self.kind == "rms":
            scale = self.param("scale", nn.initializers.zeros if self.offset else nn.initializers.ones, shape)
            h = h * jax.lax.rsqrt(jnp.mean(h * h, axis=-1, keepdims=True) + self.eps)
            return (h * (self.offset + scale.astype(jnp.float32))).astype(x.dtype)
        scale = self.param("scale", nn.initializers.ones, shape)
        h = h - jnp.mean(h, axis=-1, keepdims=True)
        h = h * jax.lax.rsqrt(jnp.mean(h * h, axis=-1, keepdims=True) + self.eps) * scale.astype(jnp.float32)
        if self.bias:
            h = h + self.param("bias", nn.initializers.zeros, shape).astype(jnp.float32)
        return h.astype(x.dtype)


def rope_inv_freq(head_dim: int, theta: float, scaling: tuple, long: bool = False) -> np.ndarray:
    """Inverse frequencies of rotary embeddings, with HF's 'linear', 'llama3' and 'longrope'
    scalings (longrope: the short factors, or with long=True the long ones)."""
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    params = dict(scaling)
    kind = params.get("rope_type")
    if kind == "linear":
        inv = inv / params["factor"]
    elif kind == "llama3":
        factor, low, high = params["factor"], params["low_freq_factor"], params["high_freq_factor"]
        old = params["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > old / low, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        mid = (1 - smooth) * scaled / factor + smooth * scaled
        inv = np.where((wavelen >= old / high) & (wavelen <= old / low), mid, scaled)
    elif kind == "longrope":
        inv = inv / np.asarray(params["long_factor" if long else "short_factor"], dtype=np.float64)
    elif kind:
        raise BabelevalError(f"unsupported rope scaling {kind!r}; supported: default, linear, llama3, longrope")
    return inv.astype(np.float32)


def rope_frequencies(head_dim: int, theta: float, scaling: tuple, max_positions: int, positions):
    """(inverse frequencies, cos/sin scale) for one forward call. LongRoPE (Phi-3) switches to
    its long factors when the call's largest position reaches original_max_position_embeddings,
    as transformers decides per forward call, and scales cos and sin by its attention factor."""
    inv = jnp.asarray(rope_inv_freq(head_dim, theta, scaling))
    params = dict(scaling)
    if params.get("rope_type") != "longrope":
        return inv, 1.0
    original = params["original_max_position_embeddings"]
    inv = jnp.where(jnp.max(positions) + 1 > original, jnp.asarray(rope_inv_freq(head_dim, theta, scaling, long=True)), inv)
    factor = params.get("factor") or max_positions / original
    scale = params.get("attention_factor") or (1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original)))
    return inv, scale


def apply_rope(x, positions, inv_freq, interleaved: bool = False, scale: float = 1.0):
    """RoPE on the first 2 * len(inv_freq) dims of each head (all of them but for GPT-NeoX's
    partial rotary), the rest passed through. Rotate-half pairs dims (i, i + n/2), the HF
    layout; interleaved pairs (2i, 2i + 1), Cohere's; scale multiplies cos and sin (LongRoPE).
    x: [B, T, H, D], positions: [B, T]."""
    angles = positions[..., None].astype(jnp.float32) * inv_freq  # [B, T, n/2]
    n = 2 * inv_freq.shape[-1]
    rot, rest = x[..., :n].astype(jnp.float32), x[..., n:]
    if interleaved:
        cos = jnp.repeat(jnp.cos(angles), 2, axis=-1)[:, :, None, :]
        sin = jnp.repeat(jnp.sin(angles), 2, axis=-1)[:, :, None, :]
        rotated = jnp.stack([-rot[..., 1::2], rot[..., ::2]], axis=-1).reshape(rot.shape)
    else:
        cos = jnp.concatenate([jnp.cos(angles)] * 2, axis=-1)[:, :, None, :]
        sin = jnp.concatenate([jnp.sin(angles)] * 2, axis=-1)[:, :, None, :]
        rotated = jnp.concatenate([-rot[..., n // 2:], rot[..., : n // 2]], axis=-1)
    out = ((rot * cos + rotated * sin) * scale).astype(x.dtype)
    return out if n == x.shape[-1] else jnp.concatenate([out, rest], axis=-1)


def sinusoids(positions, dim: int, zero_row: int | None = None):
    """fairseq's (tensor2tensor's) sinusoidal position table at `positions` [B, T]: sines of
    dim/2 frequencies exp(-i log(10000) / (dim/2 - 1)), then their cosines (XGLM); the table's
    row `zero_row` (the padding index) is zeros."""
    half = dim // 2
    freq = np.exp(np.arange(half) * -(math.log(10000) / (half - 1))).astype(np.float32)
    angles = positions[..., None].astype(jnp.float32) * freq
    table = jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)
    if zero_row is not None:
        table = jnp.where((positions == zero_row)[..., None], 0.0, table)
    return jnp.pad(table, ((0, 0), (0, 0), (0, dim % 2)))


def alibi_slopes(num_heads: int) -> np.ndarray:
    """ALiBi head slopes as BLOOM computes them (closest power of two, then interleaved extras)."""
    closest = 2 ** math.floor(math.log2(num_heads))
    base = 2 ** (-(2 ** -(math.log2(closest) - 3)))
    slopes = [base ** (i + 1) for i in range(closest)]
    if closest != num_heads:
        extra_base = 2 ** (-(2 ** -(math.log2(2 * closest) - 3)))
        slopes += [extra_base ** (2 * i + 1) for i in range(min(closest, num_heads - closest))]
    return np.asarray(slopes, dtype=np.float32)


# Longer causal inputs, and any after a cached prefix, loop over their chunks instead of
# unrolling them: a 1,024-token prefill compiles in 9 s, not 81 s (runs 4% slower); 4 rows of
# 512 after a 1,024-token prefix compile in 9 s, not 83 s, and run as fast (7.3 vs 7.6 s).
# (Rows after a prefix without query chunks, all keys in 512-blocks, ran 3x slower: 23 s.)
UNROLLED_QUERIES = 512


def causal_chunks(t: int) -> tuple[int, int]:
    """(queries per chunk, keys per softmax block) for a causal input of t tokens. Measured on
    CPU against one softmax over all of a 64-query chunk's keys, same process, taking turns:
    256-key blocks take 20% less time at 512-1024 tokens; past 1024, 128-query chunks with
    512-key blocks 10% less (smaller blocks there add more merge steps than they save)."""
    return (64, 256) if t <= 1024 else (128, 512)


def _block_scores(q, k, mask, scale, softcap, bias, groups):
    """q: [B, Hkv, G*T, D] (grouped query heads stacked along the rows); k: [B, Hkv, S, D];
    mask: [B, T, S]; bias: [B, H, T, S] or None. Returns masked fp32 scores [B, Hkv, G*T, S]."""
    b, hkv, rows, _ = q.shape
    t = rows // groups
    scores = jnp.einsum("bkqd,bksd->bkqs", q, k, preferred_element_type=jnp.float32) * scale
    scores = scores.reshape(b, hkv, groups, t, -1)
    if softcap:
        scores = jnp.tanh(scores / softcap) * softcap
    if bias is not None:
        scores = scores + bias.reshape(b, hkv, groups, t, -1)
    # an additive 0 / -inf bias: XLA's CPU select over the broadcast mask is ~3x slower than an add
    scores = scores + jnp.where(mask, 0.0, NEG_INF).astype(scores.dtype)[:, None, None]
    return scores.reshape(b, hkv, rows, -1)


def _attend_block(q, k, v, mask, scale, softcap, bias, block=None):
    """q: [B, T, H, D]; k, v: [B, Hkv, S, D] (head-major, the KV cache's layout); mask: [B, T, S].
    The grouped query heads are stacked along the rows of one [G*T, D] x [D, S] product per KV
    head. Keys are taken `block` at a time (all at once by default), each block's softmax merged
    into the running one by its maximum (flash-attention style, exact up to rounding); the
    division comes last, on [G*T, D] instead of [G*T, S]."""
    b, t, h, d = q.shape
    hkv, s = k.shape[1], k.shape[2]
    g = h // hkv
    q = q.reshape(b, t, hkv, g, d).transpose(0, 2, 3, 1, 4).reshape(b, hkv, g * t, d)
    top = total = out = None
    block = block or s
    for start in range(0, s, block):
        end = min(start + block, s)
        scores = _block_scores(q, k[:, :, start:end], mask[..., start:end], scale, softcap,
                               None if bias is None else bias[..., start:end], g)
        block_top = scores.max(axis=-1, keepdims=True)
        new_top = block_top if top is None else jnp.maximum(top, block_top)
        probs = jnp.exp(scores - new_top)
        values = jnp.einsum("bkqs,bksd->bkqd", probs.astype(v.dtype), v[:, :, start:end],
                            preferred_element_type=jnp.float32)
        if top is None:
            total, out = probs.sum(axis=-1, keepdims=True), values
        else:
            carry = jnp.exp(top - new_top)
            total, out = total * carry + probs.sum(axis=-1, keepdims=True), out * carry + values
        top = new_top
    out = (out / total).astype(v.dtype)
    return out.reshape(b, hkv, g, t, d).transpose(0, 3, 1, 2, 4).reshape(b, t, h * d)


def attend(q, k, v, mask, scale, softcap=None, bias=None, causal=False, offset: int = 0):
    """Grouped-query attention over an explicit boolean mask.

    q: [B, T, H, D]; k, v: [B, Hkv, S, D]; mask: [B, T, S]; bias: [B, H, T, S] or None.
    causal: query i never attends to a key past index i (keys indexed from 0 like the
    queries, as in a prefill or a packed row); long inputs then run in chunks of queries,
    each against the keys up to its end only, which skips the masked upper triangle.
    offset: keys before the first query (a cached prefix): query i may see keys up to offset + i.
    """
    t = q.shape[1]
    if t == 1:
        return _attend_one_query(q, k, v, mask, scale, softcap, bias)
    chunk, block = causal_chunks(t)
    if not causal or t <= chunk:
        return _attend_block(q, k, v, mask, scale, softcap, bias)
    if offset or t > UNROLLED_QUERIES:
        return _attend_causal_loop(q, k, v, mask, scale, softcap, bias, chunk, block, offset)
    outs = []
    for start in range(0, t, chunk):
        end = min(start + chunk, t)
        keys = min(offset + end, k.shape[2])
        outs.append(_attend_block(q[:, start:end], k[:, :, :keys], v[:, :, :keys], mask[:, start:end, :keys], scale, softcap,
                                  None if bias is None else bias[:, :, start:end, :keys], block))
    return jnp.concatenate(outs, axis=1)


def _attend_one_query(q, k, v, mask, scale, softcap, bias):
    """attend for one query per row (a decode step): keys-major products ([S, D] x [D, G] per KV
    head, the cache read in its own layout) instead of [G, D] x [D, S]; on CPU a decode step's
    attention over 1,088 cached keys takes a third less time (16 rows: 13 vs 20 ms per layer)."""
    b, _, h, d = q.shape
    hkv = k.shape[1]
    g = h // hkv
    scores = jnp.einsum("bksd,bkgd->bksg", k, q.reshape(b, hkv, g, d), preferred_element_type=jnp.float32) * scale
    if softcap:
        scores = jnp.tanh(scores / softcap) * softcap
    if bias is not None:
        scores = scores + bias.reshape(b, hkv, g, -1).transpose(0, 1, 3, 2)
    scores = scores + jnp.where(mask[:, 0], 0.0, NEG_INF).astype(scores.dtype)[:, None, :, None]
    probs = jnp.exp(scores - scores.max(axis=2, keepdims=True))
    out = jnp.einsum("bksg,bksd->bkgd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
    out = out / probs.sum(axis=2)[..., None]
    return out.astype(v.dtype).reshape(b, 1, h * d)


REMAINDER_KEYS = 128  # the keys left before a chunk's whole key blocks go in blocks of this many


def _attend_causal_loop(q, k, v, mask, scale, softcap, bias, chunk, block, offset):
    """attend's causal chunks as loops, not unrolled: lax.map over query chunks, each a
    fori_loop over the key blocks it sees (the program no longer grows with the input: unrolled,
    a 3,300-token prefill had ~90 chunk x block products per layer and compiled for minutes).
    A chunk's keys run from the first any of its queries sees to its own end (offset + chunk
    end): whole blocks back from the end, then the rest REMAINDER_KEYS at a time, so neither the
    masked upper triangle nor the keys of a packed line's other prompts (a block-diagonal mask)
    are computed, and a prompt starting inside a block costs no more keys than it has (blocks
    aligned to the line computed ~1.9x the keys XQuAD-hi's packed prompts need).
    Queries are padded to whole chunks, keys in front by REMAINDER_KEYS (masked out)."""
    b, t, h, d = q.shape
    hkv, s = k.shape[1], k.shape[2]
    g = h // hkv
    tp, front = -(-t // chunk) * chunk, min(REMAINDER_KEYS, block)
    q = jnp.pad(q, ((0, 0), (0, tp - t), (0, 0), (0, 0)))
    k, v = (jnp.pad(x, ((0, 0), (0, 0), (front, 0), (0, 0))) for x in (k, v))
    mask = jnp.pad(mask, ((0, 0), (0, tp - t), (front, 0)))
    if bias is not None:
        bias = jnp.pad(bias, ((0, 0), (0, 0), (0, tp - t), (front, 0)))
    qg = q.reshape(b, tp, hkv, g, d).transpose(0, 2, 3, 1, 4)  # [B, Hkv, G, T, D]
    take = jax.lax.dynamic_slice_in_dim

    def one_chunk(i):
        start = i * chunk
        qi = take(qg, start, chunk, axis=3).reshape(b, hkv, g * chunk, d)
        mi = take(mask, start, chunk, axis=1)
        bi = None if bias is None else take(bias, start, chunk, axis=2)

        def keys(at, size, state):  # keys [at, at + size) merged into the running softmax
            top, total, out = state
            scores = _block_scores(qi, take(k, at, size, axis=2), take(mi, at, size, axis=2), scale, softcap,
                                   None if bi is None else take(bi, at, size, axis=3), g)
            new_top = jnp.maximum(top, scores.max(axis=-1, keepdims=True))
            probs = jnp.exp(scores - new_top)
            values = jnp.einsum("bkqs,bksd->bkqd", probs.astype(v.dtype), take(v, at, size, axis=2),
                                preferred_element_type=jnp.float32)
            carry = jnp.exp(top - new_top)
            return new_top, total * carry + probs.sum(axis=-1, keepdims=True), out * carry + values

        end = jnp.minimum(offset + start + chunk, s) + front
        first = jnp.maximum(jnp.argmax(mi.any(axis=(0, 1))), front)  # keys before it no query of the chunk sees
        whole = (end - first) // block
        rest = end - whole * block
        state = (jnp.full((b, hkv, g * chunk, 1), NEG_INF, jnp.float32), jnp.zeros((b, hkv, g * chunk, 1), jnp.float32),
                 jnp.zeros((b, hkv, g * chunk, d), jnp.float32))
        state = jax.lax.fori_loop(0, whole, lambda j, st: keys(end - (j + 1) * block, block, st), state)
        parts = (rest - first + front - 1) // front
        _, total, out = jax.lax.fori_loop(0, parts, lambda j, st: keys(rest - (j + 1) * front, front, st), state)
        return (out / total).astype(v.dtype).reshape(b, hkv, g, chunk, d)

    outs = jax.lax.map(one_chunk, jnp.arange(tp // chunk))  # [n, B, Hkv, G, C, D]
    out = outs.transpose(1, 0, 4, 2, 3, 5).reshape(b, tp, h * d)
    return out[:, :t]


ATTENTION_ENV = "BABELEVAL_ATTENTION"


def attention_implementation() -> str | None:
    """None: babeleval's kernels above (CPU: the chunked loops were tuned there); else the
    `implementation` of jax.nn.dot_product_attention ("" lets JAX pick: cuDNN's flash kernel on
    GPU, XLA's on TPU). BABELEVAL_ATTENTION=kernels|xla|cudnn|auto chooses (default auto)."""
    chosen = os.environ.get(ATTENTION_ENV, "auto")
    if chosen not in ("auto", "kernels", "xla", "cudnn"):
        raise BabelevalError(f"{ATTENTION_ENV}={chosen!r}: expected auto, kernels, xla or cudnn")
    if chosen == "auto":
        return None if jax.default_backend() == "cpu" else ""
    return None if chosen == "kernels" else chosen


def attend_fused(q, k, v, mask, scale, implementation: str = ""):
    """attend through jax.nn.dot_product_attention (no softcap, no ALiBi bias: those keep the
    kernels). q: [B, T, H, D]; k, v: [B, Hkv, S, D] (the cache layout); mask: [B, T, S]."""
    b, t, h, d = q.shape
    out = jax.nn.dot_product_attention(q, k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3), mask=mask[:, None],
                                       scale=scale, implementation=implementation or None)
    return out.reshape(b, t, h * d)


class MLP(nn.Module):
    """Gated (gate * up -> down, Llama/Gemma) or plain (up -> act -> down, GPT-2/BLOOM/BERT)."""

    hidden: int
    inner: int
    kind: str
    activation: str
    bias: bool
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x):
        act = ACTIVATIONS[self.activation]
        dense = lambda n, name: nn.Dense(n, use_bias=self.bias, dtype=self.dtype, param_dtype=self.dtype, name=name)
        up = dense(self.inner, "up")(x)
        h = act(dense(self.inner, "gate")(x)) * up if self.kind == "gated" else act(up)
        return dense(self.hidden, "down")(h)
