"""The mixture-of-experts layer alone against dense GEMMs of the same FLOPs, one process: the
MoE module of models/moe.py (router, sort, the experts' gated MLP, scatter, weighted sum) over
TOKENS tokens of the model's hidden size, and the three products a dense MLP over the chosen
(token, expert) rows would run ([tokens x k, hidden] x [hidden, inner], twice, then back). Router
weights are scaled so that the experts' loads are uneven, as trained routers' are. Best of
--repeat after one warm-up call; compile excluded.

python bench/moe_layer.py --model /tmp/bench-moe [--tokens 4096]   (bench/random_models.py moe DIR)
"""
from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from timing import best_seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="/tmp/bench-moe")
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from babeleval.loading import load_model
    from babeleval.models.moe import MoE

    cfg = load_model(args.model).config
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(args.tokens, cfg.hidden_size)), jnp.float32)
    layer = MoE(cfg, jnp.float32)
    params = layer.init(jax.random.PRNGKey(0), x)
    params = jax.tree_util.tree_map_with_path(lambda path, a: a * 5 if "router" in str(path) else a, params)
    moe = best_seconds(layer.apply, params, x, repeats=args.repeat)

    rows, inner = args.tokens * cfg.experts_per_token, cfg.moe_intermediate_size
    r = jnp.asarray(rng.normal(size=(rows, cfg.hidden_size)), jnp.float32)
    gate, up = (jnp.asarray(rng.normal(size=(cfg.hidden_size, inner)), jnp.float32) for _ in range(2))
    down = jnp.asarray(rng.normal(size=(inner, cfg.hidden_size)), jnp.float32)
    dense = best_seconds(lambda r, g, u, d: (jax.nn.silu(r @ g) * (r @ u)) @ d, r, gate, up, down,
                         repeats=args.repeat)
    flops = 2 * rows * 3 * cfg.hidden_size * inner
    print(f"{cfg.num_experts} experts, top-{cfg.experts_per_token}, hidden {cfg.hidden_size}, inner {inner}, "
          f"{args.tokens} tokens: MoE layer {moe * 1e3:.1f} ms ({flops / moe / 1e9:.0f} GFLOP/s on the experts' FLOPs), "
          f"dense GEMMs of the same FLOPs {dense * 1e3:.1f} ms ({flops / dense / 1e9:.0f} GFLOP/s): {moe / dense:.2f}x")


if __name__ == "__main__":
    main()
