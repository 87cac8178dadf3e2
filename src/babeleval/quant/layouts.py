"""llama.cpp's block layouts as one table: which bytes of a block are code planes, the f16
block scale and minimum, and packed sub-block scales (K-quants), and how codes and scales
combine. Dequantizing is the same few steps for every type (blocks.py); only this table and the
decoders of packed sub-scales below differ. Reference: gguf-py's quants.py (its numpy dequantizers
are the float32 values these must equal bit for bit) and ggml-quants.c."""
from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np


@dataclass(frozen=True)
class Plane:
    """A field of packed codes: `bits`-wide codes, read in runs of `group` bytes (the lowest bits of
    each byte of a run give its first `group` elements, the next bits the following ones; 0: the
    run is the whole block's field)."""

    field: str
    bits: int
    group: int


@dataclass(frozen=True)
class Layout:
    name: str
    block: int  # elements per block (a K-quant's super-block); 0: chosen at quantization (int8, int4)
    fields: tuple  # (name, bytes) in the order stored; 'scale' and 'min' are one float16 each
    planes: tuple  # Plane, lowest bits first: code = plane0 | plane1 << bits0
    offset: int = 0  # subtracted from each code (Q4_0: 8, Q6_K: 32)
    signed: bool = False  # codes are two's-complement bytes (Q8_0)
    sub: int = 1  # sub-blocks, each with an integer scale (and minimum) times the block's
    min: str = ""  # "add": + min per block (Q4_1, Q5_1); "sub": - min * sub_min per sub-block (K-quants);
    # "zero": (code - zero) * scale, an integer zero point per block (GPTQ, AWQ, compressed-tensors)
    float: str = ""  # codes are this ml_dtypes float type's bits (hub FP8), not integers
    sub_scales: str = ""  # how the 'scales' field packs the sub-block scales: SUB_SCALES


