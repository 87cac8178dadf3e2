"""A safetensors file read with numpy alone: an 8-byte little-endian header length, a JSON
header {name: {dtype, shape, data_offsets}}, then the data. safetensors' own numpy loader knows
no bfloat16 and no float8 (most hub checkpoints are bf16, FP8 releases float8_e4m3fn); here they
are ml_dtypes arrays. Each tensor is read into its own array when it is asked for, one at a time."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import ml_dtypes
import numpy as np

from ..errors import BabelevalError

DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
    "F8_E4M3": ml_dtypes.float8_e4m3fn, "F8_E5M2": ml_dtypes.float8_e5m2,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_,
}


def header(file: Path) -> dict:
    """{name: {"dtype", "shape", "data_offsets"}} (absolute offsets), metadata left out."""
    try:
        with open(file, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            if length > 100_000_000:
                raise ValueError(f"a header of {length} bytes")
            entries = json.loads(handle.read(length))
    except (OSError, ValueError, struct.error) as exc:
        raise BabelevalError(f"{file}: unreadable safetensors file ({exc})") from None
    start = 8 + length
    out = {}
    for name, entry in entries.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict) or entry.get("dtype") not in DTYPES:
            dtype = entry.get("dtype") if isinstance(entry, dict) else entry
            raise BabelevalError(f"{file}: tensor {name}: unsupported dtype {dtype!r} "
                                 f"(read: {', '.join(DTYPES)})")
        begin, end = entry["data_offsets"]
        out[name] = {"dtype": entry["dtype"], "shape": tuple(entry["shape"]), "data_offsets": (start + begin, start + end)}
    return out


def tensors(file: Path):
    """(name, numpy array in the file's dtype) for each tensor, in the file's order."""
    entries = header(file)
    with open(file, "rb") as handle:
        for name, entry in sorted(entries.items(), key=lambda item: item[1]["data_offsets"]):
            dtype = np.dtype(DTYPES[entry["dtype"]])
            begin, end = entry["data_offsets"]
            count = int(np.prod(entry["shape"], dtype=np.int64))
            if end - begin != count * dtype.itemsize:
                raise BabelevalError(f"{file}: tensor {name}: {end - begin} bytes for shape {list(entry['shape'])} "
                                     f"of {entry['dtype']}")
            handle.seek(begin)
            data = np.fromfile(handle, np.uint8, end - begin)
            if data.size != end - begin:
                raise BabelevalError(f"{file}: tensor {name}: the file ends before its data (truncated)")
            yield name, data.view(dtype).reshape(entry["shape"])
