"""Hub checkpoints' quantized weights as QArrays of the dense [out, in] weight they stand for,
in the layouts of layouts.py (a float32 scale per block of a row; FP8 codes, or unsigned codes
less an integer zero point):

- FP8 (transformers' `fp8`, DeepSeek and Qwen3 FP8 releases): float8 weight x weight_scale_inv
  per 128 x 128 block; compressed-tensors `float-quantized`: x weight_scale per channel/tensor/group.
- GPTQ: qweight int32 [in * bits / 32, out] (element i of a word at bits i * bits), qzeros
  [groups, out * bits / 32] packed along the outputs, scales [groups, out]; (code - zero) x scale,
  the v1 checkpoint format storing zero - 1.
- AWQ (GEMM): qweight int32 [in, out / 8], each word's nibbles in the order 0 2 4 6 1 3 5 7;
  qzeros likewise; scales [groups, out]; (code - zero) x scale.
- compressed-tensors `pack-quantized`: weight_packed int32 [out, in * bits / 32] (as GPTQ's words,
  not transposed), signed codes stored + 2^(bits-1), zero points packed along the outputs;
  `int-quantized`: int8 weights x weight_scale.

A block whose scale covers b0 rows x b1 inputs is held per row and per run of gcd(inputs, b1)
inputs (the scale repeated), so partial blocks at an edge are exact. GPTQ words along the inputs
keep their bytes (transposed words); AWQ's, packed along the outputs, are unpacked and repacked."""
from __future__ import annotations

import math

import numpy as np

from .layouts import planes
from .qarray import ORDER, QArray

AWQ_ORDER = np.array([0, 2, 4, 6, 1, 3, 5, 7])  # the element in each nibble of an AWQ word


