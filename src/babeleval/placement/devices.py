"""The mesh: local devices in a grid with two named axes, `data` (batches split along it)
and `model` (weights split along it, placement/sharding.py). Across hosts, jax.distributed splits
the requests and gathers the answers (split_for_process / sum_over_processes): the `data` axis
of `--mesh data=D,model=M` counts every process's data shards, the model axis stays within a
host. Data-parallel runs are the model=1 case of the same code."""
from __future__ import annotations

import contextlib
import functools
import os
import threading

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ..errors import BabelevalError


CPU_DEVICES_ENV = "BABELEVAL_CPU_DEVICES"


def prepare_cpu() -> None:
    """What must happen before JAX starts its backends: CPU devices per core (split_cpu_cores)
    and babeleval's XLA CPU flags (cpu_compiler_flags)."""
    cpu_compiler_flags()
    split_cpu_cores()


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


CPU_FLAGS = {  # XLA CPU flags babeleval sets unless XLA_FLAGS names them (cpu_compiler_flags)
    "--xla_cpu_enable_concurrency_optimized_scheduler": "false",
    "--xla_cpu_experimental_ynn_fusion_type": "individual_dot",
}


def cpu_compiler_flags() -> None:
    """Add CPU_FLAGS to XLA_FLAGS, each unless the user set it. Measured on GGUFs of Llama-3-8B's
    shapes (bench/gguf_8b.py, RESULTS.md): XLA's concurrency-optimized scheduler started the
    (then unscanned) last layer's dequantization before the scan and held it through it
    (+1.2 GB), and YNNPACK fusing more than single dots (a layer's whole MLP) takes buffers of its own that
    XLA's memory_analysis does not count (+1.35 GB at 4 layers); without both, scoring peaks at
    the weights and one layer's temporaries, at the same speed. (Turning YNNPACK off entirely:
    2.3x slower.) XLA reads XLA_FLAGS once, when its first backend starts: later this is a no-op."""
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        return
    flags = os.environ.get("XLA_FLAGS", "")
    added = [f"{name}={value}" for name, value in CPU_FLAGS.items() if name not in flags]
    if added:
        os.environ["XLA_FLAGS"] = " ".join([flags, *added]).strip()


def default_dtype() -> str:
    """bfloat16 where the matrix units are built for it (GPU, TPU); float32 on CPU, where bf16
    is emulated and slower. Norms, softmax, log-softmax and log-prob sums stay fp32 either way."""
    return "float32" if jax.default_backend() == "cpu" else "bfloat16"


MEMORY_SHARE = 0.9  # of a device's bytes_limit that weights + KV cache may take (the rest: activations)
_ACTIVE = threading.local()  # each thread's stack of engine meshes (a background compile has its own)


def parse_mesh(text) -> tuple[int | None, int | None]:
    """'auto', 'data=D,model=M' (either may be left out), {"data": D, "model": M}, (D, M) or None
    -> (D or None, M or None); None means chosen (make_mesh)."""
    if text is None or text == "auto":
        return None, None
    if isinstance(text, (tuple, list)) and len(text) == 2:
        return tuple(int(x) for x in text)
    if isinstance(text, dict):
        pairs = text.items()
    else:
        try:
            pairs = [part.split("=") for part in str(text).split(",")]
            pairs = [(k.strip(), int(v)) for k, v in pairs]
        except ValueError:
            raise BabelevalError(f"mesh {text!r}: expected auto or data=D,model=M (e.g. data=2,model=2)") from None
    sizes = dict(pairs)
    if set(sizes) - {"data", "model"} or any(not isinstance(v, int) or v < 1 for v in sizes.values()):
        raise BabelevalError(f"mesh {text!r}: expected auto or data=D,model=M with positive sizes (e.g. data=2,model=2)")
    return sizes.get("data"), sizes.get("model")


def auto_model_axis(weight_bytes: int, kv_bytes: int, devices: list) -> int:
    """The smallest model axis (a divisor of the local device count) whose weights + KV cache
    per device fit MEMORY_SHARE of each device's memory; 1 where the platform does not say
    (CPU), or where nothing fits (then the run reports its out-of-memory itself)."""
    stats = devices[0].memory_stats() if hasattr(devices[0], "memory_stats") else None
    limit = (stats or {}).get("bytes_limit")
    if devices[0].platform == "cpu" or not limit:
        return 1
    for model in (m for m in range(1, len(devices) + 1) if len(devices) % m == 0):
        if (weight_bytes + kv_bytes) / model <= MEMORY_SHARE * limit:
            return model
    return 1


CPU_REPLICAS_SHARE = 0.25  # of the host's memory that an auto mesh's CPU weight replicas may take


def cpu_replicas_fit(weight_bytes: int, devices: list) -> bool:
    """Whether an auto mesh may replicate the weights on every CPU device (data = devices):
    CPU devices share the host's memory, so each replica is another copy in RAM. An 8B Q4_K_M
    GGUF on a 2-core, 24 GiB host (weights planned as 32 GB dense) gets one device, whose
    programs still use every core; SmolLM2 and Gemma 3 270M keep one replica per core."""
    if not devices or devices[0].platform != "cpu" or len(devices) == 1:
        return True
    return weight_bytes * len(devices) <= CPU_REPLICAS_SHARE * host_memory()


