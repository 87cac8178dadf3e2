"""A mixture-of-experts MLP (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, GLM-4-MoE, Sarvam-MoE),
specialised by DecoderConfig.

A router picks each token's top-k experts from a softmax over its logits (renormalised over
the k where the family does: Mixtral, Qwen3-MoE), or (GLM-4-MoE, Sarvam-MoE) from sigmoid
scores plus a correction bias, within the best groups of experts, the chosen scores then
renormalised and scaled (router() below); each token is computed by its k experts
only: the (token, expert) pairs are sorted by expert and the three projections run as one
grouped matmul each (`lax.ragged_dot` on accelerators, MaxText's dropless layout; on CPU in
blocks of one expert each), no capacity, no token dropped. Qwen2-MoE adds a shared expert behind a sigmoid gate. The experts' weights are
stacked [experts, in, out], so the mesh splits them by whole experts (placement/sharding.py).
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from .config import DecoderConfig
from .layers import ACTIVATIONS, MLP
from .weights import Dense, weight


BLOCK = 128  # rows per block of grouped_matmul (64: 0.083 s, 128: 0.063 s, 256: 0.098 s on 4,096 x 512 x 1,024, 8 experts)


def ragged_matmul(rows, weights, sizes):
    """rows [R, K] grouped by expert (sizes [E] rows each) times their expert's weights [E, K, F]."""
    return jax.lax.ragged_dot(rows, weights, sizes, preferred_element_type=jnp.float32)


def grouped_matmul(rows, weights, sizes):
    """ragged_matmul in blocks of BLOCK rows that each belong to one expert, one matmul per
    block: XLA's CPU ragged_dot multiplies every row by every expert (8 experts: 9x a dense
    matmul's time, measured); this does (R + E x BLOCK) rows' work. Each expert's rows start a
    block; blocks past the last row compute padding that is never read."""
    rows, weights, sizes = jnp.asarray(rows), jnp.asarray(weights), jnp.asarray(sizes)
    total, experts = rows.shape[0], sizes.shape[0]
    blocks = -(-(total + experts * (BLOCK - 1)) // BLOCK)
    per_expert = -(-sizes // BLOCK)  # blocks each expert takes
    first_block = jnp.cumsum(per_expert) - per_expert
    starts = jnp.cumsum(sizes) - sizes
    expert_of_row = jnp.repeat(jnp.arange(experts), sizes, total_repeat_length=total)
    slot = first_block[expert_of_row] * BLOCK + jnp.arange(total) - starts[expert_of_row]
    padded = jnp.zeros((blocks * BLOCK, rows.shape[1]), rows.dtype).at[slot].set(rows)
    expert_of_block = jnp.minimum(jnp.searchsorted(jnp.cumsum(per_expert), jnp.arange(blocks), side="right"), experts - 1)
    out = jax.lax.map(lambda b: jnp.dot(jax.lax.dynamic_slice_in_dim(padded, b[0] * BLOCK, BLOCK), weights[b[1]],
                                        preferred_element_type=jnp.float32),
                      jnp.stack([jnp.arange(blocks), expert_of_block], axis=1))
    return out.reshape(blocks * BLOCK, -1)[slot]


def expert_matmul(choice: str):
    """A config's moe_matmul as the function that runs it: auto picks the CPU blocks on CPU (XLA's
    CPU ragged_dot multiplies every row by every expert), ragged_dot elsewhere."""
    if choice == "auto":
        choice = "grouped" if jax.default_backend() == "cpu" else "ragged"
    return grouped_matmul if choice == "grouped" else ragged_matmul


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
        matmul = expert_matmul(cfg.moe_matmul)
        grouped = lambda lhs, rhs: matmul(lhs, rhs, sizes).astype(self.dtype)
        h = ACTIVATIONS[cfg.activation](grouped(rows, gate)) * grouped(rows, up)
        out = jnp.zeros((order.shape[0], x.shape[-1]), self.dtype).at[order].set(grouped(h, down))
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
