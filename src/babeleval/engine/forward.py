"""Jitted forward passes shared by scoring, generation and embedding."""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from ..models import Decoder, build_module


def padded_causal(attention_mask):
    """Positions and [B, T, T] mask for a padded batch (left or right padding)."""
    valid = attention_mask.astype(bool)
    positions = jnp.maximum(jnp.cumsum(valid, axis=1) - 1, 0)
    t = attention_mask.shape[1]
    causal = jnp.tril(jnp.ones((t, t), bool))
    return positions, causal[None] & valid[:, None, :] & valid[:, :, None] | jnp.eye(t, dtype=bool)[None]


@partial(jax.jit, static_argnames=("config", "dtype"))
def decoder_logits(params, tokens, attention_mask, config, dtype=jnp.float32):
    """Full-vocabulary logits of a padded batch: [B, T, V] (used for parity and generation prefill checks)."""
    module = build_module(config, dtype)
    positions, mask = padded_causal(attention_mask)
    hidden, _ = module.apply({"params": params}, tokens, positions, mask)
    return module.apply({"params": params}, hidden, method=Decoder.logits)


@partial(jax.jit, static_argnames=("config", "dtype"))
def encoder_forward(params, tokens, attention_mask, config, dtype=jnp.float32):
    return build_module(config, dtype).apply({"params": params}, tokens, attention_mask)
