"""Parameters that may be quantized: a weight leaf is a dense array or a QArray (quant/), which
is dequantized here, inside the jitted forward, just before its matmul (never as a whole model).
Dense and Embed are flax's nn.Dense and nn.Embed (same parameter names, initialisers and
arithmetic) reading either kind of leaf."""
from __future__ import annotations

from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax.linen.dtypes import promote_dtype
from flax.linen.linear import default_embed_init, default_kernel_init

from ..quant import ORDER, QArray, is_quantized


def stored(module: nn.Module, name: str, init, shape: tuple, dtype):
    """The parameter as held: a QArray left quantized, else the (shape-checked) dense array."""
    if module.has_variable("params", name):
        value = module.get_variable("params", name)
        if is_quantized(value):
            return value
    return module.param(name, init, shape, dtype)


def as_dense(value, dtype):
    """A leaf as a dense array: a QArray dequantized to dtype, a dense array as it is."""
    return value.dequantize(dtype) if is_quantized(value) else value


def vocab_rows(value, start, size: int, dtype):
    """Rows start .. start + size - 1 (start may be traced) of a vocabulary matrix as stored, [size, D]
    dense in dtype: an embedding table [V, D] or a head kernel given as its stored [V, D] (a QArray's
    stored rows are the vocabulary either way). A QArray's blocks are sliced before they are
    dequantized, so only those rows are ever dense (engine/head.py)."""
    if is_quantized(value):
        fields = {k: v if k == ORDER else jax.lax.dynamic_slice_in_dim(v, start, size, axis=0)
                  for k, v in value.fields.items()}
        return QArray(fields, value.layout, (size,) + value.stored_shape[1:]).dequantize(dtype)
    return jax.lax.dynamic_slice_in_dim(value, start, size, axis=0).astype(dtype)


def weight(module: nn.Module, name: str, init, shape: tuple, dtype):
    """The parameter as a dense array in dtype (a QArray dequantized here)."""
    return as_dense(stored(module, name, init, shape, dtype), dtype)


class Dense(nn.Module):
    features: int
    use_bias: bool = True
    dtype: Any = None
    param_dtype: Any = jnp.float32
    dot_general: Callable = jax.lax.dot_general

    @nn.compact
    def __call__(self, x):
        kernel = weight(self, "kernel", default_kernel_init, (x.shape[-1], self.features), self.param_dtype)
        bias = self.param("bias", nn.initializers.zeros, (self.features,), self.param_dtype) if self.use_bias else None
        x, kernel, bias = promote_dtype(x, kernel, bias, dtype=self.dtype)
        y = self.dot_general(x, kernel, (((x.ndim - 1,), (0,)), ((), ())))
        return y if bias is None else y + jnp.reshape(bias, (1,) * (y.ndim - 1) + (-1,))


class Embed(nn.Module):
    """An embedding table; a quantized one is dequantized only at the looked-up rows (and whole
    for a tied head: `table`)."""

    num_embeddings: int
    features: int
    dtype: Any = None
    param_dtype: Any = jnp.float32

    def setup(self):
        self.embedding = stored(self, "embedding", default_embed_init, (self.num_embeddings, self.features),
                                self.param_dtype)

    def __call__(self, ids):
        if isinstance(self.embedding, QArray):
            return self.embedding.take(ids, self.dtype or jnp.float32)
        (embedding,) = promote_dtype(self.embedding, dtype=self.dtype, inexact=False)
        return jnp.take(embedding, ids, axis=0)

    def table(self):
        return as_dense(self.embedding, self.dtype or self.param_dtype)
