"""Weights split along the mesh's `model` axis, Megatron-style, by one rule table over
parameter paths (as EasyLM and MaxText do): every family we load names its parameters the
same way (models/decoder.py, models/encoder.py), so no family has code of its own here. A
scanned layer group's parameters (models/stack.py) carry a leading layer axis, never split.

Query/key/value projections and the MLP's up/gate are split by output columns (whole heads,
whole hidden units), the attention output and the MLP's down projection by input rows, the
embedding and the vocabulary head along the vocabulary; norms, biases of row-split layers,
position embeddings and the pooler stay whole. A tensor whose split dimension does not
divide the axis (SmolLM2's 3 KV heads over model=2) is held whole on every device instead:
counted and reported (`fallback`). Compute then runs as sharded jit over `model`: XLA inserts
the collectives (devices.per_device keeps `data` manual and leaves `model` to it)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ..quant import ORDER, QArray, QStack, is_quantized
from ..quant.layouts import LAYOUTS

HEAD = "head"  # split only between whole attention heads (units of config.head_dim)

# (path regex, spec, unit the split dimension is cut in); the first match wins
RULES = (
    (r"attn/(q|k|v)/kernel$", P(None, "model"), HEAD),
    (r"attn/(q|k|v)/bias$", P("model"), HEAD),
    (r"attn/o/kernel$", P("model", None), HEAD),
    (r"mlp/experts_(gate|up|down)$", P("model", None, None), 1),  # whole experts per device
    (r"(mlp|shared)/(up|gate)/kernel$", P(None, "model"), 1),
    (r"mlp/(up|gate)/bias$", P("model"), 1),
    (r"(mlp|shared)/down/kernel$", P("model", None), 1),
    (r"(^|/)embed/embedding$", P("model", None), 1),
    (r"lm_head/kernel$", P(None, "model"), 1),
    (r"", P(), 1),  # norms, biases after a row split, position embeddings, pooler
)
STACKED = re.compile(r"(^|/)[a-z_]*scan_\d+/")  # a scanned group's parameters (models/stack.py): [layers, ...]


def path_name(path) -> str:
    return "/".join(str(getattr(k, "key", k)) for k in path)


def rule_spec(name: str, shape: tuple, model: int, head_dim: int) -> tuple[P, bool]:
    """(spec, fell back): the table's spec for one tensor on a model axis of `model` devices,
    or P() when the split dimension is not a whole number of units per device."""
    for pattern, spec, unit in RULES:
        if re.search(pattern, name):
            break
    if STACKED.search(name) and spec != P():  # a scanned group's [layers, ...]: the layer axis never split
        spec = P(None, *spec)
    if spec == P() or model == 1:
        return spec, False
    dim = next(i for i, axis in enumerate(spec) if axis == "model")
    unit = head_dim if unit == HEAD else unit
    if shape[dim] % (unit * model):
        return P(), True
    return spec, False


def quantized_spec(spec: P, q, model: int):
    """The dense weight's spec for each of a QArray's fields ([*lead, rows, blocks, ...]): its rows
    split as the dense weight's output (or vocabulary) axis, its blocks as the input axis (one
    block per row of byte codes, int8's or FP8's channels: its bytes), a block's packed codes and scales never; whole
    where the blocks do not divide the model axis. A QStack: its raw [layers, *lead, rows, row
    bytes] rows split as the dense weight's output rows, its bytes never; `which` whole. An act-order
    weight's ORDER ([*lead, inputs]) is whole along the inputs."""
    if isinstance(q, QStack):
        dense = tuple(spec) + (None,) * (q.ndim - len(spec))
        stored = dense[:-2] + (dense[-1], dense[-2]) if q.transposed else dense
        return QStack(P(*stored[:-1], None), P(), q.layouts, q.shape, q.transposed)
    dense = tuple(spec) + (None,) * (q.ndim - len(spec))
    stored = dense[:-2] + (dense[-1], dense[-2]) if q.transposed else dense
    blocks = q.blocks
    per_byte = blocks == 1 and [p.bits for p in LAYOUTS[q.layout].planes] == [8]  # a byte per input (int8, FP8)

    def field(shape):
        extra = (None,) * (len(shape) - q.ndim)
        if stored[-1] != "model" or not blocks % model:
            return P(*stored, *extra)
        if per_byte and extra and shape[-1] % model == 0:
            return P(*stored[:-1], None, "model")
        return P(*stored[:-1], None, *extra) if per_byte and not extra else P()

    fields = {k: P(*stored[:-2], None) if k == ORDER else field(v.shape) for k, v in q.fields.items()}  # ORDER: whole
    return QArray(fields, q.layout, q.shape, q.transposed, q.core)


