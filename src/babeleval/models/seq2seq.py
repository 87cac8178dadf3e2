"""The encoder-decoder transformer, written once and specialised by Seq2SeqConfig: T5 v1.1,
mT5, mT0, Aya-101, MADLAD-400, umT5 and M2M100 / NLLB.

Like the decoder, every method takes explicit positions and [B, T, S] masks, so one module
serves packed scoring lines (several contexts per encoder line, their options per decoder line)
and cached greedy decoding alike. The encoder runs once (encode), every decoder layer's
cross-attention keys and values are computed once from its output (cross_keys_values), and the
decoder reads them for as many continuation rows or decode steps as the caller runs (decode).
"""
from __future__ import annotations

import math
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from .attention import attend, attend_fused, fused_implementation, write_cache
from .config import Seq2SeqConfig
from .layers import MLP, Norm, sinusoids


def relative_buckets(distance, bidirectional: bool, num_buckets: int, max_distance: int):
    """T5's relative position buckets of distance = key position - query position: exact for
    the nearest half of a direction's buckets, log-spaced up to max_distance beyond (computed in
    float32 as transformers does, so that no distance lands in a neighbouring bucket)."""
    buckets = jnp.zeros_like(distance)
    if bidirectional:
        num_buckets //= 2
        buckets = (distance > 0).astype(distance.dtype) * num_buckets
        distance = jnp.abs(distance)
    else:
        distance = -jnp.minimum(distance, 0)
    exact = num_buckets // 2
    ratio = jnp.log(jnp.maximum(distance, 1).astype(jnp.float32) / exact) / np.float32(math.log(max_distance / exact))
    large = jnp.minimum(exact + (ratio * (num_buckets - exact)).astype(distance.dtype), num_buckets - 1)
    return buckets + jnp.where(distance < exact, distance, large)


class Attention(nn.Module):
    """Self- or cross-attention: keys and values are computed apart (keys_values), so that a
    cache or an encoder output's projections can be reused."""

    cfg: Seq2SeqConfig
    dtype: jnp.dtype

    def setup(self):
        cfg = self.cfg
        dense = lambda n: nn.Dense(n, use_bias=cfg.attn_bias, dtype=self.dtype, param_dtype=self.dtype)
        inner = cfg.num_heads * cfg.head_dim
        self.q, self.k, self.v, self.o = dense(inner), dense(inner), dense(inner), dense(cfg.hidden_size)

    def keys_values(self, x):
        """x [B, S, D] -> keys, values [B, H, S, head_dim] (the cache layout)."""
        b, s, _ = x.shape
        split = lambda y: y.reshape(b, s, self.cfg.num_heads, self.cfg.head_dim).transpose(0, 2, 1, 3)
        return split(self.k(x)), split(self.v(x))

    def __call__(self, x, k, v, mask, bias=None):
        cfg = self.cfg
        b, t, _ = x.shape
        q = self.q(x).reshape(b, t, cfg.num_heads, cfg.head_dim)
        scale = cfg.attn_scale if cfg.attn_scale is not None else cfg.head_dim ** -0.5
        fused = fused_implementation(cfg.attention)
        if fused is not None and bias is None:
            return self.o(attend_fused(q, k, v, mask, scale, fused))
        return self.o(attend(q, k, v, mask, scale, None, bias))


def _norm(cfg: Seq2SeqConfig) -> Norm:
    return Norm(cfg.norm, cfg.norm_eps)


def _mlp(cfg: Seq2SeqConfig, dtype) -> MLP:
    return MLP(cfg.hidden_size, cfg.intermediate_size, cfg.mlp, cfg.activation, cfg.mlp_bias, dtype)


class EncoderLayer(nn.Module):
    cfg: Seq2SeqConfig
    dtype: jnp.dtype

    def setup(self):
        self.attn_norm, self.attn = _norm(self.cfg), Attention(self.cfg, self.dtype)
        self.mlp_norm, self.mlp = _norm(self.cfg), _mlp(self.cfg, self.dtype)

    def __call__(self, x, mask, bias):
        h = self.attn_norm(x)
        x = x + self.attn(h, *self.attn.keys_values(h), mask, bias)
        return x + self.mlp(self.mlp_norm(x))


class DecoderLayer(nn.Module):
    cfg: Seq2SeqConfig
    dtype: jnp.dtype

    def setup(self):
        self.self_norm, self.self_attn = _norm(self.cfg), Attention(self.cfg, self.dtype)
        self.cross_norm, self.cross_attn = _norm(self.cfg), Attention(self.cfg, self.dtype)
        self.mlp_norm, self.mlp = _norm(self.cfg), _mlp(self.cfg, self.dtype)

    def cross_keys_values(self, encoded):
        return self.cross_attn.keys_values(encoded)

    def __call__(self, x, mask, bias, cross, cross_mask, cache=None, cache_index=None):
        h = self.self_norm(x)
        k, v = self.self_attn.keys_values(h)
        if cache is not None:
            k, v, cache = write_cache(cache, k, v, cache_index)
        x = x + self.self_attn(h, k, v, mask, bias)
        x = x + self.cross_attn(self.cross_norm(x), cross["k"], cross["v"], cross_mask)
        return x + self.mlp(self.mlp_norm(x)), cache


