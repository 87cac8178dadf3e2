"""Per-layer file tensors collected into the stacked parameters of scanned layer groups
(models/stack.py): each layer's tensor is copied into its slot of the stack as it is read (a
quantized one's fields into stacked fields; layers in several block types: each one's stored row
bytes, once), and a stack is placed once its last layer arrives,
so the host holds one stack in the making per parameter and no list of parts."""
from __future__ import annotations

import numpy as np

from .gguf_reader import drop_pages
from ..quant import LAYOUTS, QArray, QStack


class Stacks:
    def __init__(self, want: dict, dtype, warn):
        self.want, self.dtype, self.warn = want, dtype, warn
        self.pending: dict[str, dict] = {}

    def add(self, name: str, index: int, part):
        """Layer `index`'s part of stacked parameter `name`; the whole stack once every layer is
        in, else None. Parts that are QArrays of one layout stack as one QArray; of several block
        types (some GGUF files hold a few layers' tensors in a wider type) as a QStack of each
        layer's stored row bytes; a dense layer among quantized ones (or layouts that cannot mix:
        parts without their stored bytes, of other shapes) makes the stack dense in dtype, said once by warn."""
        n = self.want[name].shape[0]
        entry = self.pending.get(name)
        if entry is None:
            entry = self.pending[name] = {"filled": set(), "first": part if isinstance(part, QArray) else None,
                                          "raw": {}}
            entry["buffer"] = _empty(part, n, self.dtype)
        stack = entry["buffer"]
        if isinstance(stack, (QArray, QStack)) and not _mixes(entry, part):
            stack = entry["buffer"] = self._densified(name, entry, part)
        elif isinstance(stack, QArray) and not _same_kind(entry["first"], part):
            stack = entry["buffer"] = self._mixed(name, entry)
        if isinstance(stack, QStack):
            _write_raw(stack, index, part)
        elif isinstance(stack, QArray):
            _write(stack, index, part)
            entry["raw"][index] = part.raw  # the file's pages (no copy): read again if another layout comes
        else:
            stack[index] = _dense(part, self.dtype)
        entry["filled"].add(index)
        if len(entry["filled"]) < n:
            return None
        return self.pending.pop(name)["buffer"]

    def _mixed(self, name: str, entry: dict) -> QStack:
        """The stack so far (one layout) as a QStack: the layers so far as their stored row bytes."""
        stack, n = entry["buffer"], self.want[name].shape[0]
        raw = next(iter(entry["raw"].values()))
        out = QStack(np.zeros((n,) + tuple(raw.shape), np.uint8), np.zeros(n, np.int32), (stack.layout,),
                     stack.shape, stack.transposed)
        for index, layer in entry["raw"].items():
            out.raw[index] = np.asarray(layer)
            drop_pages(layer)  # read back from the file (copied): out of the resident set again
        entry["raw"] = {}
        return out

    def _densified(self, name: str, entry: dict, part):
        """The quantized stack so far dense in dtype (a dense layer came among quantized ones)."""
        stack = entry["buffer"]
        kind = part.layout if isinstance(part, QArray) else np.dtype(part.dtype).name
        self.warn(f"{name}: the layers' tensors are held as {stack.layout} and {kind}; "
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


def _mixes(entry: dict, part) -> bool:
    """part can join the quantized stack so far: its layout (another one: as stored row bytes)."""
    stack, first = entry["buffer"], entry["first"]
    if isinstance(stack, QArray) and _same_kind(first, part):
        return True
    have_raw = isinstance(stack, QStack) or all(r is not None for r in entry["raw"].values())
    return (isinstance(part, QArray) and part.raw is not None and have_raw and part.layout in LAYOUTS
            and LAYOUTS[part.layout].block > 0 and part.shape[-2:] == stack.shape[-2:]
            and part.transposed == stack.transposed and tuple(part.raw.shape[:-1]) == _stack_rows(stack))


def _stack_rows(stack) -> tuple:
    """A stack's stored [*lead, rows] of one layer."""
    return tuple(stack.stored_shape[1:-1])


def _write_raw(stack: QStack, index: int, part: QArray) -> None:
    """A layer's stored row bytes into its slot (zero-padded), the stack widened for a wider layout."""
    if part.layout not in stack.layouts:
        stack.layouts += (part.layout,)
    row = np.asarray(part.raw)
    if row.shape[-1] > stack.raw.shape[-1]:
        pad = [(0, 0)] * (stack.raw.ndim - 1) + [(0, row.shape[-1] - stack.raw.shape[-1])]
        stack.raw = np.pad(stack.raw, pad)
    stack.raw[index] = 0
    stack.raw[index, ..., :row.shape[-1]] = row
    drop_pages(part.raw)  # after the copy, which reads them
    stack.which[index] = stack.layouts.index(part.layout)


def _same_kind(first, part) -> bool:
    return (first is not None and isinstance(part, QArray) and part.layout == first.layout
            and part.transposed == first.transposed and part.shape == first.shape and set(part.fields) == set(first.fields)
            and all(np.shape(part.fields[k]) == np.shape(first.fields[k]) for k in first.fields))


def _dense(part, dtype):
    if isinstance(part, QArray):
        return part.dequantize(np.float32, xp=np).astype(dtype)
    return np.asarray(part).astype(dtype, copy=False)
