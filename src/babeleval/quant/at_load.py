"""Quantizing a dense weight at load (`--quantize int8|int4`), symmetric, into the same QArray a
GGUF's blocks become: int8 with one float32 scale per output channel (absmax / 127), int4 with
one per GROUP inputs (absmax / 7; a row that GROUP does not divide takes the largest of 64, 32 that
does, else stays dense). Codes are round-to-nearest-even of weight / scale."""
from __future__ import annotations

import re

import numpy as np

from .qarray import QArray

METHODS = ("int8", "int4")
GROUP = 128
# the matmul weights of every family: kernels, stacked experts, the token embedding (a tied head's);
# not a router or a shared expert's gate (a few columns that choose, kept exact), nor T5's relative
# bias tables or position embeddings (looked up, not multiplied)
QUANTIZED = re.compile(r"(/kernel|^embed/embedding|/experts_(gate|up|down))$")
KEPT = re.compile(r"(router|shared_gate)/")


def group_size(method: str, inputs: int) -> int:
    if method == "int8":
        return inputs
    return next((g for g in (GROUP, 64, 32) if inputs % g == 0), 0)


def quantize(stored, method: str, xp=np) -> QArray | None:
    """[..., rows, inputs] float -> a QArray of that (stored) shape, or None where no group fits
    (xp=jax.numpy: on the device, inside jit, as bench/gpu_check.py quantizes random weights)."""
    w = xp.asarray(stored, xp.float32)
    group = group_size(method, w.shape[-1])
    if not group:
        return None
    blocks = w.reshape(*w.shape[:-1], w.shape[-1] // group, group)
    top = 127 if method == "int8" else 7
    scale = xp.abs(blocks).max(axis=-1) / top
    scale = xp.where(scale == 0, 1.0, scale).astype(xp.float32)
    codes = xp.clip(xp.rint(blocks / scale[..., None]), -top - 1, top).astype(xp.int8)
    if method == "int8":
        packed = codes.view(xp.uint8)
    else:
        nibbles = (codes + 8).astype(xp.uint8)
        packed = nibbles[..., : group // 2] | (nibbles[..., group // 2:] << 4)
    return QArray({"qs": np.ascontiguousarray(packed) if xp is np else packed, "scale": scale}, method, w.shape)


def quantize_leaf(path: str, array, method: str, xp=np):
    """A parameter as placed under `--quantize method`: its matmul weights quantized (a kernel
    [in, out] through its [out, in] rows), anything else as it is."""
    if isinstance(array, QArray) or not QUANTIZED.search(path) or KEPT.search(path) or np.ndim(array) < 2:
        return array
    transposed = not path.endswith("embedding")
    stored = xp.swapaxes(array, -1, -2) if transposed else array
    q = quantize(stored, method, xp)
    if q is None:
        return array
    return q.swap() if transposed else q
