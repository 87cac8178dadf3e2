"""The decoder transformer, written once and specialised by DecoderConfig.

Llama, Mistral, Qwen2/3, Gemma 1-3, GPT-2, BLOOM and our byte-level GPT are all this
module. The caller supplies token positions and an explicit [B, T, S] attention mask,
so one forward pass serves left/right padding, packed shared-prefix layouts and
KV-cached decoding alike. The head is a separate method so that callers can project
only the positions they score. The layers run as scanned groups of identical layers
(models/stack.py): a program holds each group's body once, whatever the depth.
"""
from __future__ import annotations

import functools
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from .config import DecoderConfig
from .attention import attend, attend_fused, fused_implementation, write_cache
from .layers import MLP, Norm, alibi_slopes, apply_rope, rope_frequencies, sinusoids
from .moe import MoE
from ..quant import is_quantized
from .stack import empty_caches, layer_groups, per_layer, scanned, smallest_period, stacked
from .weights import Dense, Embed, vocab_rows


def _norm(cfg: DecoderConfig, name: str, per_head: bool = False) -> Norm:
    return Norm(cfg.norm, cfg.norm_eps, cfg.norm_offset, cfg.norm_bias, per_head, name=name)


def _pre_norm(cfg: DecoderConfig, name: str, x):
    return _norm(cfg, name)(x) if cfg.pre_norm else x


class Attention(nn.Module):
    cfg: DecoderConfig
    layer: int
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x, positions, mask, kv_positions, cache=None, cache_index=None, queries=None, slot=0,
                 sliding=None):
        """queries: [B, K] indices along T of the only positions whose outputs are needed (their
        queries alone are computed; keys and values at every position); None: all. cache: the
        layer's group's k, v [B, repeats, Hkv, S, D], this layer's at index `slot` of axis 1.
        sliding: whether the layer attends through the sliding window (a traced flag inside a
        scan whose layers differ in it); None: the config's for this layer."""
        cfg = self.cfg
        b, t, _ = x.shape
        dense = lambda n, bias, name: Dense(n, use_bias=bias, dtype=self.dtype, param_dtype=self.dtype, name=name)
        xq, q_positions = x, positions
        if queries is not None:
            xq, q_positions, mask = _at(x, queries), _at(positions, queries), _at(mask, queries)
        q = dense(cfg.num_heads * cfg.head_dim, cfg.qkv_bias, "q")(xq)
        k = dense(cfg.num_kv_heads * cfg.head_dim, cfg.qkv_bias, "k")(x)
        v = dense(cfg.num_kv_heads * cfg.head_dim, cfg.qkv_bias, "v")(x).reshape(b, t, cfg.num_kv_heads, cfg.head_dim)
        if cfg.qk_norm and cfg.qk_norm_shape == "all":
            q, k = _norm(cfg, "q_norm")(q), _norm(cfg, "k_norm")(k)
        q = q.reshape(b, xq.shape[1], cfg.num_heads, cfg.head_dim)
        k = k.reshape(b, t, cfg.num_kv_heads, cfg.head_dim)
        if cfg.qk_norm and cfg.qk_norm_shape != "all":
            per_head = cfg.qk_norm_shape == "per_head"
            q, k = _norm(cfg, "q_norm", per_head)(q), _norm(cfg, "k_norm", per_head)(k)
        sliding = cfg.is_sliding(self.layer) if sliding is None else sliding
        if cfg.position == "rope":
            q, k = _rotary(cfg, sliding, q, k, q_positions, positions)
        k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)  # [B, Hkv, T, D], the cache layout
        if cache is not None:
            k, v, cache = write_cache(cache, k, v, cache_index, slot)
        distance = q_positions[:, :, None] - kv_positions[:, None, :]  # [B, T, S]
        if sliding is not False:
            mask = mask & _where(sliding, distance < cfg.sliding_window, True)
        bias = None
        if cfg.position == "alibi":
            bias = -jnp.asarray(alibi_slopes(cfg.num_heads))[None, :, None, None] * distance[:, None].astype(jnp.float32)
        scale = cfg.attn_scale or cfg.head_dim ** -0.5
        offset = cache_index if isinstance(cache_index, int) else 0  # a traced index: one query (decode)
        fused = fused_implementation(cfg.attention)
        if fused is not None and bias is None and not cfg.attn_softcap:
            out = attend_fused(q, k, v, mask, scale, fused)
        else:
            out = attend(q, k, v, mask, scale, cfg.attn_softcap, bias, causal=queries is None, offset=offset)
        return dense(cfg.hidden_size, cfg.out_bias, "o")(out), cache


