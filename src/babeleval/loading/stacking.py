"""Per-layer file tensors collected into the stacked parameters of scanned layer groups
(models/stack.py): each layer's tensor is copied into its slot of the stack as it is read (a
quantized one's fields into stacked fields), and a stack is placed once its last layer arrives,
so the host holds one stack in the making per parameter and no list of parts."""
from __future__ import annotations

import numpy as np

from ..quant import QArray


class Stacks:
    def __init__(self, want: dict, dtype, warn):
        self.want, self.dtype, self.warn = want, dtype, warn
        self.pending: dict[str, dict] = {}

    def add(self, name: str, index: int, part):
        """Layer `index`'s part of stacked parameter `name`; the whole stack once every layer is
        in, else None. Parts that are QArrays of one layout stack as one QArray; a stack whose
        layers differ (a dense layer among quantized ones, or two block types: some GGUF files
        hold a few layers' tensors in a wider type) is held dense in dtype, said once by warn."""
        n = self.want[name].shape[0]
        entry = self.pending.get(name)
        if entry is None:
            entry = self.pending[name] = {"filled": set(), "first": part if isinstance(part, QArray) else None}
            entry["buffer"] = _empty(part, n, self.dtype)
        if isinstance(entry["buffer"], QArray) and not _same_kind(entry["first"], part):
            entry["buffer"] = self._densified(name, entry, part)
        if isinstance(entry["buffer"], QArray):
            for key, field in part.fields.items():
                entry["buffer"].fields[key][index] = np.asarray(field)
        else:
            entry["buffer"][index] = _dense(part, self.dtype)
        entry["filled"].add(index)
        if len(entry["filled"]) < n:
            return None
        return self.pending.pop(name)["buffer"]

    def _densified(self, name: str, entry: dict, part):
        stack, first = entry["buffer"], entry["first"]
        kinds = {first.layout, part.layout if isinstance(part, QArray) else np.dtype(part.dtype).name}
        self.warn(f"{name}: the layers' tensors are held as {', '.join(sorted(kinds))}; one stack holds one "
                  f"layout, so this one is dequantized to {np.dtype(self.dtype).name}")
        dense = np.empty(self.want[name].shape, self.dtype)
        for i in entry["filled"]:
            layer = QArray({k: v[i] for k, v in stack.fields.items()}, first.layout, first.shape, first.transposed)
            dense[i] = _dense(layer, self.dtype)
        return dense

    def lacking(self) -> dict[str, list[int]]:
        """{stacked parameter: the slots (layers) that never came} for the stacks begun, not ended."""
        return {name: [i for i in range(self.want[name].shape[0]) if i not in entry["filled"]]
                for name, entry in self.pending.items()}


def _empty(part, n: int, dtype):
    """A stack of n layers shaped as `part` (a QArray's fields each with a leading axis of n)."""
    if isinstance(part, QArray):
        fields = {k: np.empty((n,) + np.shape(v), np.asarray(v).dtype) for k, v in part.fields.items()}
        return QArray(fields, part.layout, (n,) + part.shape, part.transposed)
    return np.empty((n,) + np.shape(part), dtype)


def _same_kind(first, part) -> bool:
    return (first is not None and isinstance(part, QArray) and part.layout == first.layout
            and part.transposed == first.transposed and part.shape == first.shape
            and all(np.shape(part.fields[k]) == np.shape(first.fields[k]) for k in first.fields))


def _dense(part, dtype):
    if isinstance(part, QArray):
        return part.dequantize(np.float32, xp=np).astype(dtype)
    return np.asarray(part).astype(dtype, copy=False)
