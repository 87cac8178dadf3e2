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
from .stack import empty_caches, layer_groups, scanned
from .weights import Dense, Embed


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
        dense = lambda n: Dense(n, use_bias=cfg.attn_bias, dtype=self.dtype, param_dtype=self.dtype)
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


def _norm(cfg: Seq2SeqConfig, name: str | None = None) -> Norm:
    return Norm(cfg.norm, cfg.norm_eps, name=name)


def _mlp(cfg: Seq2SeqConfig, dtype, name: str) -> MLP:
    return MLP(cfg.hidden_size, cfg.intermediate_size, cfg.mlp, cfg.activation, cfg.mlp_bias, dtype, name=name)


class EncoderLayer(nn.Module):
    cfg: Seq2SeqConfig
    layer: int
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x, mask, buckets, bias):
        """bias: the stack's shared relative bias, unless this layer has its own table (umT5's
        layers, T5's first): then computed from the buckets and returned for the layers after."""
        bias = _own_bias(self.cfg, self.layer, buckets, bias, self.dtype)
        attn = Attention(self.cfg, self.dtype, name="attn")
        h = _norm(self.cfg, "attn_norm")(x)
        x = x + attn(h, *attn.keys_values(h), mask, bias)
        return x + _mlp(self.cfg, self.dtype, "mlp")(_norm(self.cfg, "mlp_norm")(x)), bias


class DecoderLayer(nn.Module):
    cfg: Seq2SeqConfig
    layer: int
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x, mask, buckets, bias, cross, cross_mask, cache=None, cache_index=None, slot=0, encoded=None):
        """encoded given: this layer's cross-attention keys and values of it, computed once (k, v
        [B, H, S_enc, D]); else the layer's output and (bias, the updated cache)."""
        cfg = self.cfg
        cross_attn = Attention(cfg, self.dtype, name="cross_attn")
        if encoded is not None:
            return dict(zip("kv", cross_attn.keys_values(encoded)))
        bias = _own_bias(cfg, self.layer, buckets, bias, self.dtype)
        self_attn = Attention(cfg, self.dtype, name="self_attn")
        h = _norm(cfg, "self_norm")(x)
        k, v = self_attn.keys_values(h)
        if cache is not None:
            k, v, cache = write_cache(cache, k, v, cache_index, slot)
        x = x + self_attn(h, k, v, mask, bias)
        x = x + cross_attn(_norm(cfg, "cross_norm")(x), cross["k"], cross["v"], cross_mask)
        return x + _mlp(cfg, self.dtype, "mlp")(_norm(cfg, "mlp_norm")(x)), (bias, cache)


def _own_bias(cfg: Seq2SeqConfig, layer: int, buckets, bias, dtype):
    if not cfg.has_relative_bias(layer):
        return bias
    table = Embed(cfg.relative_buckets, cfg.num_heads, dtype=jnp.float32, param_dtype=dtype, name="relative_bias")
    return table(buckets).transpose(0, 3, 1, 2)  # [B, H, T, S]


class EncoderRepeat(nn.Module):
    """One repeat of a scanned encoder group (layers first .. first + period - 1, as layer_<j>)."""

    cfg: Seq2SeqConfig
    first: int
    period: int
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x, _, mask, buckets, bias):
        for j in range(self.period):
            x, _bias = EncoderLayer(self.cfg, self.first + j, self.dtype, name=f"layer_{j}")(x, mask, buckets, bias)
        return x, None


class DecoderRepeat(nn.Module):
    """One repeat of a scanned decoder group. carry: (x, the group's self-attention cache or None);
    xs: (the repeat's index, its cross keys and values). With `encoded`: the repeat's cross
    keys and values (as the scan's outputs: [repeats, B, H, S_enc, D])."""

    cfg: Seq2SeqConfig
    first: int
    period: int
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, carry, xs, mask, buckets, bias, cross_mask, cache_index, encoded=None):
        layers = [DecoderLayer(self.cfg, self.first + j, self.dtype, name=f"layer_{j}") for j in range(self.period)]
        if encoded is not None:
            return carry, [layer(None, None, None, None, None, None, encoded=encoded) for layer in layers]
        (x, cache), (slot, cross) = carry, xs
        new = []
        for j, layer in enumerate(layers):
            x, (_bias, layer_cache) = layer(x, mask, buckets, bias, cross[j], cross_mask,
                                            None if cache is None else cache[j], cache_index, slot)
            new.append(layer_cache)
        return (x, None if cache is None else new), None


def stack_groups(cfg: Seq2SeqConfig, side: str):
    """The encoder's or decoder's layer groups (models/stack.py): a layer with a relative bias
    table of its own (T5's first) apart from those without."""
    n = cfg.encoder_layers if side == "encoder" else cfg.decoder_layers
    kinds = ["own bias table" if cfg.has_relative_bias(i) else "shared bias" for i in range(n)]
    return layer_groups(kinds, 1, what=f"{cfg.arch} {side} layer")


