"""The bidirectional encoder (BERT, XLM-R): post-norm blocks, then pooling.

Pooling (cls / mean / pooler) and L2 normalisation are config flags, so one module
serves sentence embedders like all-MiniLM and multilingual-e5.
"""
from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from .config import EncoderConfig
from .attention import attend
from .layers import MLP, Norm
from .weights import Dense, Embed


class SelfAttention(nn.Module):
    cfg: EncoderConfig
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x, mask):
        cfg = self.cfg
        b, t, _ = x.shape
        dense = lambda name: Dense(cfg.hidden_size, dtype=self.dtype, param_dtype=self.dtype, name=name)
        q, k, v = (dense(n)(x).reshape(b, t, cfg.num_heads, cfg.head_dim) for n in ("q", "k", "v"))
        k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)  # [B, H, T, D]
        return dense("o")(attend(q, k, v, mask, cfg.head_dim ** -0.5))


class EncoderBlock(nn.Module):
    cfg: EncoderConfig
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x, mask):
        cfg = self.cfg
        x = Norm("layer", cfg.norm_eps, name="attn_norm")(x + SelfAttention(cfg, self.dtype, name="attn")(x, mask))
        mlp = MLP(cfg.hidden_size, cfg.intermediate_size, "plain", cfg.activation, True, self.dtype, name="mlp")
        return Norm("layer", cfg.norm_eps, name="mlp_norm")(x + mlp(x))


class Encoder(nn.Module):
    cfg: EncoderConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, tokens, attention_mask):
        """tokens, attention_mask: [B, T] -> (hidden [B, T, D], pooled [B, D])."""
        cfg = self.cfg
        embed = lambda n, name: Embed(n, cfg.hidden_size, dtype=self.dtype, param_dtype=self.dtype, name=name)
        valid = attention_mask.astype(bool)
        if cfg.position_offset:  # XLM-R: positions count non-pad tokens, starting after padding_idx
            positions = jnp.cumsum(valid, axis=1) * valid + cfg.pad_token_id
        else:
            positions = jnp.broadcast_to(jnp.arange(tokens.shape[1]), tokens.shape)
        x = embed(cfg.vocab_size, "embed")(tokens) + embed(cfg.max_positions, "pos_embed")(positions)
        x = x + embed(cfg.type_vocab_size, "type_embed")(jnp.zeros_like(tokens))
        x = Norm("layer", cfg.norm_eps, name="embed_norm")(x)
        mask = jnp.broadcast_to(valid[:, None, :], (tokens.shape[0], tokens.shape[1], tokens.shape[1]))
        for i in range(cfg.num_layers):
            x = EncoderBlock(cfg, self.dtype, name=f"layers_{i}")(x, mask)
        pooler = Dense(cfg.hidden_size, dtype=self.dtype, param_dtype=self.dtype, name="pooler")
        pooled = pool(x, valid, cfg.pooling, False, jnp.tanh(pooler(x[:, 0])))
        for i, (_, out, bias, activation) in enumerate(cfg.dense):  # sentence-transformers Dense modules
            pooled = Dense(out, use_bias=bias, dtype=jnp.float32, param_dtype=self.dtype, name=f"dense_{i}")(pooled)
            pooled = jnp.tanh(pooled) if activation == "tanh" else pooled
        if cfg.normalize:
            pooled = pooled / jnp.maximum(jnp.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)
        return x, pooled


def pool(hidden, valid, mode: str, normalize: bool, pooler_out=None):
    """Sentence vector from token states: first token, masked mean, or BERT's tanh pooler."""
    if mode == "cls":
        out = hidden[:, 0]
    elif mode == "pooler":
        out = pooler_out
    else:
        w = valid[..., None].astype(jnp.float32)
        out = (hidden.astype(jnp.float32) * w).sum(1) / jnp.maximum(w.sum(1), 1e-9)
    out = out.astype(jnp.float32)
    if normalize:
        out = out / jnp.maximum(jnp.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
    return out