def leaf_spec(name: str, x, model: int, head_dim: int) -> tuple:
    """(spec, fell back) of one parameter: a PartitionSpec, or a QArray of them (quantized_spec)."""
    spec, fell = rule_spec(name, x.shape, model, head_dim)
    if is_quantized(x):
        spec = quantized_spec(spec, x, model)
    return spec, fell


def put(x, mesh: Mesh, spec):
    """x (an array or a QArray) on mesh by spec (a PartitionSpec or a QArray of them)."""
    return jax.device_put(x, jax.tree.map(lambda s: NamedSharding(mesh, s), spec, is_leaf=lambda s: isinstance(s, P)))


def leaf_sharding(sharding, path: str, x):
    """Where sharding(path, shape) puts x's dense form, for x (an array, a QArray or a QStack,
    concrete or abstract): a Sharding, or the QArray (QStack) of one per field (quantized_spec).
    A checkpoint's restore reads each field straight into it."""
    target = sharding(path, x.shape)
    if not is_quantized(x):
        return target
    if isinstance(target, NamedSharding):
        specs = quantized_spec(target.spec, x, target.mesh.shape["model"])
        return jax.tree.map(lambda s: NamedSharding(target.mesh, s), specs, is_leaf=lambda s: isinstance(s, P))
    return jax.tree.map(lambda _: target, x)


def place_leaf(sharding, path: str, x):
    """x (an array, a QArray or a QStack) put where sharding(path, shape) puts its dense form,
    the copy finished before this returns. device_put copies asynchronously and holds the host
    array until then: an 8B GGUF's load returned with 3 of its 5.3 GB of weights still to be
    copied, each stack's host copy alive beside its device buffer into the first program's run
    (peak RSS 9.5 GB where 6.5 suffices)."""
    return jax.block_until_ready(jax.device_put(x, leaf_sharding(sharding, path, x)))


@dataclass
class Placement:
    """Where a model's weights went: results.json's devices entry adds this."""

    mesh: dict
    dtype: str
    weight_bytes: int = 0  # all weights, once
    weight_bytes_per_device: int = 0  # the most any device holds (read from the arrays' own shards)
    split_tensors: int = 0
    replicated_tensors: int = 0  # held whole on every device (norms and fallbacks)
    fallback_tensors: int = 0  # a split rule matched but the dimension does not divide the model axis
    fallback_examples: list = field(default_factory=list)  # tensor counts: a scanned group's per layer

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def layers_in(name: str, x) -> int:
    """The layers a parameter holds: its leading axis for a scanned group's, else 1."""
    return x.shape[0] if STACKED.search(name) else 1


def param_specs(params, config, model: int):
    """(specs tree, [names that fell back]) for a parameter tree."""
    fallbacks = []
    head_dim = getattr(config, "head_dim", 1)

    def spec(path, x):
        name = path_name(path)
        chosen, fell = leaf_spec(name, x, model, head_dim)
        if fell:
            fallbacks.extend([name] * layers_in(name, x))
        return chosen

    return jax.tree_util.tree_map_with_path(spec, params, is_leaf=is_quantized), fallbacks


