"""A mixture-of-experts MLP (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE), specialised by DecoderConfig.

A router picks each token's top-k experts from a softmax over its logits (renormalised over
the k where the family does: Mixtral, Qwen3-MoE); each token is computed by its k experts
only: the (token, expert) pairs are sorted by expert and the three projections run as one
grouped matmul each (`lax.ragged_dot`, MaxText's dropless layout), no capacity, no token
dropped. Qwen2-MoE adds a shared expert behind a sigmoid gate. The experts' weights are
stacked [experts, in, out], so the mesh splits them by whole experts (placement/sharding.py).
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from .config import DecoderConfig
from .layers import ACTIVATIONS, MLP


class MoE(nn.Module):
    cfg: DecoderConfig
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x):
        cfg = self.cfg
        experts, k, inner = cfg.num_experts, cfg.experts_per_token, cfg.moe_intermediate_size
        tokens = x.reshape(-1, x.shape[-1])
        dense = lambda n, name: nn.Dense(n, use_bias=False, dtype=self.dtype, param_dtype=self.dtype, name=name)
        probs = jax.nn.softmax(dense(experts, "router")(tokens).astype(jnp.float32), axis=-1)
        weights, chosen = jax.lax.top_k(probs, k)  # [N, k]
        if cfg.moe_norm_topk:
            weights = weights / weights.sum(axis=-1, keepdims=True)
        stacked = lambda name, shape: self.param(name, nn.initializers.normal(0.02), shape, self.dtype)
        gate = stacked("experts_gate", (experts, x.shape[-1], inner))
        up = stacked("experts_up", (experts, x.shape[-1], inner))
        down = stacked("experts_down", (experts, inner, x.shape[-1]))
        order = jnp.argsort(chosen.reshape(-1), stable=True)  # (token, slot) pairs grouped by expert
        sizes = jnp.bincount(chosen.reshape(-1), length=experts)
        rows = tokens[order // k]
        grouped = lambda lhs, rhs: jax.lax.ragged_dot(lhs, rhs, sizes, preferred_element_type=jnp.float32).astype(self.dtype)
        h = ACTIVATIONS[cfg.activation](grouped(rows, gate)) * grouped(rows, up)
        out = jnp.zeros((order.shape[0], x.shape[-1]), self.dtype).at[order].set(grouped(h, down))
        y = jnp.einsum("nkd,nk->nd", out.reshape(-1, k, x.shape[-1]).astype(jnp.float32), weights)
        if cfg.shared_expert_size:
            shared = MLP(cfg.hidden_size, cfg.shared_expert_size, "gated", cfg.activation, False, self.dtype, name="shared")
            y = y + jax.nn.sigmoid(dense(1, "shared_gate")(tokens).astype(jnp.float32)) * shared(tokens).astype(jnp.float32)
        return y.astype(self.dtype).reshape(x.shape)
