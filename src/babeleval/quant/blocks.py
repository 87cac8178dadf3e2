"""Quantized blocks -> float32 values, the same steps for every layout (layouts.py), in the
float32 operations gguf-py's numpy dequantizers use (so the values are equal bit for bit):
codes from their planes, less the offset; scale = block scale (x sub-block scale); value =
scale * code, then + min (Q4_1, Q5_1) or - min x sub-block min (K-quants); hub formats: scale
x (code - zero point), or scale x an FP8 code."""
from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes

from .layouts import LAYOUTS, planes


def codes(layout, fields, xp=jnp):
    """[..., blocks, block] integer codes (int32) from the code planes."""
    code, shift = None, 0
    for plane in layout.planes:
        part = planes(fields[plane.field], plane.bits, plane.group, xp).astype(xp.int32)
        code = part if code is None else code | (part << shift)
        shift += plane.bits
    if layout.signed:
        code = code - ((code >> 7) << 8)  # two's complement byte
    return code - layout.offset


def float_codes(layout, fields):
    """FP8 codes: each byte's bits as the layout's float type (a bitcast)."""
    return fields[layout.planes[0].field].view(getattr(ml_dtypes, layout.float))


def dequantize_blocks(name: str, fields: dict, xp=jnp):
    """The fields of [..., blocks] blocks -> float32 [..., blocks * block]."""
    layout = LAYOUTS[name]
    f32 = xp.float32
    q = (float_codes(layout, fields) if layout.float else codes(layout, fields, xp)).astype(f32)
    q = q.reshape(*q.shape[:-1], layout.sub, -1)
    if layout.min == "zero":
        q = q - fields["zero"].astype(f32)[..., None, None]
    scale = fields["scale"].astype(f32)[..., None]
    if "sub_scale" in fields:
        scale = scale * fields["sub_scale"].astype(f32)
    out = scale[..., None] * q
    if layout.min == "add":
        out = out + fields["min"].astype(f32)[..., None, None]
    elif layout.min == "sub":
        out = out - (fields["min"].astype(f32)[..., None] * fields["sub_min"].astype(f32))[..., None]
    return out.reshape(*out.shape[:-3], -1)
