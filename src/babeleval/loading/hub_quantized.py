"""Hub folders whose config.json has a quantization_config babeleval reads (FP8, compressed-
tensors, GPTQ, AWQ): the scheme it names, and the stream of file tensors with each quantized
module's stored parts (weight and weight_scale_inv; qweight, qzeros, scales, g_idx; ...) gathered
as they come and handed on as one QArray named `<module>.weight` (quant/hub_formats.py), which
the name tables then place as they place a dense weight. Activation scales are dropped: weights
are dequantized before their matmuls, activations stay in the model's dtype."""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from ..errors import BabelevalError
from ..quant import hub_formats

LOGGER = logging.getLogger("babeleval")

METHODS = ("fp8", "compressed-tensors", "gptq", "awq")
ACTIVATION_SCALES = {"input_scale", "activation_scale", "output_scale", "k_scale", "v_scale", "input_zero_point",
                     "input_global_scale"}
CT_FORMATS = ("float-quantized", "int-quantized", "naive-quantized", "pack-quantized")


@dataclass(frozen=True)
class Scheme:
    method: str  # fp8, compressed-tensors, gptq, awq
    marker: str  # the stored part that makes a module quantized
    bits: int
    block: tuple  # (rows, inputs) one scale covers; 0: the whole dimension
    format: str = ""  # compressed-tensors' format
    v1: bool = False  # GPTQ's checkpoint format 1 stores zero - 1

    def describe(self) -> str:
        what = self.format or self.method
        rows, inputs = self.block
        return f"{self.method} ({what}, {self.bits}-bit, scale per {rows or 'all'} x {inputs or 'all'})"


def hub_scheme(raw: dict, source: str) -> Scheme | None:
    """The scheme of config.json's quantization_config, None where it has none; a method or an
    option babeleval does not read is refused in one line."""
    config = raw.get("quantization_config") or raw.get("compression_config") \
        or (raw.get("text_config") or {}).get("quantization_config")
    if not config:
        return None
    method = (config.get("quant_method") or config.get("format") or "unnamed") if isinstance(config, dict) else "unnamed"
    if method not in METHODS:
        raise BabelevalError(f"{source}: quantization_config method {method!r} is not read by babeleval (its weights "
                             f"would load as if dense); read: {', '.join(METHODS)}, and GGUF files")

    def refuse(what: str):
        raise BabelevalError(f"{source}: quantization_config ({method}): {what} is not read by babeleval")

    if method == "fp8":
        if config.get("fmt", "e4m3") != "e4m3":
            refuse(f"fmt {config.get('fmt')!r}")
        block = tuple(config.get("weight_block_size") or (0, 0))
        return Scheme("fp8", "weight_scale_inv", 8, block)
    if method in ("gptq", "awq"):
        bits, group = int(config.get("bits", config.get("w_bit", 4))), int(config.get("group_size", config.get("q_group_size", -1)))
        if bits not in ((2, 4, 8) if method == "gptq" else (4,)):
            refuse(f"{bits}-bit weights")
        if method == "awq" and str(config.get("version", "gemm")).lower() != "gemm":
            refuse(f"version {config.get('version')!r} (AWQ GEMM is)")
        if method == "awq" and config.get("zero_point") is False:
            refuse("zero_point false")
        return Scheme(method, "qweight", bits, (1, max(group, 0)),
                      v1=method == "gptq" and config.get("checkpoint_format", "gptq") != "gptq_v2")
    fmt = config.get("format")
    groups = [g for g in (config.get("config_groups") or {}).values() if g.get("weights")]
    fmt = next((g["format"] for g in groups if g.get("format")), fmt)
    if fmt not in CT_FORMATS:
        refuse(f"format {fmt!r}")
    args = {tuple(sorted((k, str(v)) for k, v in g["weights"].items())) for g in groups}
    if len(args) != 1:
        refuse(f"{len(args)} different weight schemes")
    weights = groups[0]["weights"]
    kind, bits, strategy = weights.get("type", "int"), int(weights.get("num_bits", 8)), weights.get("strategy", "tensor")
    if (kind, bits) not in (("float", 8), ("int", 8), ("int", 4), ("int", 2)) or weights.get("actorder") not in (None, False):
        refuse(f"{kind} {bits}-bit weights{' with actorder' if weights.get('actorder') else ''}")
    block = {"tensor": (0, 0), "channel": (1, 0), "group": (1, weights.get("group_size") or 0),
             "block": tuple(weights.get("block_structure") or (0, 0))}.get(strategy)
    if block is None:
        refuse(f"strategy {strategy!r}")
    return Scheme(method, "weight_packed" if fmt == "pack-quantized" else "weight_scale", bits, block, fmt)