def planes(x, bits: int, group: int, xp=np):
    """[..., bytes] packed codes -> [..., bytes * 8 / bits] codes (numpy or jax.numpy)."""
    shifts = xp.arange(0, 8, bits, dtype=xp.uint8).reshape(-1, 1)
    group = group or x.shape[-1]
    runs = x.reshape(*x.shape[:-1], x.shape[-1] // group, 1, group)
    mask = xp.uint8((1 << bits) - 1)
    return ((runs >> shifts) & mask).reshape(*x.shape[:-1], -1)


def _q3_k(scales, xp=np):  # 16 six-bit scales: low nibbles from bytes 0-7, top two bits from bytes 8-11, less 32
    code = planes(scales[..., :8], 4, 8, xp) | (planes(scales[..., 8:], 2, 4, xp) << 4)
    return code.astype(np.int8) - np.int8(32), None


def _q4_k(scales, xp=np):  # 8 six-bit scales and 8 six-bit minimums in 12 bytes (ggml's get_scale_min_k4)
    d, m, md = scales[..., 0:4], scales[..., 4:8], scales[..., 8:12]
    sc = xp.concatenate([d & 0x3F, (md & 0x0F) | ((d >> 2) & 0x30)], axis=-1)
    mn = xp.concatenate([m & 0x3F, (md >> 4) | ((m >> 2) & 0x30)], axis=-1)
    return sc, mn


SUB_SCALES = {  # packed bytes (numpy or jax.numpy as xp) -> (sub-block scales, minimums or None)
    "nibbles": lambda s, xp=np: (s & 0xF, s >> 4),  # Q2_K: low nibbles the scales, high nibbles the minimums
    "q3_k": _q3_k,
    "q4_k": _q4_k,
    "int8": lambda s, xp=np: (s.view(np.int8), None),
}

K = 256
LAYOUTS = {layout.name: layout for layout in (
    Layout("Q4_0", 32, (("scale", 2), ("qs", 16)), (Plane("qs", 4, 16),), offset=8),
    Layout("Q4_1", 32, (("scale", 2), ("min", 2), ("qs", 16)), (Plane("qs", 4, 16),), min="add"),
    Layout("Q5_0", 32, (("scale", 2), ("qh", 4), ("qs", 16)), (Plane("qs", 4, 16), Plane("qh", 1, 1)), offset=16),
    Layout("Q5_1", 32, (("scale", 2), ("min", 2), ("qh", 4), ("qs", 16)), (Plane("qs", 4, 16), Plane("qh", 1, 1)),
           min="add"),
    Layout("Q8_0", 32, (("scale", 2), ("qs", 32)), (Plane("qs", 8, 32),), signed=True),
    Layout("Q2_K", K, (("scales", 16), ("qs", 64), ("scale", 2), ("min", 2)), (Plane("qs", 2, 32),), sub=16,
           min="sub", sub_scales="nibbles"),
    Layout("Q3_K", K, (("hmask", 32), ("qs", 64), ("scales", 12), ("scale", 2)),
           (Plane("qs", 2, 32), Plane("hmask", 1, 32)), offset=4, sub=16, sub_scales="q3_k"),
    Layout("Q4_K", K, (("scale", 2), ("min", 2), ("scales", 12), ("qs", 128)), (Plane("qs", 4, 32),), sub=8,
           min="sub", sub_scales="q4_k"),
    Layout("Q5_K", K, (("scale", 2), ("min", 2), ("scales", 12), ("qh", 32), ("qs", 128)),
           (Plane("qs", 4, 32), Plane("qh", 1, 32)), sub=8, min="sub", sub_scales="q4_k"),
    Layout("Q6_K", K, (("ql", 128), ("qh", 64), ("scales", 16), ("scale", 2)), (Plane("ql", 4, 64), Plane("qh", 2, 32)),
           offset=32, sub=16, sub_scales="int8"),
    # quantized at load (at_load.py), symmetric, a float32 scale per block: int8 one block per
    # output channel, int4 blocks of 128 inputs (low nibbles the first half, as Q4_0)
    Layout("int8", 0, (), (Plane("qs", 8, 0),), signed=True),
    Layout("int4", 0, (), (Plane("qs", 4, 0),), offset=8),
    # hub checkpoints (hub_formats.py), a float32 scale per block of a row: FP8 codes (a 128 x 128
    # block's scale repeated over its rows); unsigned codes less a zero point, packed as GPTQ and
    # compressed-tensors store them (element i of a row at bits i * bits of its bytes)
    Layout("fp8_e4m3", 0, (), (Plane("qs", 8, 0),), float="float8_e4m3fn"),
    Layout("fp8_e5m2", 0, (), (Plane("qs", 8, 0),), float="float8_e5m2"),
    *(Layout(f"uint{bits}", 0, (), (Plane("qs", bits, 1),), min="zero") for bits in (2, 4, 8)),
)}


def block_bytes(layout: Layout) -> int:
    return sum(size for _, size in layout.fields)


def row_bytes(name: str, columns: int) -> int:
    """A stored row's bytes: `columns` elements in `name`'s blocks."""
    layout = LAYOUTS[name]
    return columns // layout.block * block_bytes(layout)


def split_blocks(name: str, raw, xp=np) -> dict:
    """[..., rows, blocks * bytes] stored bytes -> the representation's fields, each [..., rows,
    blocks, ...]: code planes as stored (uint8), 'scale' and 'min' float16 per block, and a
    K-quant's sub-block scales ('sub_scale') and minimums ('sub_min') as small integers. xp:
    numpy (at load: each field a contiguous copy) or jax.numpy (inside jit: a QStack's layer)."""
    layout = LAYOUTS[name]
    size = block_bytes(layout)
    blocks = raw.reshape(*raw.shape[:-1], raw.shape[-1] // size, size)
    own = np.ascontiguousarray if xp is np else (lambda x: x)
    out, start = {}, 0
    for name, length in layout.fields:
        part = blocks[..., start:start + length]
        start += length
        if name in ("scale", "min"):
            out[name] = own(part).view(np.float16)[..., 0] if xp is np else \
                jax.lax.bitcast_convert_type(part, xp.float16)
        elif name == "scales":
            sub_scale, sub_min = SUB_SCALES[layout.sub_scales](own(part), xp)
            out["sub_scale"] = own(sub_scale)
            if sub_min is not None:
                out["sub_min"] = own(sub_min)
        else:
            out[name] = own(part)
    return out