class Block(nn.Module):
    cfg: DecoderConfig
    layer: int
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x, positions, mask, kv_positions, cache=None, cache_index=None, queries=None, slot=0,
                 sliding=None):
        cfg = self.cfg
        normed = _pre_norm(cfg, "attn_norm", x)
        h, cache = Attention(cfg, self.layer, self.dtype, name="attn")(
            normed, positions, mask, kv_positions, cache, cache_index, queries, slot, sliding
        )
        if cfg.sandwich_norm:
            h = _norm(cfg, "post_attn_norm")(h)
        at = (lambda y: y) if queries is None else (lambda y: _at(y, queries))
        if cfg.is_moe(self.layer):
            mlp = MoE(cfg, self.dtype, name="mlp")
        else:
            mlp = MLP(cfg.hidden_size, cfg.intermediate_size, cfg.mlp, cfg.activation, cfg.mlp_bias, self.dtype, name="mlp")
        if cfg.parallel_residual:  # both branches read the block's input
            mlp_in = at(normed) if cfg.shared_norm else _norm(cfg, "mlp_norm")(at(x))
            return at(x) + h + mlp(mlp_in), cache
        x = at(x) + h
        h = mlp(_pre_norm(cfg, "mlp_norm", x))
        if cfg.sandwich_norm:
            h = _norm(cfg, "post_mlp_norm")(h)
        return x + h, cache


class Layers(nn.Module):
    """One repeat of a scanned group's body: layers first .. first + period - 1 (as layer_<j>).
    carry: (x, the group's cache or None); step: (the repeat, the index along the stacked axis;
    the repeat's sliding flags [period], or None where the repeats do not differ in them);
    queries: the positions the body's last layer computes (Block), when it runs apart."""

    cfg: DecoderConfig
    first: int
    period: int
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, carry, step, positions, mask, kv_positions, cache_index, queries=None):
        (x, cache), (slot, sliding) = carry, step
        new = []
        for j in range(self.period):
            block = Block(self.cfg, self.first + j, self.dtype, name=f"layer_{j}")
            x, layer_cache = block(x, positions, mask, kv_positions, None if cache is None else cache[j], cache_index,
                                   queries if j == self.period - 1 else None, slot,
                                   None if sliding is None else sliding[j])
            new.append(layer_cache)
        return (x, None if cache is None else new), None


def layer_kind(cfg: DecoderConfig, layer: int) -> str:
    """What makes a layer's module differ from another's (models/stack.py groups by it): its MLP.
    Sliding and global attention differ only in numbers (the window, the rotary base), scanned
    as a per-layer flag: Gemma 2 and 3 and Cohere 2 scan one layer per step."""
    return "moe" if cfg.is_moe(layer) else "dense"


def sliding_flags(cfg: DecoderConfig, group) -> np.ndarray | None:
    """The group's layers' sliding flags [repeats, period], None where every repeat has the same
    (the body then knows each layer's statically)."""
    flags = np.array([[cfg.is_sliding(group.first + r * group.period + j) for j in range(group.period)]
                      for r in range(group.repeats)])
    return flags if (flags != flags[:1]).any() else None


@functools.lru_cache(maxsize=64)
def decoder_groups(cfg: DecoderConfig):
    """The decoder's layer groups: period cfg.layer_period, or the kinds' own (1 for a uniform
    stack, 2 for MoE layers every other layer)."""
    kinds = [layer_kind(cfg, i) for i in range(cfg.num_layers)]
    return layer_groups(kinds, cfg.layer_period or smallest_period(kinds), what=f"{cfg.arch} layer")


