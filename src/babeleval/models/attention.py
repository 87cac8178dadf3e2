"""Attention over an explicit [B, T, S] mask, computed four ways: one softmax over all keys
(encoders; causal inputs of one query chunk), query chunks looped over, each over the key
blocks it sees, merged online (flash-attention style; causal inputs), one decode query over a
cache (keys-major), and jax.nn.dot_product_attention's fused kernels (cuDNN or XLA) where
BABELEVAL_ATTENTION asks."""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp

from ..errors import BabelevalError

NEG_INF = -1e30


# Causal inputs loop over their query chunks instead of unrolling them: a 1,024-token prefill
# compiles in 9 s, not 81 s; 4 rows of 512 after a 1,024-token prefix compile in 9 s, not 83 s,
# and run as fast (7.3 vs 7.6 s). (Rows after a prefix without query chunks, all keys in
# 512-blocks, ran 3x slower: 23 s.) Short lines loop too: a chunk skips the keys of a packed
# line's other rows, so a line's length no longer sets its attention cost (engine/scoring.py
# packs every row of a call into lines of one length): XCOPA's ~40-token questions in
# 512-token lines score as fast as in 128-token lines (13.1-13.8 s against 13.2-13.4 s, 600
# requests, SmolLM2-135M), where unrolled chunks over all earlier keys took 11% longer.


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


def _attend_block(q, k, v, mask, scale, softcap, bias):
    """q: [B, T, H, D]; k, v: [B, Hkv, S, D] (head-major, the KV cache's layout); mask: [B, T, S].
    The grouped query heads are stacked along the rows of one [G*T, D] x [D, S] product per KV
    head, one softmax over all keys; the division comes last, on [G*T, D] instead of [G*T, S]."""
    b, t, h, d = q.shape
    hkv = k.shape[1]
    g = h // hkv
    q = q.reshape(b, t, hkv, g, d).transpose(0, 2, 3, 1, 4).reshape(b, hkv, g * t, d)
    scores = _block_scores(q, k, mask, scale, softcap, bias, g)
    probs = jnp.exp(scores - scores.max(axis=-1, keepdims=True))
    out = jnp.einsum("bkqs,bksd->bkqd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
    out = (out / probs.sum(axis=-1, keepdims=True)).astype(v.dtype)
    return out.reshape(b, hkv, g, t, d).transpose(0, 3, 1, 2, 4).reshape(b, t, h * d)


def attend(q, k, v, mask, scale, softcap=None, bias=None, causal=False, offset: int = 0):
    """Grouped-query attention over an explicit boolean mask.

    q: [B, T, H, D]; k, v: [B, Hkv, S, D]; mask: [B, T, S]; bias: [B, H, T, S] or None.
    causal: query i never attends to a key past index i (keys indexed from 0 like the
    queries, as in a prefill or a packed row); inputs longer than a query chunk then run in
    chunks, each against the keys from the first any of its queries sees to its end only,
    which skips the masked upper triangle and a packed line's other rows.
    offset: keys before the first query (a cached prefix): query i may see keys up to offset + i.
    """
    t = q.shape[1]
    if t == 1:
        return _attend_one_query(q, k, v, mask, scale, softcap, bias)
    chunk, block = causal_chunks(t)
    if not causal or t <= chunk:
        return _attend_block(q, k, v, mask, scale, softcap, bias)
    return _attend_causal_loop(q, k, v, mask, scale, softcap, bias, chunk, block, offset)


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
    block = min(block, s)  # fewer keys than a block: one block of all of them
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


def write_cache(cache, k, v, index, layer=0):
    """A layer's new keys and values [B, H, T, D] written at slot `index` into its group's cache
    (k, v [B, repeats, H, S, D], the layer's at `layer` along axis 1: written in place, a
    scanned group's cache is its loop's carry); returns the layer's whole cached keys, values
    and the updated cache."""
    def write(stack, new):
        stack = jax.lax.dynamic_update_slice(stack, new[:, None].astype(stack.dtype), (0, layer, 0, index, 0))
        return stack, jax.lax.dynamic_index_in_dim(stack, layer, axis=1, keepdims=False)

    (k_stack, k), (v_stack, v) = write(cache["k"], k), write(cache["v"], v)
    return k, v, {"k": k_stack, "v": v_stack}


ATTENTION_ENV = "BABELEVAL_ATTENTION"


ATTENTION_CHOICES = ("auto", "kernels", "xla", "cudnn")


def attention_choice() -> str:
    """The run's choice, made at its edge (load_model writes it into the model config, as
    MaxText's `attention` setting): BABELEVAL_ATTENTION=kernels|xla|cudnn|auto (default auto)."""
    chosen = os.environ.get(ATTENTION_ENV, "auto")
    if chosen not in ATTENTION_CHOICES:
        raise BabelevalError(f"{ATTENTION_ENV}={chosen!r}: expected auto, kernels, xla or cudnn")
    return chosen


def fused_implementation(choice: str) -> str | None:
    """A config's `attention` as the models use it. None: babeleval's kernels above (CPU: the
    chunked loops were tuned there); else the `implementation` of jax.nn.dot_product_attention
    ("" lets JAX pick: cuDNN's flash kernel on GPU, XLA's on TPU). auto: the kernels on CPU,
    JAX's pick elsewhere."""
    if choice == "auto":
        return None if jax.default_backend() == "cpu" else ""
    return None if choice == "kernels" else choice


def attend_fused(q, k, v, mask, scale, implementation: str = ""):
    """attend through jax.nn.dot_product_attention (no softcap, no ALiBi bias: those keep the
    kernels). q: [B, T, H, D]; k, v: [B, Hkv, S, D] (the cache layout); mask: [B, T, S]."""
    b, t, h, d = q.shape
    out = jax.nn.dot_product_attention(q, k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3), mask=mask[:, None],
                                       scale=scale, implementation=implementation or None)
    return out.reshape(b, t, h * d)
