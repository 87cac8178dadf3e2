"""Data parallelism: a one-axis mesh over every local device; batches are split along
it, parameters are replicated. Across hosts, jax.distributed splits the requests and
gathers the answers (see split_for_process / sum_over_processes)."""
from __future__ import annotations

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec


@functools.lru_cache(maxsize=None)
def mesh() -> Mesh:
    return Mesh(np.asarray(jax.local_devices()), ("data",))


def num_devices() -> int:
    return len(jax.local_devices())


def shard_batch(*arrays):
    """Place host arrays with their leading (batch) axis split over the local devices."""
    sharding = NamedSharding(mesh(), PartitionSpec("data"))
    return tuple(jax.device_put(a, sharding) for a in arrays)


def per_device(fn, replicated: int = 1):
    """fn run by every local device on its own slice (leading axis) of each argument after
    the first `replicated`, which every device gets whole (the parameters). Inside fn the
    code is plain per-device code: data-dependent loops need no agreement across devices."""
    split = PartitionSpec("data")

    def run(*args):
        specs = (PartitionSpec(),) * replicated + (split,) * (len(args) - replicated)
        return jax.shard_map(fn, mesh=mesh(), in_specs=specs, out_specs=split, check_vma=False)(*args)

    return run


def replicate(tree):
    return jax.device_put(tree, NamedSharding(mesh(), PartitionSpec()))


def split_for_process(count: int) -> list[int]:
    """Indices of the work items this process answers (round-robin over processes)."""
    return list(range(jax.process_index(), count, jax.process_count()))


def sum_over_processes(local: np.ndarray) -> np.ndarray:
    """Each process fills only its own rows (zeros elsewhere); the sum is the whole answer."""
    if jax.process_count() == 1:
        return local
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(local)).sum(axis=0).astype(local.dtype)
