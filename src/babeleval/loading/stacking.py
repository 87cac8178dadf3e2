"""Per-layer file tensors collected into the stacked parameters of scanned layer groups
(models/stack.py): each layer's tensor is copied into its slot of the stack as it is read (a
quantized one's fields into stacked fields), and a stack is placed once its last layer arrives,
so the host holds one stack in the making per parameter and no list of parts."""
from __future__ import annotations

import numpy as np

from ..quant import QArray, QStack


class Stacks:
    def __init__(self, want: dict, dtype, warn):
        self.want, self.dtype, self.warn = want, dtype, warn
        self.pending: dict[str, dict] = {}

    def add(self, name: str, index: int, part):
        """Layer `index`'s part of stacked parameter `name`; the whole stack once every layer is
        in, else None. Parts that are QArrays of one layout stack as one QArray; of several block
        types (some GGUF files hold a few layers' tensors in a wider type) as a QStack; a dense
        layer among quantized ones makes the stack dense in dtype, said once by warn."""
        n = self.want[name].shape[0]
        entry = self.pending.get(name)
        if entry is None:
            entry = self.pending[name] = {"filled": set(), "first": part if isinstance(part, QArray) else None}
            entry["buffer"] = _empty(part, n, self.dtype)
        stack = entry["buffer"]
        if isinstance(stack, (QArray, QStack)) and not isinstance(part, QArray):
            stack = entry["buffer"] = self._densified(name, entry, part)
        elif isinstance(stack, QArray) and not _same_kind(entry["first"], part):
            stack = entry["buffer"] = self._mixed(name, entry, part)
        if isinstance(stack, QStack):
            if part.layout not in stack.parts:  # a third layout
                stack.parts[part.layout] = _empty(part, n, self.dtype, np.zeros)
            _write(stack.parts[part.layout], index, part)
            stack.which[index] = list(stack.parts).index(part.layout)
        elif isinstance(stack, QArray):
            _write(stack, index, part)
        else:
            stack[index] = _dense(part, self.dtype)
        entry["filled"].add(index)
        if len(entry["filled"]) < n:
            return None
        return self.pending.pop(name)["buffer"]

    def _mixed(self, name: str, entry: dict, part: QArray) -> QStack:
        """The stack so far (one layout) as the first part of a QStack; the new layout's part zeros."""
        stack, first, n = entry["buffer"], entry["first"], self.want[name].shape[0]
        parts = {first.layout: stack, part.layout: _empty(part, n, self.dtype, np.zeros)}
        for field in stack.fields.values():  # the slots not yet read stay zero in every part
            field[[i for i in range(n) if i not in entry["filled"]]] = 0
        return QStack(parts, np.zeros(n, np.int32))  # the layers so far: the first part's

    def _densified(self, name: str, entry: dict, part):
        """The quantized stack so far dense in dtype (a dense layer came among quantized ones)."""
        stack = entry["buffer"]
        self.warn(f"{name}: the layers' tensors are held as {stack.layout} and {np.dtype(part.dtype).name}; "
                  f"the stack is dequantized to {np.dtype(self.dtype).name}")
        dense = np.zeros(self.want[name].shape, self.dtype)
        filled = sorted(entry["filled"])
        if filled:
            dense[filled] = np.asarray(stack.dequantize(np.float32, xp=np))[filled]
        return dense

    def lacking(self) -> dict[str, list[int]]:
        """{stacked parameter: the slots (layers) that never came} for the stacks begun, not ended."""
        return {name: [i for i in range(self.want[name].shape[0]) if i not in entry["filled"]]
                for name, entry in self.pending.items()}


def stacked(parts: list):
    """Parts on a new leading axis (a layer's experts): QArrays of one kind as one QArray of
    stacked fields, else dense (a QArray among them dequantized, float32)."""
    first = parts[0] if isinstance(parts[0], QArray) else None
    if first is not None and all(_same_kind(first, p) for p in parts):
        out = _empty(first, len(parts), None)
        for i, part in enumerate(parts):
            _write(out, i, part)
        return out
    return np.stack([_dense(p, np.float32) if isinstance(p, QArray) else np.asarray(p) for p in parts])


def _empty(part, n: int, dtype, make=np.empty):
    """A stack of n layers shaped as `part` (a QArray's fields each with a leading axis of n)."""
    if isinstance(part, QArray):
        fields = {k: make((n,) + np.shape(v), np.asarray(v).dtype) for k, v in part.fields.items()}
        return QArray(fields, part.layout, (n,) + part.shape, part.transposed)
    return make((n,) + np.shape(part), dtype)


def _write(stack: QArray, index: int, part: QArray) -> None:
    for key, field in part.fields.items():
        stack.fields[key][index] = np.asarray(field)


def _same_kind(first, part) -> bool:
    return (first is not None and isinstance(part, QArray) and part.layout == first.layout
            and part.transposed == first.transposed and part.shape == first.shape
            and all(np.shape(part.fields[k]) == np.shape(first.fields[k]) for k in first.fields))


def _dense(part, dtype):
    if isinstance(part, QArray):
        return part.dequantize(np.float32, xp=np).astype(dtype)
    return np.asarray(part).astype(dtype, copy=False)
