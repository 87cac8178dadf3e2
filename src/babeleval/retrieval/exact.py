"""Exact k-nearest-neighbour search: a jitted distance matrix + top_k over blocks of queries
and keys, the running top-k merged block by block, so 100k x 100k never materialises
(at most QUERY_BLOCK x KEY_BLOCK distances at once). Several embedders fuse by a weighted
sum of their distances (DistFuse). Blocks are padded to fixed shapes: one compiled
program per (dims, k), whatever the sizes.

Distances, ascending: l2 = Euclidean distance; cosine = 1 - cosine similarity;
ip = minus the inner product.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

METRICS = ("l2", "cosine", "ip")
QUERY_BLOCK = 1024
KEY_BLOCK = 8192


def _normalised(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


@lru_cache(maxsize=None)
def _block_program(metric: str, k: int, parts: int):
    from .. import engine  # noqa: F401  (JAX gets its CPU devices before it starts)
    import jax
    import jax.numpy as jnp

    def distances(q, keys, weight):
        dot = q @ keys.T
        if metric == "l2":
            squared = jnp.sum(q * q, 1)[:, None] - 2 * dot + jnp.sum(keys * keys, 1)[None, :]
            return weight * jnp.sqrt(jnp.maximum(squared, 0.0))
        return weight * ((1.0 - dot) if metric == "cosine" else -dot)

    @jax.jit
    def step(queries, keys, weights, valid, offset, best_d, best_i):
        d = sum(distances(queries[m], keys[m], weights[m]) for m in range(parts))
        d = jnp.where(valid[None, :], d, jnp.inf)
        index = offset + jnp.arange(d.shape[1], dtype=jnp.int32)
        d = jnp.concatenate([best_d, d], axis=1)
        i = jnp.concatenate([best_i, jnp.broadcast_to(index, (d.shape[0], index.shape[0]))], axis=1)
        neg, pos = jax.lax.top_k(-d, k)
        return -neg, jnp.take_along_axis(i, pos, axis=1)

    return step


def _pad(x: np.ndarray, rows: int) -> np.ndarray:
    return x if len(x) == rows else np.concatenate([x, np.zeros((rows - len(x), x.shape[1]), x.dtype)])


def exact_search(parts, k: int, metric: str = "l2") -> tuple[np.ndarray, np.ndarray]:
    """parts: [(queries, keys, weight), ...] (one per embedder; the same rows in each).
    Returns (indices [nq, k], distances [nq, k]), nearest first; ties go to the lower index."""
    if metric not in METRICS:
        raise ValueError(f"metric {metric!r} is not one of {', '.join(METRICS)}")
    parts = [(np.asarray(q, np.float32), np.asarray(x, np.float32), float(w)) for q, x, w in parts]
    if metric == "cosine":
        parts = [(_normalised(q), _normalised(x), w) for q, x, w in parts]
    nq, nk = len(parts[0][0]), len(parts[0][1])
    k = min(k, nk)
    if nq == 0 or k == 0:
        return np.zeros((nq, k), np.int64), np.zeros((nq, k), np.float32)
    qb, kb = min(QUERY_BLOCK, _round_up(nq)), min(KEY_BLOCK, _round_up(nk))
    step = _block_program(metric, k, len(parts))
    weights = np.array([w for _, _, w in parts], np.float32)
    out_i = np.zeros((nq, k), np.int64)
    out_d = np.zeros((nq, k), np.float32)
    for q0 in range(0, nq, qb):
        queries = tuple(_pad(q[q0:q0 + qb], qb) for q, _, _ in parts)
        best_d = np.full((qb, k), np.inf, np.float32)
        best_i = np.full((qb, k), -1, np.int32)
        for k0 in range(0, nk, kb):
            keys = tuple(_pad(x[k0:k0 + kb], kb) for _, x, _ in parts)
            valid = np.arange(kb) < nk - k0
            best_d, best_i = step(queries, keys, weights, valid, np.int32(k0), best_d, best_i)
        rows = min(qb, nq - q0)
        out_d[q0:q0 + rows] = np.asarray(best_d)[:rows]
        out_i[q0:q0 + rows] = np.asarray(best_i)[:rows]
    return out_i, out_d


def _round_up(n: int, step: int = 64) -> int:
    return max(step, -(-n // step) * step)
