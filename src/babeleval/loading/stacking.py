"""Per-layer file tensors collected into the stacked parameters of scanned layer groups
(models/stack.py): each layer's tensor goes into its slot as it is read, and a stack is placed
once its last layer arrives, so the host holds one stacked parameter at a time."""
from __future__ import annotations

import numpy as np

from ..quant import QArray


class Stacks:
    def __init__(self, want: dict, dtype, warn):
        self.want, self.dtype, self.warn = want, dtype, warn
        self.pending: dict[str, dict] = {}

    def add(self, name: str, index: int, part):
        """Layer `index`'s part of stacked parameter `name`; the whole stack once every layer is
        in, else None. A dense part is written into the stack's buffer at once; quantized parts
        are kept until the last, then stacked as one QArray when they share a layout (a Q4_K_M
        file holds some layers' tensors as Q6_K: such a stack is dequantized, said once)."""
        shape = self.want[name].shape
        entry = self.pending.setdefault(name, {"parts": {}, "buffer": None})
        if entry["buffer"] is None and not isinstance(part, QArray):
            entry["buffer"] = np.empty(shape, self.dtype)
            for i, q in entry["parts"].items():
                entry["buffer"][i] = _dense(q, self.dtype)
            entry["parts"] = {}
        if entry["buffer"] is not None:
            entry["buffer"][index] = _dense(part, self.dtype)
            entry.setdefault("filled", set()).add(index)
            done = len(entry["filled"]) == shape[0]
        else:
            entry["parts"][index] = part
            done = len(entry["parts"]) == shape[0]
        if not done:
            return None
        del self.pending[name]
        return entry["buffer"] if entry["buffer"] is not None else self._quantized(name, entry["parts"])

    def _quantized(self, name: str, parts: dict):
        ordered = [parts[i] for i in range(len(parts))]
        first = ordered[0]
        if len({(q.layout, q.transposed, q.shape) for q in ordered}) == 1:
            fields = {k: np.stack([np.asarray(q.fields[k]) for q in ordered]) for k in first.fields}
            return QArray(fields, first.layout, (len(ordered),) + first.shape, first.transposed)
        layouts = ", ".join(sorted({q.layout for q in ordered}))
        self.warn(f"{name}: the layers' tensors are held as {layouts}; one stack holds one layout, so this one "
                  f"is dequantized to {np.dtype(self.dtype).name}")
        return np.stack([_dense(q, self.dtype) for q in ordered])

    def lacking(self) -> dict[str, list[int]]:
        """{stacked parameter: the slots (layers) that never came} for the stacks begun, not ended."""
        out = {}
        for name, entry in self.pending.items():
            have = entry.get("filled") or set(entry["parts"])
            out[name] = [i for i in range(self.want[name].shape[0]) if i not in have]
        return out


def _dense(part, dtype):
    if isinstance(part, QArray):
        return part.dequantize(np.float32, xp=np).astype(dtype)
    return np.asarray(part).astype(dtype, copy=False)
