"""A mixture-of-experts MLP (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, GLM-4-MoE, Sarvam-MoE),
specialised by DecoderConfig.

A router picks each token's top-k experts from a softmax over its logits (renormalised over
the k where the family does: Mixtral, Qwen3-MoE), or (GLM-4-MoE, Sarvam-MoE) from sigmoid
scores plus a correction bias, within the best groups of experts, the chosen scores then
renormalised and scaled (router() below); each token is computed by its k experts
only: the (token, expert) pairs are sorted by expert and run through their experts' gated MLP
(`lax.ragged_dot` on accelerators, MaxText's dropless layout; on CPU the whole MLP in blocks of
one expert each), no capacity, no token dropped. Qwen2-MoE adds a shared expert behind a
sigmoid gate. The experts' weights are stacked [experts, in, out], so the mesh splits them by
whole experts (placement/sharding.py).
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from .config import DecoderConfig
from .layers import ACTIVATIONS, MLP
from .weights import Dense, weight


BLOCK = 128  # rows per block of blocked_mlp (64: 0.083 s, 128: 0.063 s, 256: 0.098 s on 4,096 x 512 x 1,024, 8 experts)


def ragged_mlp(rows, gate, up, down, sizes, activation, dtype):
    """Each row [R, K] (grouped by expert, sizes [E] rows each) through its expert's gated MLP
    (gate, up [E, K, F], down [E, F, K]): three lax.ragged_dot, MaxText's dropless layout."""
    matmul = lambda lhs, rhs: jax.lax.ragged_dot(lhs, rhs, sizes, preferred_element_type=jnp.float32).astype(dtype)
    return matmul(activation(matmul(rows, gate)) * matmul(rows, up), down)


