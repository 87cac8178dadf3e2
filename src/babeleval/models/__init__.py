"""Model modules and what every caller needs to build one from a config."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .config import DecoderConfig, EncoderConfig, ModelConfig, Seq2SeqConfig
from .decoder import Decoder
from .encoder import Encoder
from .seq2seq import EncoderDecoder

DTYPES = {"float32": jnp.float32, "fp32": jnp.float32, "bfloat16": jnp.bfloat16, "bf16": jnp.bfloat16}


def build_module(cfg: ModelConfig, dtype=jnp.float32):
    if isinstance(cfg, Seq2SeqConfig):
        return EncoderDecoder(cfg, dtype)
    return Encoder(cfg, dtype) if isinstance(cfg, EncoderConfig) else Decoder(cfg, dtype)


def init_params(cfg: ModelConfig, rng, dtype=jnp.float32):
    """Random parameters (for from-scratch training and the shapes every loader checks against)."""
    module = build_module(cfg, dtype)
    tokens = jnp.zeros((1, 4), jnp.int32)
    if isinstance(cfg, EncoderConfig):
        return module.init(rng, tokens, jnp.ones_like(tokens))["params"]
    if isinstance(cfg, Seq2SeqConfig):
        full = jnp.ones((1, 4, 4), bool)
        return module.init(rng, tokens, jnp.arange(4)[None], full, tokens, jnp.arange(4)[None], full, full)["params"]
    mask = jnp.tril(jnp.ones((1, 4, 4), bool))
    return module.init(rng, tokens, jnp.arange(4)[None], mask, method=Decoder.init_all)["params"]


def abstract_params(cfg: ModelConfig, dtype=jnp.float32):
    return jax.eval_shape(lambda: init_params(cfg, jax.random.PRNGKey(0), dtype))


__all__ = ["DecoderConfig", "EncoderConfig", "Seq2SeqConfig", "ModelConfig", "Decoder", "Encoder", "EncoderDecoder",
           "build_module", "init_params",
           "abstract_params", "DTYPES"]
