"""The jitted generation prefill programs timed one by one, after compiling (best of 3):
a prefix computed alone, a plain prompt prefill, and short suffixes continuing per-row cached
prefixes (with the gather of their rows from the prefix table), SmolLM2-135M fp32, random
tokens, on every local device. Where XQuAD-hi's prefill time goes (bench/RESULTS.md).

python bench/prefill_programs.py   (PREFIX_SLOTS=1024,1536 by default)
"""
import os
import time

import conftest  # noqa: F401  (tests/ on the path)

import jax  # noqa: E402
import numpy as np  # noqa: E402

from babeleval.placement.devices import num_devices, replicate, shard_batch  # noqa: E402
from babeleval.engine.generate import prefill, prefill_after_prefix  # noqa: E402
from babeleval.engine.prefix import _stacked, prefix_caches, prefix_rows  # noqa: E402
from real_models import ours  # noqa: E402


def timed(name, run, tokens):
    jax.block_until_ready(run())
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        jax.block_until_ready(run())
        best = min(best, time.perf_counter() - start)
    print(f"{name}: {best * 1e3:,.0f} ms, {tokens / best:,.0f} tokens/s", flush=True)


model = ours("smollm2-135m")
params, config, dtype, devices = replicate(model.params), model.config, model.dtype, num_devices()
random = np.random.default_rng(0)
tokens = lambda rows, length: random.integers(100, 40000, (rows, length)).astype(np.int32)
run = dict(config=config, dtype=dtype)
for held in map(int, os.environ.get("PREFIX_SLOTS", "1024,1536").split(",")):
    prefixes = shard_batch(tokens(devices, held))[0]
    timed(f"prefix [{devices}, {held}]", lambda: prefix_caches(params, prefixes, **run), devices * held)
    whole = shard_batch(np.asarray(prefixes), np.ones((devices, held), bool))
    timed(f"plain prefill [{devices}, {held}]", lambda: prefill(params, *whole, **run), devices * held)
    table = replicate(_stacked((prefix_caches(params, prefixes, **run),), held))
    for rows, length in ((4, 128), (8, 128), (16, 64)):
        which = shard_batch(np.arange(rows, dtype=np.int32) % devices)[0]
        lengths = shard_batch(np.full(rows, held - 100, np.int32))[0]
        suffix = shard_batch(tokens(rows, length), np.ones((rows, length), bool))
        timed(f"  gather {rows} rows", lambda: prefix_rows(table, which), rows)
        prefix = (prefix_rows(table, which), lengths)
        timed(f"  suffix prefill [{rows}, {length}] after {held} slots",
              lambda: prefill_after_prefix(params, prefix, *suffix, **run), rows * length)
    short = shard_batch(tokens(4, 128), np.ones((4, 128), bool))
    timed("  plain prefill [4, 128]", lambda: prefill(params, *short, **run), 4 * 128)