def quantized_tensors(items, names: set, scheme: Scheme, source: str):
    """The file's (name, array) stream with each quantized module's parts as one (module.weight,
    QArray of its [out, in]); the host holds one module's parts at a time."""
    quantized = {n.rsplit(".", 1)[0] for n in names if n.endswith("." + scheme.marker)}
    wanted: dict[str, set] = {}
    for name in names:
        prefix, _, part = name.rpartition(".")
        if prefix in quantized and part not in ACTIVATION_SCALES and part != "bias":
            wanted.setdefault(prefix, set()).add(part)
    pending: dict[str, dict] = {}
    for key, array in items:
        prefix, _, part = key.rpartition(".")
        if part in ACTIVATION_SCALES:
            continue
        if prefix not in quantized or part == "bias":
            yield key, array
            continue
        parts = pending.setdefault(prefix, {})
        parts[part] = array
        if set(parts) >= wanted[prefix]:
            del pending[prefix]
            try:
                yield f"{prefix}.weight", _decoded(scheme, parts, prefix, source)
            except (KeyError, ValueError) as exc:
                raise BabelevalError(f"{source}: {prefix}: {scheme.describe()}: {exc}") from None
    if pending:
        prefix, parts = next(iter(pending.items()))
        raise BabelevalError(f"{source}: {prefix}: missing {', '.join(sorted(wanted[prefix] - set(parts)))}")


def _block(block: tuple, shape: tuple) -> tuple:
    return tuple(b or n for b, n in zip(block, shape))


def _decoded(scheme: Scheme, parts: dict, prefix: str, source: str):
    if scheme.method in ("gptq", "awq"):
        qweight, qzeros, scales = parts["qweight"], parts["qzeros"], parts["scales"]
        group = scheme.block[1]
        if scheme.method == "awq":
            return hub_formats.awq(qweight, qzeros, scales, scheme.bits, group)
        g_idx = parts.get("g_idx")
        kept = hub_formats.gptq(qweight, qzeros, scales, scheme.bits, group, scheme.v1, g_idx)
        if kept is None:
            LOGGER.warning(f"{source}: {prefix}: GPTQ act-order groups (desc_act) of unequal sizes are dequantized at load")
            return hub_formats.gptq_act_order(qweight, qzeros, scales, g_idx, scheme.bits, scheme.v1)
        return kept
    if scheme.method == "fp8":
        weight = parts["weight"]
        return hub_formats.fp8(weight, parts["weight_scale_inv"], _block(scheme.block, weight.shape))
    if scheme.format == "pack-quantized":
        shape = tuple(int(n) for n in parts["weight_shape"])
        return hub_formats.compressed_packed(parts["weight_packed"], parts["weight_scale"], parts.get("weight_zero_point"),
                                             shape, scheme.bits, _block(scheme.block, shape))
    weight = parts["weight"]
    block = _block(scheme.block, weight.shape)
    if scheme.format == "float-quantized":
        return hub_formats.fp8(weight, parts["weight_scale"], block)
    return hub_formats.int8(weight, parts["weight_scale"], parts.get("weight_zero_point"), block)