class Decoder(nn.Module):
    cfg: DecoderConfig
    dtype: jnp.dtype = jnp.float32

    def setup(self):
        cfg = self.cfg
        self.embed = Embed(cfg.vocab_size, cfg.hidden_size, dtype=self.dtype, param_dtype=self.dtype)
        if cfg.position == "learned":
            self.pos_embed = Embed(cfg.max_positions, cfg.hidden_size, dtype=self.dtype, param_dtype=self.dtype)
        if cfg.embed_norm:
            self.embed_norm = _norm(cfg, "embed_norm")
        self.groups = decoder_groups(cfg)
        self.scan = {g.first: scanned(Layers, cfg, g, self.dtype, 4) for g in self.groups if g.scanned}  # scan_<first>
        self.layers = {i: Block(cfg, i, self.dtype) for g in self.groups if not g.scanned
                       for i in range(g.first, g.end)}  # layers_<i>
        self.final_norm = _norm(cfg, "final_norm")
        if not cfg.tie_embeddings:
            self.lm_head = Dense(cfg.vocab_size, use_bias=False, dtype=self.dtype, param_dtype=self.dtype,
                                    dot_general=partial(jax.lax.dot_general, preferred_element_type=jnp.float32))

    def __call__(self, tokens, positions, mask, cache=None, cache_index=None, kv_positions=None, outputs=None):
        """tokens, positions: [B, T]; mask: [B, T, S] (S = T without a cache); outputs: [B, K]
        indices along T of the only positions whose hidden states are wanted (a prefill's last
        prompt tokens): the last layer then computes its keys and values everywhere but the rest
        at those K positions only (about 1/num_layers of a long prefill's work).

        Returns the final-normed hidden states [B, T, D] ([B, K, D] with outputs) and the updated
        cache (or None).
        """
        cfg = self.cfg
        x = self.embed(tokens)
        if cfg.embed_scale:
            x = x * jnp.asarray(cfg.hidden_size ** 0.5, dtype=self.dtype)
        if cfg.position == "learned":
            x = x + self.pos_embed(positions)
        if cfg.position == "sinusoidal":
            x = x + sinusoids(positions + cfg.position_offset, cfg.hidden_size, cfg.pad_token_id).astype(self.dtype)
        if cfg.embed_norm:
            x = self.embed_norm(x)
        kv_positions = positions if kv_positions is None else kv_positions
        new_cache = []
        for k, group in enumerate(self.groups):
            unit = None if cache is None else cache[k]
            last = outputs if group.end == cfg.num_layers else None
            if group.scanned and last is not None:
                x, unit = self._last_apart(group, (x, unit), positions, mask, kv_positions, cache_index, last)
            elif group.scanned:
                step = (jnp.arange(group.repeats), sliding_flags(cfg, group))
                (x, unit), _ = self.scan[group.first]((x, unit), step, positions, mask, kv_positions, cache_index)
            else:
                new = []
                for j, i in enumerate(range(group.first, group.end)):
                    x, layer_cache = self.layers[i](x, positions, mask, kv_positions, None if unit is None else unit[j],
                                                    cache_index, last if i == cfg.num_layers - 1 else None)
                    new.append(layer_cache)
                unit = None if unit is None else new
            new_cache.append(unit)
        return self.final_norm(x), (None if cache is None else new_cache)

    def _last_apart(self, group, carry, positions, mask, kv_positions, cache_index, outputs):
        """The group holding the last layer with its last repeat run apart, so that the last layer
        computes only `outputs`: a loop over the other repeats, then the last, each reading its
        slot of the stacked parameters (an index, not a copy of the stack). Only programs with
        outputs (a prefill) hold the body twice."""
        params = self.scan[group.first].variables["params"]
        flags = sliding_flags(self.cfg, group)
        body = Layers(self.cfg, group.first, group.period, self.dtype, parent=None)

        def repeat(carry, r, queries=None):
            step = (r, None if flags is None else jnp.asarray(flags)[r])
            layer = jax.tree.map(lambda p: p[r], params)
            return body.apply({"params": layer}, carry, step, positions, mask, kv_positions, cache_index, queries)[0]

        carry, _ = jax.lax.scan(lambda c, r: (repeat(c, r), None), carry, jnp.arange(group.repeats - 1))
        return repeat(carry, group.repeats - 1, outputs)

    def logits(self, hidden):
        """Project hidden states to float32 vocabulary logits (soft-capped where the family does),
        accumulated and returned in fp32 whatever the weights' dtype (bf16 logits would round
        a logit of 20 by up to 0.06 before the log-softmax)."""
        if self.cfg.tie_embeddings:
            out = jnp.dot(hidden, self.embed.table().T, preferred_element_type=jnp.float32)
        else:
            out = self.lm_head(hidden)
        return self._scaled(out)

    def head_weight(self):
        """The vocabulary head as held: the tied embedding [V, D], or the head's kernel (a QArray's
        stored rows are the vocabulary: [V, D] too)."""
        if self.cfg.tie_embeddings:
            return self.embed.embedding
        return self.variables["params"]["lm_head"]["kernel"]

    def head_rows(self, start, size: int):
        """Vocabulary rows start .. start + size - 1 of the head, dense [size, D] (engine/head.py:
        a quantized head is dequantized a slice at a time, never whole)."""
        head = self.head_weight()
        return vocab_rows(head if is_quantized(head) or self.cfg.tie_embeddings else head.T, start, size, self.dtype)

    def project(self, hidden, rows):
        """logits for the vocabulary entries of `rows` (head_rows), as `logits` computes them."""
        if not self.cfg.tie_embeddings:  # the head's Dense computes in its dtype
            hidden = hidden.astype(self.dtype)
        return self._scaled(jnp.dot(hidden, rows.T, preferred_element_type=jnp.float32))

    def _scaled(self, out):
        out = out.astype(jnp.float32)
        if self.cfg.logit_scale:
            out = out * self.cfg.logit_scale
        if self.cfg.final_softcap:
            out = jnp.tanh(out / self.cfg.final_softcap) * self.cfg.final_softcap
        return out

    def init_all(self, tokens, positions, mask):
        """Touch every parameter (setup-style modules create params lazily)."""
        hidden, _ = self(tokens, positions, mask)
        return self.logits(hidden)