def shard_params(params, config, mesh: Mesh):
    """The parameters placed on `mesh` by RULES (replicated over `data`), tensor by tensor,
    and their Placement."""
    model = mesh.shape["model"]
    specs, fallbacks = param_specs(params, config, model)
    placed = jax.tree.map(lambda x, s: put(x, mesh, s), params, specs, is_leaf=is_quantized)
    leaves = jax.tree.leaves(placed, is_leaf=is_quantized)
    whole = lambda s: s == P() or (is_quantized(s) and all(f == P() for f in s.fields.values()))
    named = jax.tree_util.tree_flatten_with_path(params, is_leaf=is_quantized)[0]
    counts = [layers_in(path_name(p), x) for p, x in named]  # tensors counted per layer
    spec_leaves = jax.tree.leaves(specs, is_leaf=lambda s: isinstance(s, P) or is_quantized(s))
    split = sum(n for n, s in zip(counts, spec_leaves) if not whole(s)) if model > 1 else 0
    dense = [x for x in leaves if not is_quantized(x)]
    dtype = np.dtype(dense[0].dtype).name if dense else "float32"
    return placed, Placement(mesh=mesh_dict(mesh), dtype=dtype, weight_bytes=sum(x.nbytes for x in leaves),
                             weight_bytes_per_device=max(bytes_per_device(placed).values(), default=0),
                             split_tensors=split, replicated_tensors=sum(counts) - split,
                             fallback_tensors=len(fallbacks), fallback_examples=list(dict.fromkeys(fallbacks))[:4])


def bytes_per_device(tree) -> dict:
    """{device: bytes of the tree's shards it holds}, from the arrays' addressable shards."""
    out: dict = {}
    for x in jax.tree.leaves(tree):
        for shard in x.addressable_shards:
            out[shard.device] = out.get(shard.device, 0) + shard.data.nbytes
    return out


def mesh_dict(mesh: Mesh) -> dict:
    """{"data": D, "model": M}, data counted over every process (each answers its share)."""
    return {"data": mesh.shape["data"] * jax.process_count(), "model": mesh.shape["model"]}


DECODE_SLOTS = 4 * 8192  # the Generator's default decode budget: the KV cache auto meshes plan for


def load_placement(config, abstract, spec):
    """(mesh, sharding(path, shape)) for a loader placing each parameter as it is read (the
    rule table's sharding on the mesh for spec; auto plans for the weights and a KV cache of
    DECODE_SLOTS tokens). spec None: (None, the default device's sharding)."""
    from .devices import make_mesh

    if spec is None:
        device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        return None, lambda path, shape: device
    leaves = jax.tree.leaves(abstract)
    dtype = leaves[0].dtype if leaves else np.float32
    weights = sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in leaves)
    mesh = make_mesh(spec, weights, kv_bytes_per_token(config, dtype) * DECODE_SLOTS)
    model, head_dim = mesh.shape["model"], getattr(config, "head_dim", 1)
    return mesh, lambda path, shape: NamedSharding(mesh, rule_spec(path, shape, model, head_dim)[0])


def place_model(model, spec=None, kv_bytes: int = 0):
    """(mesh, params on it, Placement) for an engine: the mesh from spec (devices.make_mesh; auto
    counts the weights and kv_bytes of cache), the weights placed once per model and mesh (a
    Scorer and a Generator of one run share them: no second copy on the devices; the model keeps
    only its latest mesh's copy, engines keep theirs alive)."""
    from .devices import make_mesh, using

    weights = sum(x.nbytes for x in jax.tree.leaves(model.params))
    loaded_on = getattr(model, "mesh", None)  # load_model(mesh=...) placed the weights already
    mesh = loaded_on if spec in (None, "auto") and loaded_on is not None else make_mesh(spec, weights, kv_bytes)
    placed = model.__dict__.get("_placed_on")
    if placed is None or placed[0] != mesh:
        placed = model.__dict__["_placed_on"] = None  # the previous mesh's copy can go now
        with using(mesh):
            placed = model.__dict__["_placed_on"] = (mesh, *shard_params(model.params, model.config, mesh))
    return placed


def kv_bytes_per_token(config, dtype) -> int:
    """Cache bytes one token costs (keys and values of every layer); 0 for encoders."""
    heads = getattr(config, "num_kv_heads", 0)
    return 2 * getattr(config, "num_layers", 0) * heads * getattr(config, "head_dim", 0) * np.dtype(dtype).itemsize
