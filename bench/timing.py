"""The best of a few timed calls of a jitted function, after one warm-up call (compile excluded)."""
from __future__ import annotations

import time

import jax


def best_seconds(fn, *args, repeats: int = 5) -> float:
    """fn jitted, called once to compile, then the fastest of `repeats` calls, in seconds."""
    fn = jax.jit(fn)
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return min(times)
