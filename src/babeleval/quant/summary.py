"""What a parameter tree holds, for `info` and results.json: bytes per parameter, each storage
kind's totals (a block type, or a dense dtype) and which weights are stored how (layers folded
into `layers_*`, a scanned group's stacked tensors counted per layer: a Q4_K_M file mixes Q4_K and Q6_K across layers)."""
from __future__ import annotations

import re

import jax
import numpy as np

from .layouts import LAYOUTS
from .qarray import QStack, is_quantized


# a layer's parameters: layers_<i> (encoder_layers_<i>, ...) or a scanned group's scan_<first>/layer_<j>
STACKED = re.compile(r"^((?:encoder_|decoder_)?)(?:scan_\d+/layer_\d+)")
LAYER = re.compile(r"^((?:encoder_|decoder_)?)(?:layers_\d+|scan_\d+/layer_\d+)")


def _kind(x) -> str:
    return x.layout if is_quantized(x) else np.dtype(x.dtype).name


def _per_kind(x, stacked: bool) -> list:
    """[(kind, tensors, params, bytes)] of one leaf: a QStack's layers counted by their layout (bytes
    as held: each layer's stored rows, padded to the widest), anything else as one kind (a scanned
    group's [layers, ...]: a tensor per layer)."""
    if isinstance(x, QStack):
        which = np.asarray(x.which)
        per_layer, held = x.size // len(which), x.nbytes // len(which)
        return [(name, int((which == k).sum()), int((which == k).sum()) * per_layer, int((which == k).sum()) * held)
                for k, name in enumerate(x.layouts) if (which == k).any()]
    return [(_kind(x), x.shape[0] if stacked else 1, int(x.size), int(x.nbytes))]


def summary(params, source: str = "", method: str = "gguf") -> dict | None:
    """None for a tree with no quantized weight; else {method (gguf: the file's blocks; int8, int4:
    quantized at load), source, bits_per_param,
    bytes_per_param, types: {kind: {tensors, params, bits, block_size}}, weights: {path: {kind: n}}}."""
    flat = jax.tree_util.tree_flatten_with_path(params, is_leaf=is_quantized)[0]
    if not any(is_quantized(x) for _, x in flat):
        return None
    types: dict = {}
    weights: dict = {}
    for path, x in flat:
        name = "/".join(str(getattr(k, "key", k)) for k in path)
        counts = weights.setdefault(LAYER.sub(r"\1layers_*", name), {})
        for kind, layers, size, nbytes in _per_kind(x, bool(STACKED.search(name))):
            entry = types.setdefault(kind, {"tensors": 0, "params": 0, "bytes": 0})
            entry["tensors"] += layers
            entry["params"] += size
            entry["bytes"] += nbytes
            if kind in LAYOUTS:
                entry.setdefault("block_size", set()).add(LAYOUTS[kind].block or x.block_size)
            counts[kind] = counts.get(kind, 0) + layers
    for kind, entry in types.items():
        entry["bits"] = round(8 * entry.pop("bytes") / entry["params"], 4)
        if "block_size" in entry:  # int8's is each row's length
            sizes = sorted(entry["block_size"])
            entry["block_size"] = sizes[0] if len(sizes) == 1 else sizes
    params_total = sum(e["params"] for e in types.values())
    total_bytes = sum(int(x.nbytes) for _, x in flat)
    quantized = sorted(k for k in types if _kept(k))
    return {"method": method, "types_kept": quantized, "source": source,
            "bits_per_param": round(8 * total_bytes / params_total, 4),
            "bytes_per_param": round(total_bytes / params_total, 4), "types": types,
            "weights": {k: v for k, v in sorted(weights.items()) if any(_kept(t) for t in v)}}


def recorded(found: dict | None) -> dict | None:
    """What a results file (run's results.json, bench's, lm-eval's) keeps of a summary: method,
    source, bits per parameter, and bits and block size per type (None: dense weights)."""
    return found and {k: found[k] for k in ("method", "source", "bits_per_param", "types")}


def _kept(kind: str) -> bool:
    """A block type (or a stack of several: Q4_K+Q6_K), not a dense dtype."""
    return all(part in LAYOUTS for part in kind.split("+"))
