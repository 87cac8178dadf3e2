"""A GGUF file's header in one pass: its metadata as Python values and its tensors as
memory-mapped numpy views, laid out as the gguf package's reader lays them (quantised blocks as
uint8 rows of bytes), which that package's dequantisers take.

The gguf package's own reader builds one numpy view per string: seconds for SmolLM2's 49k-token
vocabulary, far more for Gemma's 262k. Here a string is a slice of one memory map.
Format: github.com/ggml-org/ggml/blob/master/docs/gguf.md (versions 2 and 3, little-endian).
"""
from __future__ import annotations

import mmap
import struct
from typing import Any, NamedTuple

import numpy as np

SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
DEFAULT_ALIGNMENT = 32
UNDECODABLE = object()  # a value holding text that is not UTF-8: left out of the metadata
PLAIN = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I8": np.int8, "I16": np.int16,
         "I32": np.int32, "I64": np.int64}  # tensor types gguf's reader views as numbers; the rest as bytes


class GGUFTensor(NamedTuple):
    name: str
    tensor_type: int  # a gguf.GGMLQuantizationType
    shape: tuple[int, ...]  # as the file stores it: the fastest-moving dimension first
    data: np.ndarray  # the file's bytes, typed as gguf's reader types them


def drop_pages(data) -> None:
    """Drop the pages of `data`, a view of a memory-mapped file (or a QArray's lazy Rows of one),
    from this process's resident set; they stay in the page cache. Anything else: nothing."""
    data = data if isinstance(data, np.ndarray) else getattr(data, "base", None)
    owner = data  # the array made on the map itself (a memmap's slices carry its _mmap too, not its start)
    while owner is not None and not isinstance(getattr(owner, "base", None), mmap.mmap):
        owner = getattr(owner, "base", None)
    if owner is None or not hasattr(mmap, "MADV_DONTNEED") or data.nbytes == 0:
        return
    mapped_at = owner.ctypes.data - getattr(owner, "offset", 0) % mmap.ALLOCATIONGRANULARITY
    start = data.ctypes.data - mapped_at
    low = start // mmap.PAGESIZE * mmap.PAGESIZE
    owner.base.madvise(mmap.MADV_DONTNEED, low, start + data.nbytes - low)


class GGUFFile:
    """Raises ValueError for a file that is not a whole GGUF file."""

    def __init__(self, path):
        self.path = str(path)
        self._map = np.memmap(self.path, mode="r")
        self._view = memoryview(self._map)
        try:
            self._read_header()
        except struct.error:
            raise ValueError(f"its header runs past the end of the file ({len(self._view):,} bytes: cut short)") from None

    def release(self, data: np.ndarray) -> None:
        """Drop a tensor's pages, once it is copied out, from this process's resident set (they stay
        in the page cache): a streamed load then holds the file one tensor at a time."""
        drop_pages(data)

    def _read_header(self) -> None:
        if bytes(self._view[:4]) != b"GGUF":
            raise ValueError("GGUF magic invalid")
        version, tensor_count, kv_count = struct.unpack_from("<IQQ", self._view, 4)
        if version & 0xFFFF == 0:
            raise ValueError("a big-endian GGUF file, which only big-endian hosts read")
        if version not in (2, 3):
            raise ValueError(f"GGUF version {version} (versions 2 and 3 are read)")
        self.version, self.metadata = version, {}
        offset = 24
        for _ in range(kv_count):
            key, offset = self._string(offset)
            key = str(key, "utf-8")
            if key in self.metadata:
                raise ValueError(f"duplicate key {key}")
            (kind,), offset = struct.unpack_from("<I", self._view, offset), offset + 4
            self.metadata[key], offset = self._value(kind, offset)
        infos = []
        for _ in range(tensor_count):
            name, offset = self._string(offset)
            (dims,) = struct.unpack_from("<I", self._view, offset)
            shape = struct.unpack_from(f"<{dims}Q", self._view, offset + 4)
            kind, start = struct.unpack_from("<IQ", self._view, offset + 4 + 8 * dims)
            infos.append((str(name, "utf-8"), shape, kind, start))
            offset += 4 + 8 * dims + 12
        alignment = self.metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise ValueError(f"general.alignment {alignment!r} is not a power of two")
        data_start = -(-offset // alignment) * alignment
        self.tensors = [self._tensor(name, shape, kind, data_start + start) for name, shape, kind, start in infos]
        if len({t.name for t in self.tensors}) < len(self.tensors):
            raise ValueError("duplicate tensor names")

    def _within(self, end: int) -> int:
        """`end`, if the file reaches it (else the header is cut: struct.error, as a short read raises)."""
        if end > len(self._view):
            raise struct.error(f"byte {end} is past the end")
        return end

    def _string(self, offset: int) -> tuple[memoryview, int]:
        (length,) = struct.unpack_from("<Q", self._view, offset)
        end = self._within(offset + 8 + length)
        return self._view[offset + 8:end], end

    def _value(self, kind: int, offset: int) -> tuple[Any, int]:
        if kind in SCALARS:
            return struct.unpack_from("<" + SCALARS[kind], self._view, offset)[0], offset + struct.calcsize(SCALARS[kind])
        if kind == STRING:
            raw, offset = self._string(offset)
            text = _texts([raw])
            return (text if text is UNDECODABLE else text[0]), offset
        if kind != ARRAY:
            raise ValueError(f"unknown metadata value type {kind} at byte {offset}")
        item, count = struct.unpack_from("<IQ", self._view, offset)
        offset += 12
        if item in SCALARS:
            dtype = np.dtype("<" + SCALARS[item])
            end = self._within(offset + dtype.itemsize * count)
            return np.frombuffer(self._view, dtype, count, offset).tolist(), end
        if item == STRING:
            raws = []
            for _ in range(count):
                raw, offset = self._string(offset)
                raws.append(raw)
            return _texts(raws), offset
        values = []  # arrays of arrays: rare, read item by item
        for _ in range(count):
            value, offset = self._value(item, offset)
            values.append(value)
        return values, offset

    def _tensor(self, name: str, shape: tuple[int, ...], kind: int, start: int) -> GGUFTensor:
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
        from gguf.quants import quant_shape_to_byte_shape

        kind = GGMLQuantizationType(kind)
        elements = int(np.prod(shape, dtype=np.int64))
        block, block_bytes = GGML_QUANT_SIZES[kind]
        size = elements * block_bytes // block
        if start + size > len(self._view):
            raise ValueError(f"tensor {name} ends at byte {start + size:,} of a {len(self._view):,}-byte file (cut short)")
        numpy_shape = tuple(reversed(shape))
        dtype = PLAIN.get(kind.name)
        if dtype is None:
            dtype, numpy_shape = np.uint8, quant_shape_to_byte_shape(numpy_shape, kind)
        data = np.frombuffer(self._map, np.uint8, size, start).view(dtype).reshape(numpy_shape)
        return GGUFTensor(name, kind, tuple(shape), data)



def _texts(raws: list[memoryview]):
    """The strings, or UNDECODABLE where any is not UTF-8."""
    try:
        return [str(raw, "utf-8") for raw in raws]
    except UnicodeDecodeError:
        return UNDECODABLE