def host_memory() -> int:
    """Bytes of physical memory on this host."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def make_mesh(spec=None, weight_bytes: int = 0, kv_bytes: int = 0) -> Mesh:
    """The (data, model) mesh over this process's devices for a --mesh spec (parse_mesh, or a
    Mesh as it is); data counts the data shards of all processes together. An explicit mesh may
    take fewer devices than there are (the first ones: a 1-device reference beside 8 devices), an
    auto one on CPU too, where replicas would not fit the host's memory (cpu_replicas_fit)."""
    if isinstance(spec, Mesh):
        return spec
    devices = jax.local_devices()
    count, processes = len(devices), jax.process_count()
    data, model = parse_mesh(spec)
    if data is None and model is None and not cpu_replicas_fit(weight_bytes, devices):
        return _grid(1, 1)  # one device per process
    if model is None:
        model = auto_model_axis(weight_bytes, kv_bytes, devices) if data is None else max(1, count * processes // data)
    if data is None:
        data = processes * (count // model)
    local_data = data // processes
    if data % processes or local_data * model > count or (spec in (None, "auto") and local_data * model != count):
        raise BabelevalError(f"mesh data={data},model={model}: needs data x model = {count * processes} devices "
                             f"({processes} process(es) x {count} local device(s); the model axis stays within a process)")
    return _grid(local_data, model)


@functools.lru_cache(maxsize=None)
def _grid(data: int, model: int) -> Mesh:
    devices = jax.local_devices()[:data * model]
    try:
        from jax.experimental import mesh_utils

        grid = mesh_utils.create_device_mesh((data, model), devices=devices)
    except Exception:  # noqa: BLE001  (no topology to follow, e.g. virtual CPU devices)
        grid = np.asarray(devices).reshape(data, model)
    return Mesh(grid, ("data", "model"))


@contextlib.contextmanager
def using(m: Mesh):
    """Engine calls run on their own mesh (every helper below reads it through mesh())."""
    stack = _active()
    stack.append(m)
    try:
        yield m
    finally:
        stack.pop()


def _active() -> list[Mesh]:
    if not hasattr(_ACTIVE, "stack"):
        _ACTIVE.stack = []
    return _ACTIVE.stack


def mesh() -> Mesh:
    """The mesh of the engine call in progress; outside one, every local device along data."""
    stack = _active()
    return stack[-1] if stack else _grid(len(jax.local_devices()), 1)


def num_devices() -> int:
    return len(jax.local_devices())


def data_shards() -> int:
    """How many pieces a batch is split into (rows are padded to a multiple of it)."""
    return mesh().shape["data"]


def shard_batch(*arrays):
    """Place arrays (or pytrees of arrays) with their leading (batch) axis split along data."""
    sharding = NamedSharding(mesh(), PartitionSpec("data"))
    return tuple(jax.device_put(a, sharding) for a in arrays)


def per_device(fn, replicated: int = 1):
    """fn run by every data shard on its own slice (leading axis) of each argument after the
    first `replicated`, which every shard gets whole (the parameters). Only `data` is manual:
    inside fn the code is plain per-shard code (data-dependent loops need no agreement across
    shards), and the `model` axis is XLA's (sharded jit: it splits the work as the weights are
    split and inserts the collectives)."""
    split = PartitionSpec("data")

    def run(*args):
        specs = (PartitionSpec(),) * replicated + (split,) * (len(args) - replicated)
        return jax.shard_map(fn, mesh=mesh(), in_specs=specs, out_specs=split, axis_names={"data"},
                             check_vma=False)(*args)

    return run


def replicate(tree):
    return jax.device_put(tree, NamedSharding(mesh(), PartitionSpec()))


def _kv_sharding(x, rows):
    """KV caches [B, ..., Hkv, S, D] (a stacked group's: [B, layers, Hkv, S, D]): heads along model
    where they divide it; rows as `rows`."""
    heads = "model" if x.ndim >= 4 and x.shape[-3] % mesh().shape["model"] == 0 else None
    return NamedSharding(mesh(), PartitionSpec(rows, *(None,) * (x.ndim - 4), heads))


def place_kv(cache):
    """Per-layer KV caches (a computed prefix, a prefix table) on the mesh: rows on every data
    shard, heads split along model where they divide it."""
    return jax.tree.map(lambda x: jax.device_put(x, _kv_sharding(x, None)), cache)


def constrain_kv(cache):
    """Inside jit: KV caches with rows along data, heads along model where they divide it."""
    return jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, _kv_sharding(x, "data")), cache)


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
    """What results.json records about where it ran (engines add their mesh and weight placement)."""
    device = jax.local_devices()[0]
    return {"platform": device.platform, "kind": device.device_kind, "local_devices": num_devices(),
            "processes": jax.process_count(), "process_index": jax.process_index()}
