"""Shared prefixes: the long token prefixes many scoring contexts share (few-shot
demonstrations, an instruction header), found at token level among any list of requests,
so that their keys and values are computed once per (model, prefix) and every packed row
attends to them.

Contexts are sorted; a run of neighbours whose common prefix is at least MIN_PREFIX tokens
shares the shortest of their common prefixes, rounded down to a multiple of STEP (few
compiled shapes) and leaving every context at least one token of its own (the token that
predicts its first option token)."""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from ..models import build_module
from ..models.decoder import empty_cache

MIN_PREFIX = 128
STEP = 64


def _common(a: tuple, b: tuple) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def shared_prefixes(contexts: list[list[int]], min_prefix: int = MIN_PREFIX, step: int = STEP) -> dict[int, int]:
    """{index of a context: its shared prefix length} for the contexts that have one. In sorted
    order the prefix common to a run is the one its first and its last member share."""
    order = sorted(range(len(contexts)), key=lambda i: contexts[i])
    out: dict[int, int] = {}

    def close(run, shared):
        length = min(shared, min(len(contexts[i]) for i in run) - 1) // step * step
        if len(run) > 1 and length >= min_prefix:
            out.update({i: length for i in run})

    run, shared = [], 0
    for i in order:
        common = _common(contexts[run[0]], contexts[i]) if run else 0
        if run and common >= min_prefix:
            run.append(i)
            shared = common
        else:
            if run:
                close(run, shared)
            run, shared = [i], 0
    if run:
        close(run, shared)
    return out


@partial(jax.jit, static_argnames=("config", "dtype"))
def prefix_cache(params, tokens, config, dtype=jnp.float32):
    """tokens: [1, P] -> the prefix's per-layer keys and values [1, Hkv, P, D]."""
    module = build_module(config, dtype)
    p = tokens.shape[1]
    positions = jnp.arange(p, dtype=jnp.int32)[None]
    mask = jnp.tril(jnp.ones((p, p), bool))[None]
    _, cache = module.apply({"params": params}, tokens, positions, mask, cache=empty_cache(config, 1, p, dtype),
                            cache_index=0)
    return cache


def with_prefix(cache, rows: int, length: int):
    """The prefix's cache repeated for `rows` rows, with `length` empty slots after it."""
    def grow(x):
        x = jnp.broadcast_to(x, (rows,) + x.shape[1:])
        return jnp.concatenate([x, jnp.zeros(x.shape[:2] + (length,) + x.shape[3:], x.dtype)], axis=2)
    return [{"k": grow(layer["k"]), "v": grow(layer["v"])} for layer in cache]
