"""A layer stack as groups of identical layers, each scanned once (as MaxText's scan_layers):
a group's body is `period` consecutive layers, repeated `repeats` times, so the compiled program
holds the body once whatever the depth.

A group's parameters are stacked along a leading axis [repeats, ...] under `scan_<first layer>/
layer_<j>` (j < period); a layer outside any scanned group (a group repeated once) keeps its own
`layers_<i>`. `slots` says where each layer's parameters go; the loaders fill them. The last
layer stays in its group: a caller that wants it at chosen positions only runs the group's last
repeat apart at call time (models/decoder.py), so that every other program holds one body.

Each layer has a kind (whatever changes its module: an MoE or a dense MLP; sliding or global
attention is a per-layer flag the decoder scans, models/decoder.py). Layers split first into
segments (runs of one segment key: the kind itself for a period of 1, so that MoE's leading
dense layers get groups of their own), then each segment into repeats of its first `period`
layers; a repeat whose kinds differ from the first's is an error naming both layers (a period
set wrong never computes the wrong layer)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Hashable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from ..errors import BabelevalError


@dataclass(frozen=True)
class Group:
    first: int
    period: int
    repeats: int

    @property
    def scanned(self) -> bool:
        return self.repeats > 1

    @property
    def end(self) -> int:
        return self.first + self.period * self.repeats


def smallest_period(kinds: Sequence[Hashable]) -> int:
    """The shortest period the kinds repeat with (a shorter last repeat allowed), 1 when only
    the whole stack would be one (a split such as Qwen2's windows is a segment, not a period)."""
    n = len(kinds)
    for p in range(1, n // 2 + 1):
        if all(kinds[i] == kinds[i % p] for i in range(n)):
            return p
    return 1


def layer_groups(kinds: Sequence[Hashable], period: int = 1, segment_keys: Sequence[Hashable] | None = None,
                 what: str = "layer") -> tuple[Group, ...]:
    """The groups of a stack whose layer i has kinds[i]; segment_keys default to the kinds for a
    period of 1, else to one segment."""
    n = len(kinds)
    keys = list(segment_keys) if segment_keys is not None else (list(kinds) if period == 1 else [0] * n)
    groups: list[Group] = []
    start = 0
    while start < n:
        end = start
        while end < n and keys[end] == keys[start]:
            end += 1
        groups.extend(_segment(kinds, start, end, period, what))
        start = end
    return tuple(groups)


def _segment(kinds, start: int, end: int, period: int, what: str) -> list[Group]:
    period = min(period, end - start)
    repeats = (end - start) // period
    for i in range(start + period, start + period * repeats):
        body = start + (i - start) % period
        if kinds[i] != kinds[body]:
            raise BabelevalError(f"{what} {i} is {kinds[i]} but {what} {body}, its place in the period-{period} "
                                 f"group from {what} {start}, is {kinds[body]}: period {period} does not fit this stack")
    groups = [Group(start, period, repeats)]
    rest = start + period * repeats
    if rest < end:
        groups.append(Group(rest, end - rest, 1))
    return groups


def scanned(body, cfg, group: Group, dtype, broadcast: int):
    """`body` (a module of cfg, first layer, period, dtype) run over the group's repeats: its params
    stacked along axis 0, the first argument after the carry scanned, `broadcast` more as they are."""
    scan = nn.scan(body, variable_axes={"params": 0}, split_rngs={"params": True},
                   in_axes=(0,) + (nn.broadcast,) * broadcast)
    return scan(cfg, group.first, group.period, dtype)


def slots(groups: Sequence[Group], prefix: str = "") -> dict[int, tuple[str, int | None]]:
    """layer i -> (its parameters' path, its index along their stacked axis or None)."""
    out = {}
    for g in groups:
        for i in range(g.first, g.end):
            j, r = (i - g.first) % g.period, (i - g.first) // g.period
            out[i] = (f"{prefix}scan_{g.first}/layer_{j}", r) if g.scanned else (f"{prefix}layers_{i}", None)
    return out


def empty_caches(groups: Sequence[Group], shape: tuple, dtype) -> list:
    """A KV cache per group: for each layer of its body, k and v [B, repeats, *shape[1:]] (rows
    first, as every engine splits them; the layers' axis next)."""
    make = lambda g: jnp.zeros((shape[0], g.repeats) + tuple(shape[1:]), dtype)  # noqa: E731
    return [[{"k": make(g), "v": make(g)} for _ in range(g.period)] for g in groups]


def cache_slots(cache) -> int:
    """The key/value slots a KV cache holds (its arrays' second-to-last axis)."""
    return jax.tree.leaves(cache)[0].shape[-2]



def per_layer(params: dict, groups: Sequence[Group], prefix: str = "") -> dict:
    """A stacked tree with every layer's parameters under `{prefix}layers_<i>` instead (the layout
    before layers were scanned: old checkpoints; a config whose groups differ)."""
    out = {k: v for k, v in params.items() if not re.match(rf"{prefix}(scan|layers)_\d+$", k)}
    for i, (path, slot) in slots(groups, prefix).items():
        node = params
        for key in path.split("/"):
            node = node[key]
        out[f"{prefix}layers_{i}"] = node if slot is None else jax.tree.map(lambda x, s=slot: _layer(x, s), node)
    return out


def _layer(x, slot: int):
    """Layer `slot` of a stacked array (of its shape and dtype, for an abstract one)."""
    return jax.ShapeDtypeStruct(x.shape[1:], x.dtype) if isinstance(x, jax.ShapeDtypeStruct) else x[slot]


def saved_groups(tree: dict, prefix: str = "") -> tuple[Group, ...]:
    """The groups a stacked tree holds (a checkpoint's, saved by another version): its
    `scan_<first>` (period: its layer_<j>, repeats: their leaves' leading axis) and `layers_<i>`."""
    groups = []
    for key, node in tree.items():
        found = re.match(rf"{prefix}(scan|layers)_(\d+)$", key)
        if found and found[1] == "layers":
            groups.append(Group(int(found[2]), 1, 1))
        elif found:
            period = sum(bool(re.match(r"layer_\d+$", k)) for k in node)
            groups.append(Group(int(found[2]), period, jax.tree.leaves(node)[0].shape[0]))
    return tuple(sorted(groups, key=lambda g: g.first))


def stacked(layers: dict, groups: Sequence[Group], prefix: str = "", stack=None) -> dict:
    """per_layer's inverse: each group's layers stacked (stack: np.stack by default)."""
    import numpy as np

    stack = stack or np.stack
    out = {k: v for k, v in layers.items() if not re.match(rf"{prefix}layers_\d+$", k)}
    for g in groups:
        if not g.scanned:
            out.update({f"{prefix}layers_{i}": layers[f"{prefix}layers_{i}"] for i in range(g.first, g.end)})
            continue
        out[f"{prefix}scan_{g.first}"] = {
            f"layer_{j}": jax.tree.map(lambda *xs: stack(xs), *(layers[f"{prefix}layers_{g.first + r * g.period + j}"]
                                                                for r in range(g.repeats)))
            for j in range(g.period)}
    return out