def _where(flag, yes, no):
    """yes where flag else no, for a flag known when tracing (a bool) or traced."""
    if isinstance(flag, bool):
        return yes if flag else no
    return jnp.where(flag, yes, no)


def _rotary(cfg: DecoderConfig, sliding, q, k, q_positions, positions):
    """q and k rotated as the layer's attention rotates them: Gemma 3's sliding layers with their
    own base (unscaled), Cohere 2's global layers not at all."""
    if sliding is False and cfg.rope_sliding_only:
        return q, k
    inv_freq, scale = rope_frequencies(cfg.rope_dim, cfg.rope_theta, cfg.rope_scaling, cfg.max_positions, positions)
    if cfg.rope_local_theta and sliding is not False:
        local, local_scale = rope_frequencies(cfg.rope_dim, cfg.rope_local_theta, (), cfg.max_positions, positions)
        inv_freq, scale = _where(sliding, local, inv_freq), _where(sliding, local_scale, scale)
    rotated = (apply_rope(q, q_positions, inv_freq, cfg.rope_interleaved, scale),
               apply_rope(k, positions, inv_freq, cfg.rope_interleaved, scale))
    if cfg.rope_sliding_only:
        return _where(sliding, rotated[0], q), _where(sliding, rotated[1], k)
    return rotated


def _at(x, index):
    """x [B, T, ...] at index [B, K] along T: [B, K, ...]."""
    return jnp.take_along_axis(x, index.reshape(index.shape + (1,) * (x.ndim - 2)), axis=1)


def empty_cache(cfg: DecoderConfig, batch: int, length: int, dtype=jnp.float32):
    """Per layer group, per layer of its body: k, v [B, repeats, Hkv, length, D] zeros."""
    return empty_caches(decoder_groups(cfg), (batch, cfg.num_kv_heads, length, cfg.head_dim), dtype)


def restacked(params: dict, old: DecoderConfig, new: DecoderConfig) -> dict:
    """Parameters stacked for config `old` in the groups of config `new` (a config whose layer
    kinds or period differ groups its layers otherwise)."""
    if decoder_groups(old) == decoder_groups(new):
        return params
    return stacked(per_layer(params, decoder_groups(old)), decoder_groups(new), stack=jnp.stack)