def blocked_mlp(rows, gate, up, down, sizes, activation, dtype):
    """ragged_mlp in blocks of BLOCK rows that each belong to one expert, the whole gated MLP
    one block at a time: XLA's CPU ragged_dot multiplies every row by every expert (8 experts:
    9x a dense matmul's time, measured); this does at most (R + E x BLOCK) rows' work. Each
    expert's rows start a block; the loop runs only the blocks that hold rows (a data-dependent
    trip count: the static worst case ran ~6% more blocks than the routing fills). One
    block runs gate, up and down in turn, so the [R, F] intermediates are never written out
    and gathered back, and the rows are scattered into blocks once, not once per projection
    (0.216 -> 0.15 s for Qwen3-MoE's bench layer over 4,096 tokens: bench/moe_layer.py)."""
    total, experts = rows.shape[0], sizes.shape[0]
    blocks = -(-(total + experts * (BLOCK - 1)) // BLOCK)
    per_expert = -(-sizes // BLOCK)  # blocks each expert takes
    first_block = jnp.cumsum(per_expert) - per_expert
    starts = jnp.cumsum(sizes) - sizes
    expert_of_row = jnp.repeat(jnp.arange(experts), sizes, total_repeat_length=total)
    slot = first_block[expert_of_row] * BLOCK + jnp.arange(total) - starts[expert_of_row]
    padded = jnp.zeros((blocks * BLOCK, rows.shape[1]), rows.dtype).at[slot].set(rows)
    expert_of_block = jnp.minimum(jnp.searchsorted(jnp.cumsum(per_expert), jnp.arange(blocks), side="right"), experts - 1)
    dot = lambda x, w: jnp.dot(x, w, preferred_element_type=jnp.float32).astype(dtype)

    def block(b, out):
        x, e = jax.lax.dynamic_slice_in_dim(padded, b * BLOCK, BLOCK), expert_of_block[b]
        y = dot(activation(dot(x, gate[e])) * dot(x, up[e]), down[e])
        return jax.lax.dynamic_update_slice_in_dim(out, y, b * BLOCK, axis=0)

    out = jax.lax.fori_loop(0, per_expert.sum(), block, jnp.zeros((blocks * BLOCK, down.shape[-1]), dtype))
    return out[slot]


def expert_mlp(choice: str):
    """A config's moe_matmul as the function that runs the experts: auto picks the CPU blocks on
    CPU (XLA's CPU ragged_dot multiplies every row by every expert), ragged_dot elsewhere."""
    if choice == "auto":
        choice = "grouped" if jax.default_backend() == "cpu" else "ragged"
    return blocked_mlp if choice == "grouped" else ragged_mlp


class MoE(nn.Module):
    cfg: DecoderConfig
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x):
        cfg = self.cfg
        experts, k, inner = cfg.num_experts, cfg.experts_per_token, cfg.moe_intermediate_size
        tokens = x.reshape(-1, x.shape[-1])
        dense = lambda n, name: Dense(n, use_bias=False, dtype=self.dtype, param_dtype=self.dtype, name=name)
        logits = dense(experts, "router")(tokens).astype(jnp.float32)
        correction = self.param("router_bias", nn.initializers.zeros, (experts,), jnp.float32) \
            if cfg.moe_router == "sigmoid" else None
        weights, chosen = router(cfg, logits, correction)  # [N, k]
        stacked = lambda name, shape: weight(self, name, nn.initializers.normal(0.02), shape, self.dtype)
        gate = stacked("experts_gate", (experts, x.shape[-1], inner))
        up = stacked("experts_up", (experts, x.shape[-1], inner))
        down = stacked("experts_down", (experts, inner, x.shape[-1]))
        order = jnp.argsort(chosen.reshape(-1), stable=True)  # (token, slot) pairs grouped by expert
        sizes = jnp.bincount(chosen.reshape(-1), length=experts)
        rows = tokens[order // k]
        mlp = expert_mlp(cfg.moe_matmul)(rows, gate, up, down, sizes, ACTIVATIONS[cfg.activation], self.dtype)
        out = jnp.zeros((order.shape[0], x.shape[-1]), self.dtype).at[order].set(mlp)
        y = jnp.einsum("nkd,nk->nd", out.reshape(-1, k, x.shape[-1]).astype(jnp.float32), weights)
        if cfg.shared_expert_size:
            shared = MLP(cfg.hidden_size, cfg.shared_expert_size, "gated", cfg.activation, False, self.dtype, name="shared")
            gate = jax.nn.sigmoid(dense(1, "shared_gate")(tokens).astype(jnp.float32)) if cfg.shared_expert_gated else 1.0
            y = y + gate * shared(tokens).astype(jnp.float32)
        return y.astype(self.dtype).reshape(x.shape)


def router(cfg: DecoderConfig, logits, correction=None):
    """(weights, experts) [N, k] of each token. softmax: the top-k probabilities (renormalised
    where the family does). sigmoid: experts chosen by score + correction among the
    moe_topk_groups groups whose best two scores sum highest; their plain scores renormalised
    (+1e-20, as transformers) and times moe_scale."""
    k = cfg.experts_per_token
    if cfg.moe_router == "softmax":
        weights, chosen = jax.lax.top_k(jax.nn.softmax(logits, axis=-1), k)
        return (weights / weights.sum(axis=-1, keepdims=True) if cfg.moe_norm_topk else weights), chosen
    scores = jax.nn.sigmoid(logits)
    choice = scores + correction
    if cfg.moe_groups > 1:
        grouped = choice.reshape(choice.shape[0], cfg.moe_groups, -1)
        best = jax.lax.top_k(grouped, 2)[0].sum(axis=-1)  # [N, groups]
        kept = jax.lax.top_k(best, cfg.moe_topk_groups)[1]
        keep = jnp.zeros_like(best, bool).at[jnp.arange(best.shape[0])[:, None], kept].set(True)
        choice = jnp.where(jnp.repeat(keep, grouped.shape[-1], axis=1), choice, -jnp.inf)
    chosen = jax.lax.top_k(choice, k)[1]
    weights = jnp.take_along_axis(scores, chosen, axis=1)
    if cfg.moe_norm_topk:
        weights = weights / (weights.sum(axis=-1, keepdims=True) + 1e-20)
    return weights * cfg.moe_scale, chosen