def per_run(values, rows: int, inputs: int, block: tuple, what: str):
    """[ceil(rows / b0), ceil(inputs / b1)] per-block values (or one per tensor, or per row) ->
    [rows, inputs / run], run = gcd(inputs, b1); and run."""
    b0, b1 = block
    values = np.asarray(values)
    grid = (math.ceil(rows / b0), math.ceil(inputs / b1))
    if values.size == 1:
        values = values.reshape(1, 1)
    values = values.reshape(grid) if values.size == math.prod(grid) else values
    if values.shape != grid:
        raise ValueError(f"{what} of shape {list(values.shape)} for a [{rows}, {inputs}] weight in blocks of "
                         f"{b0} x {b1}: expected {list(grid)}")
    run = math.gcd(inputs, b1)
    values = np.repeat(np.repeat(values, b0, axis=0)[:rows], b1 // run, axis=1)[:, : inputs // run]
    return np.ascontiguousarray(values), run


def fp8(weight: np.ndarray, scale, block: tuple) -> QArray:
    """A float8 [out, in] weight times its scales (each covering block = (rows, inputs))."""
    rows, inputs = weight.shape
    scales, run = per_run(scale, rows, inputs, block, "the FP8 scale")
    layout = {"float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2"}[np.dtype(weight.dtype).name]
    codes = np.ascontiguousarray(weight).view(np.uint8).reshape(rows, inputs // run, run)
    return QArray({"qs": codes, "scale": scales.astype(np.float32)}, layout, (rows, inputs))


def integer(packed: np.ndarray, scale, zero, bits: int, block: tuple, shape: tuple) -> QArray:
    """Unsigned codes packed along each row's bytes ([out, in * bits / 8], element i at bits
    i * bits), less `zero` (per block, or a number), times `scale`."""
    rows, inputs = shape
    scales, run = per_run(scale, rows, inputs, block, "the scale")
    zeros = np.broadcast_to(np.asarray(zero), scales.shape) if np.size(zero) == 1 else \
        per_run(zero, rows, inputs, block, "the zero point")[0]
    codes = np.ascontiguousarray(packed).view(np.uint8).reshape(rows, inputs // run, run * bits // 8)
    return QArray({"qs": codes, "scale": scales.astype(np.float32), "zero": np.ascontiguousarray(zeros, np.uint8)},
                  f"uint{bits}", shape)


def unpack(words: np.ndarray, bits: int) -> np.ndarray:
    """int32 words [..., n] -> [..., n * 32 / bits] unsigned codes, element i at bits i * bits
    (the words' little-endian bytes read as layouts.py's planes, lowest bits first per byte)."""
    return planes(np.ascontiguousarray(words).view(np.uint8), bits, 1)


def pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """[..., n] unsigned codes -> [..., n * bits / 8] bytes, element i at bits i * bits."""
    per = 8 // bits
    grouped = codes.astype(np.uint8).reshape(*codes.shape[:-1], -1, per)
    return np.bitwise_or.reduce(grouped << (np.arange(per, dtype=np.uint8) * bits), axis=-1).astype(np.uint8)


def gptq(qweight, qzeros, scales, bits: int, group: int, v1: bool, g_idx=None) -> QArray | None:
    """A GPTQ module. With desc_act (act-order), input i belongs to group g_idx[i], so a group's
    inputs are not one run of a row: the codes are held with the inputs sorted by group (a stable
    sort), and the ORDER field puts the dequantized inputs back. None where the groups are not
    runs of `group` inputs once sorted (the caller dequantizes: gptq_act_order)."""
    inputs, rows = qweight.shape[0] * 32 // bits, qweight.shape[1]
    group = group or inputs
    zeros = unpack(qzeros, bits)[:, :rows].T.astype(np.int32) + (1 if v1 else 0)  # v1 stores zero - 1
    if zeros.max(initial=0) > 255:
        raise ValueError("zero points above 255")
    packed, runs = np.ascontiguousarray(qweight.T), np.arange(inputs) // group
    if g_idx is None or np.array_equal(g_idx, runs):
        return integer(packed, scales.T, zeros, bits, (1, group), (rows, inputs))
    by_group = np.argsort(np.asarray(g_idx), kind="stable")
    if not np.array_equal(np.asarray(g_idx)[by_group], runs):
        return None
    out = integer(pack(unpack(packed, bits)[:, by_group], bits), scales.T, zeros, bits, (1, group), (rows, inputs))
    out.fields[ORDER] = np.argsort(by_group).astype(np.int32)  # input i sits at position order[i]
    return out


def awq(qweight, qzeros, scales, bits: int, group: int) -> QArray:
    """An AWQ GEMM module: its codes transposed to [out, in] and repacked along the inputs."""
    order = np.argsort(AWQ_ORDER) if bits == 4 else np.arange(32 // bits)

    def unpacked(words):  # [n, m words] -> [n, m * 32 / bits] in element order
        codes = unpack(words, bits).reshape(*words.shape, -1)[..., order]
        return codes.reshape(words.shape[0], -1)

    codes = unpacked(qweight).T
    rows, inputs = codes.shape
    return integer(pack(codes, bits), scales.T, unpacked(qzeros)[:, :rows].T, bits, (1, group or inputs), (rows, inputs))


def compressed_packed(packed, scale, zero, shape: tuple, bits: int, block: tuple) -> QArray:
    """compressed-tensors pack-quantized: codes stored + 2^(bits-1); zero points (asymmetric)
    packed along the outputs, as signed values + 2^(bits-1); symmetric: the offset alone."""
    rows, inputs = (int(n) for n in shape)
    offset = 1 << (bits - 1)
    zeros = offset if zero is None else unpack(np.ascontiguousarray(zero.T), bits)[:, :rows].T
    return integer(packed, scale, zeros, bits, block, (rows, inputs))


def int8(weight: np.ndarray, scale, zero, block: tuple) -> QArray:
    """compressed-tensors int-quantized: int8 codes (symmetric, or less an int8 zero point)."""
    codes = weight.astype(np.int16) + 128
    zeros = 128 if zero is None else np.asarray(zero).astype(np.int16) + 128
    return integer(codes.astype(np.uint8), scale, zeros, 8, block, weight.shape)


def gptq_act_order(qweight, qzeros, scales, g_idx, bits: int, v1: bool) -> np.ndarray:
    """GPTQ with desc_act whose groups are not runs of one size once sorted: the dense [out, in]
    float32 weight, (code - zero) x scale per input's group."""
    codes = unpack(np.ascontiguousarray(qweight.T), bits).astype(np.float32)
    rows = codes.shape[0]
    zeros = unpack(qzeros, bits)[:, :rows].astype(np.float32) + (1 if v1 else 0)
    g_idx = np.asarray(g_idx, np.int64)
    return (codes - zeros[g_idx].T) * np.asarray(scales, np.float32)[g_idx].T
