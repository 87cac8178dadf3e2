"""A babeleval checkpoint's quantized weights, held as they were loaded: orbax writes each QArray
(a GGUF's blocks, int8/int4 codes) as a dict of its fields and each QStack as its row bytes
(`raw`) beside `which`; quantized.json records how they were quantized (method, and the source:
the file they came from) and, per weight, what rebuilds the object around its arrays (layout,
dense shape, transposed, core; a QStack's layouts in their order, which `which` indexes, and
each one's row bytes). A restore reads the fields straight into their shards and rebuilds the same objects."""
from __future__ import annotations

import functools
import json
from pathlib import Path

import jax

from ..errors import BabelevalError
from ..placement.sharding import path_name
from ..quant import QArray, QStack, is_quantized

QUANTIZED = "quantized.json"


def arrays(q) -> dict:
    """What orbax holds for a quantized weight (concrete, abstract or one sharding per field)."""
    if isinstance(q, QStack):
        return {"raw": q.raw, "which": q.which}
    return dict(q.fields)


def describe(q) -> dict:
    if isinstance(q, QStack):
        return {"layouts": list(q.layouts), "widths": list(q.widths), "shape": list(q.shape),
                "transposed": q.transposed}
    return {"layout": q.layout, "shape": list(q.shape), "transposed": q.transposed, "core": q.core}


def rebuilt(saved: dict, description: dict):
    """The QArray or QStack `description` names, around `saved`'s arrays (arrays() of it)."""
    if "parts" in description:  # written before a QStack held each layer once
        raise BabelevalError("a checkpoint of the earlier mixed-layout stacks (parts per layout); convert its "
                             "source again")
    if "layouts" in description:
        return QStack(saved["raw"], saved["which"], tuple(description["layouts"]), tuple(description["shape"]),
                      description["transposed"])
    return QArray(dict(saved), description["layout"], tuple(description["shape"]), description["transposed"],
                  description["core"])


def as_saved(params):
    """The tree orbax writes (and a restore's target): each quantized weight as arrays() of it."""
    return jax.tree.map(lambda x: arrays(x) if is_quantized(x) else x, params, is_leaf=is_quantized)


def descriptions(params) -> dict:
    """{parameter path: describe()} of the quantized weights."""
    flat = jax.tree_util.tree_flatten_with_path(params, is_leaf=is_quantized)[0]
    return {path_name(p): describe(x) for p, x in flat if is_quantized(x)}


def with_quantized(tree: dict, described: dict, saved: dict) -> dict:
    """tree (nested dicts, changed in place) with each described path's node the QArray or QStack
    rebuilt around `saved`'s arrays there (a restore's output, or the abstract arrays of its target)."""
    for path, description in described.items():
        *parents, last = path.split("/")
        node = functools.reduce(dict.__getitem__, path.split("/"), saved)
        functools.reduce(dict.__getitem__, parents, tree)[last] = rebuilt(node, description)
    return tree


def write_quantized(folder: Path, described: dict, method: str, source: str) -> None:
    record = {"method": method, "source": source, "weights": described}
    (folder / QUANTIZED).write_text(json.dumps(record, indent=1))


def read_quantized(folder: Path) -> dict | None:
    """quantized.json's record ({method, source, weights}), or None: a dense checkpoint (or one
    written before weights were saved quantized: dequantized to the model's dtype)."""
    path = Path(folder) / QUANTIZED
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise BabelevalError(f"{path}: not valid JSON ({exc}); copy or convert the checkpoint again") from None
