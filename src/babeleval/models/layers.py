"""Building blocks shared by every model family: norms, rotary, sinusoidal and ALiBi
positions, and the two MLP shapes (attention: attention.py)."""
from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ..errors import BabelevalError
from .weights import Dense

ACTIVATIONS = {
    "silu": jax.nn.silu,
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "relu": jax.nn.relu,
}


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
        dense = lambda n, name: Dense(n, use_bias=self.bias, dtype=self.dtype, param_dtype=self.dtype, name=name)
        up = dense(self.inner, "up")(x)
        h = act(dense(self.inner, "gate")(x)) * up if self.kind == "gated" else act(up)
        return dense(self.hidden, "down")(h)