class EncoderDecoder(nn.Module):
    cfg: Seq2SeqConfig
    dtype: jnp.dtype = jnp.float32

    def setup(self):
        cfg = self.cfg
        self.embed = nn.Embed(cfg.vocab_size, cfg.hidden_size, dtype=self.dtype, param_dtype=self.dtype)
        self.encoder = [EncoderLayer(cfg, self.dtype) for _ in range(cfg.encoder_layers)]
        self.decoder = [DecoderLayer(cfg, self.dtype) for _ in range(cfg.decoder_layers)]
        self.encoder_norm, self.decoder_norm = _norm(cfg), _norm(cfg)
        table = lambda: nn.Embed(cfg.relative_buckets, cfg.num_heads, dtype=jnp.float32, param_dtype=self.dtype)
        self.encoder_bias = [table() for i in range(cfg.encoder_layers) if cfg.has_relative_bias(i)]  # [] unless relative
        self.decoder_bias = [table() for i in range(cfg.decoder_layers) if cfg.has_relative_bias(i)]
        if not cfg.tie_embeddings:
            self.lm_head = nn.Dense(cfg.vocab_size, use_bias=False, dtype=self.dtype, param_dtype=self.dtype,
                                    dot_general=partial(jax.lax.dot_general, preferred_element_type=jnp.float32))

    def _embed(self, tokens, positions):
        """positions count from 0 (M2M100's table is read after its padding index, as its ids are)."""
        cfg = self.cfg
        x = self.embed(tokens)
        if cfg.embed_scale:
            x = x * jnp.asarray(cfg.hidden_size ** 0.5, dtype=self.dtype)
        if cfg.position == "sinusoidal":
            x = x + sinusoids(positions + cfg.pad_token_id + 1, cfg.hidden_size).astype(self.dtype)
        return x

    def _biases(self, tables, n: int, q_positions, k_positions, bidirectional: bool):
        """Every layer's relative position bias [B, H, T, S] (one shared by all layers but for
        umT5), or None without relative positions."""
        cfg = self.cfg
        if cfg.position != "relative":
            return [None] * n
        buckets = relative_buckets(k_positions[:, None, :] - q_positions[:, :, None], bidirectional,
                                   cfg.relative_buckets, cfg.relative_max_distance)
        biases = [table(buckets).transpose(0, 3, 1, 2) for table in tables]
        return biases if cfg.relative_per_layer else biases * n

    def encode(self, tokens, positions, mask):
        """tokens, positions: [B, S]; mask: [B, S, S] -> final-normed states [B, S, D]."""
        x = self._embed(tokens, positions)
        biases = self._biases(self.encoder_bias, len(self.encoder), positions, positions, True)
        for layer, bias in zip(self.encoder, biases):
            x = layer(x, mask, bias)
        return self.encoder_norm(x)

    def cross_keys_values(self, encoded):
        """Every decoder layer's cross-attention keys and values of an encoder output, computed once."""
        return [dict(zip("kv", layer.cross_keys_values(encoded))) for layer in self.decoder]

    def decode(self, tokens, positions, mask, cross, cross_mask, cache=None, cache_index=None, kv_positions=None):
        """tokens, positions: [B, T]; mask: [B, T, S] over the decoder's own keys (S = T without a
        cache, whose key positions are kv_positions); cross: cross_keys_values; cross_mask:
        [B, T, S_enc]. Returns the final-normed states [B, T, D] and the updated cache (or None)."""
        x = self._embed(tokens, positions)
        kv_positions = positions if kv_positions is None else kv_positions
        biases = self._biases(self.decoder_bias, len(self.decoder), positions, kv_positions, False)
        new_cache = []
        for i, (layer, bias) in enumerate(zip(self.decoder, biases)):
            x, layer_cache = layer(x, mask, bias, cross[i], cross_mask, None if cache is None else cache[i], cache_index)
            new_cache.append(layer_cache)
        return self.decoder_norm(x), (None if cache is None else new_cache)

    def logits(self, hidden):
        """float32 vocabulary logits (original T5 scales the states by hidden_size ** -0.5 first)."""
        if self.cfg.head_scale:
            hidden = hidden * jnp.asarray(self.cfg.hidden_size ** -0.5, dtype=hidden.dtype)
        if self.cfg.tie_embeddings:
            return jnp.dot(hidden, self.embed.embedding.T, preferred_element_type=jnp.float32).astype(jnp.float32)
        return self.lm_head(hidden).astype(jnp.float32)

    def __call__(self, tokens, positions, mask, dec_tokens, dec_positions, dec_mask, cross_mask):
        """Logits [B, T, V] of decoder rows after their encoder rows (parity checks, and init)."""
        cross = self.cross_keys_values(self.encode(tokens, positions, mask))
        hidden, _ = self.decode(dec_tokens, dec_positions, dec_mask, cross, cross_mask)
        return self.logits(hidden)


def empty_cache(cfg: Seq2SeqConfig, batch: int, length: int, dtype=jnp.float32):
    shape = (batch, cfg.num_heads, length, cfg.head_dim)
    return [{"k": jnp.zeros(shape, dtype), "v": jnp.zeros(shape, dtype)} for _ in range(cfg.decoder_layers)]


def encoder_inputs(valid):
    """Positions (counting real tokens) and the [B, S, S] mask of padded encoder rows valid [B, S]
    (padding anywhere; a padding token sees itself): what `EncoderDecoder.encode` takes."""
    positions = jnp.maximum(jnp.cumsum(valid, axis=1) - 1, 0)
    return positions, valid[:, None, :] | jnp.eye(valid.shape[1], dtype=bool)[None]
