"""Data parallelism: a one-axis mesh over every local device; batches are split along
it, parameters are replicated. Across hosts, jax.distributed splits the requests and
gathers the answers (see split_for_process / sum_over_processes)."""
from __future__ import annotations

import functools
import os

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ..errors import BabelevalError


CPU_DEVICES_ENV = "BABELEVAL_CPU_DEVICES"


def split_cpu_cores(limit: int = 4) -> None:
    """Give JAX one CPU device per core (at most `limit`) unless the user chose a count
    (BABELEVAL_CPU_DEVICES, XLA_FLAGS' host device count, JAX_NUM_CPU_DEVICES).

    XLA's CPU backend runs many fused loops (softmax, norms, the head's reductions) on one
    thread; two devices working on halves of a batch keep both cores of a 2-core host busy
    (scoring measured 8% faster). Must run before JAX starts its backends: later it is a no-op.
    """
    chosen = os.environ.get(CPU_DEVICES_ENV)
    if chosen is None and ("host_platform_device_count" in os.environ.get("XLA_FLAGS", "")
                           or "JAX_NUM_CPU_DEVICES" in os.environ):
        return
    if chosen is not None and not (chosen.isdigit() and int(chosen) > 0):
        raise BabelevalError(f"{CPU_DEVICES_ENV}={chosen!r}: expected a positive number of CPU devices")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    count = int(chosen) if chosen else max(1, min(cores, limit))
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:  # backends already started: keep what they have
        pass


@functools.lru_cache(maxsize=None)
def mesh() -> Mesh:
    return Mesh(np.asarray(jax.local_devices()), ("data",))


def num_devices() -> int:
    return len(jax.local_devices())


def shard_batch(*arrays):
    """Place arrays (or pytrees of arrays) with their leading (batch) axis split over the local devices."""
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


def texts_from_all_processes(texts: list[str]) -> list[str]:
    """Each process filled only its own entries ("" elsewhere); every process gets them all
    (as UTF-8 bytes summed over processes: the other processes add zeros)."""
    if jax.process_count() == 1:
        return texts
    encoded = [t.encode("utf-8") for t in texts]
    lengths = sum_over_processes(np.asarray([len(e) for e in encoded], np.int64))
    buffer = np.zeros((len(texts), max(1, int(lengths.max(initial=0)))), np.uint8)
    for i, e in enumerate(encoded):
        buffer[i, :len(e)] = np.frombuffer(e, np.uint8)
    buffer = sum_over_processes(buffer)
    return [bytes(buffer[i, :lengths[i]]).decode("utf-8") for i in range(len(texts))]


def describe() -> dict:
    """What results.json records about where it ran."""
    device = jax.local_devices()[0]
    return {"platform": device.platform, "kind": device.device_kind, "local_devices": num_devices(),
            "processes": jax.process_count(), "process_index": jax.process_index()}