class EncoderDecoder(nn.Module):
    cfg: Seq2SeqConfig
    dtype: jnp.dtype = jnp.float32

    def setup(self):
        cfg = self.cfg
        self.embed = Embed(cfg.vocab_size, cfg.hidden_size, dtype=self.dtype, param_dtype=self.dtype)
        self.encoder_groups, self.decoder_groups = stack_groups(cfg, "encoder"), stack_groups(cfg, "decoder")
        # encoder_scan_<first> / encoder_layers_<i>, decoder_scan_<first> / decoder_layers_<i>
        self.encoder_scan = {g.first: scanned(EncoderRepeat, cfg, g, self.dtype, 3) for g in self.encoder_groups if g.scanned}
        self.encoder_layers = {i: EncoderLayer(cfg, i, self.dtype) for g in self.encoder_groups if not g.scanned
                               for i in range(g.first, g.end)}
        self.decoder_scan = {g.first: scanned(DecoderRepeat, cfg, g, self.dtype, 6) for g in self.decoder_groups if g.scanned}
        self.decoder_layers = {i: DecoderLayer(cfg, i, self.dtype) for g in self.decoder_groups if not g.scanned
                               for i in range(g.first, g.end)}
        self.encoder_norm, self.decoder_norm = _norm(cfg), _norm(cfg)
        if not cfg.tie_embeddings:
            self.lm_head = Dense(cfg.vocab_size, use_bias=False, dtype=self.dtype, param_dtype=self.dtype,
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

    def _buckets(self, q_positions, k_positions, bidirectional: bool):
        """T5's relative position buckets [B, T, S] (None without relative positions)."""
        cfg = self.cfg
        if cfg.position != "relative":
            return None
        return relative_buckets(k_positions[:, None, :] - q_positions[:, :, None], bidirectional,
                                cfg.relative_buckets, cfg.relative_max_distance)

    def encode(self, tokens, positions, mask):
        """tokens, positions: [B, S]; mask: [B, S, S] -> final-normed states [B, S, D]."""
        x, bias = self._embed(tokens, positions), None
        buckets = self._buckets(positions, positions, True)
        for g in self.encoder_groups:
            if g.scanned:
                x, _ = self.encoder_scan[g.first](x, jnp.arange(g.repeats), mask, buckets, bias)
            else:
                for i in range(g.first, g.end):
                    x, bias = self.encoder_layers[i](x, mask, buckets, bias)
        return self.encoder_norm(x)

    def cross_keys_values(self, encoded):
        """Every decoder layer's cross-attention keys and values of an encoder output, computed
        once: per group, per layer of its body, k, v [B, H, S_enc, D] ([repeats, ...] scanned)."""
        out = []
        for g in self.decoder_groups:
            if g.scanned:
                out.append(self.decoder_scan[g.first]((None, None), jnp.arange(g.repeats), None, None, None, None, None,
                                                      encoded)[1])
            else:
                out.append([self.decoder_layers[i](None, None, None, None, None, None, encoded=encoded)
                            for i in range(g.first, g.end)])
        return out

    def decode(self, tokens, positions, mask, cross, cross_mask, cache=None, cache_index=None, kv_positions=None):
        """tokens, positions: [B, T]; mask: [B, T, S] over the decoder's own keys (S = T without a
        cache, whose key positions are kv_positions); cross: cross_keys_values; cross_mask:
        [B, T, S_enc]. Returns the final-normed states [B, T, D] and the updated cache (or None)."""
        x, bias = self._embed(tokens, positions), None
        kv_positions = positions if kv_positions is None else kv_positions
        buckets = self._buckets(positions, kv_positions, False)
        new_cache = []
        for k, g in enumerate(self.decoder_groups):
            unit = None if cache is None else cache[k]
            if g.scanned:
                (x, unit), _ = self.decoder_scan[g.first]((x, unit), (jnp.arange(g.repeats), cross[k]), mask, buckets,
                                                          bias, cross_mask, cache_index, None)
            else:
                new = []
                for j, i in enumerate(range(g.first, g.end)):
                    x, (bias, layer_cache) = self.decoder_layers[i](x, mask, buckets, bias, cross[k][j], cross_mask,
                                                                    None if unit is None else unit[j], cache_index)
                    new.append(layer_cache)
                unit = None if unit is None else new
            new_cache.append(unit)
        return self.decoder_norm(x), (None if cache is None else new_cache)

    def logits(self, hidden):
        """float32 vocabulary logits (original T5 scales the states by hidden_size ** -0.5 first)."""
        if self.cfg.head_scale:
            hidden = hidden * jnp.asarray(self.cfg.hidden_size ** -0.5, dtype=hidden.dtype)
        if self.cfg.tie_embeddings:
            return jnp.dot(hidden, self.embed.table().T, preferred_element_type=jnp.float32).astype(jnp.float32)
        return self.lm_head(hidden).astype(jnp.float32)

    def __call__(self, tokens, positions, mask, dec_tokens, dec_positions, dec_mask, cross_mask):
        """Logits [B, T, V] of decoder rows after their encoder rows (parity checks, and init)."""
        cross = self.cross_keys_values(self.encode(tokens, positions, mask))
        hidden, _ = self.decode(dec_tokens, dec_positions, dec_mask, cross, cross_mask)
        return self.logits(hidden)


def empty_cache(cfg: Seq2SeqConfig, batch: int, length: int, dtype=jnp.float32):
    """The decoder's self-attention cache: per group, per layer of its body, k, v [B, repeats, H, length, D]."""
    return empty_caches(stack_groups(cfg, "decoder"), (batch, cfg.num_heads, length, cfg.head_dim), dtype)


def encoder_inputs(valid):
    """Positions (counting real tokens) and the [B, S, S] mask of padded encoder rows valid [B, S]
    (padding anywhere; a padding token sees itself): what `EncoderDecoder.encode` takes."""
    positions = jnp.maximum(jnp.cumsum(valid, axis=1) - 1, 0)
    return positions, valid[:, None, :] | jnp.eye(valid.shape[1], dtype=bool)[None]
