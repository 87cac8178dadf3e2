"""babeleval's GGUF header reader against the gguf package's GGUFReader: every metadata value
and every tensor's type, shape and bytes, on a file holding every value type and, in the full
tier, SmolLM2's real GGUF (Q4_1) and Gemma 3's (K-quants); cut, foreign and non-UTF-8 files."""
import struct
from pathlib import Path

import gguf
import numpy as np
import pytest

from babeleval.errors import BabelevalError
from babeleval.loading import resolve
from babeleval.loading.gguf_file import read_gguf_metadata
from babeleval.loading.gguf_reader import UNDECODABLE, GGUFFile


def assert_equal_to_gguf_package(path):
    ours, theirs = GGUFFile(path), gguf.GGUFReader(str(path))
    fields = {key: field for key, field in theirs.fields.items() if not key.startswith("GGUF.")}
    assert list(ours.metadata) == list(fields)
    for key, field in fields.items():
        assert ours.metadata[key] == field.contents(), key
        assert type(ours.metadata[key]) is type(field.contents()), key
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    for mine, want in zip(ours.tensors, theirs.tensors):
        assert mine.tensor_type == want.tensor_type and mine.shape == tuple(int(x) for x in want.shape), mine.name
        assert mine.data.dtype == want.data.dtype and mine.data.shape == want.data.shape, mine.name
        assert np.array_equal(mine.data, want.data), mine.name
    return ours


def every_type_file(path):
    writer = gguf.GGUFWriter(str(path), "llama")
    for kind, value in (("uint8", 200), ("int8", -100), ("uint16", 60000), ("int16", -30000), ("uint32", 4_000_000_000),
                        ("int32", -2_000_000_000), ("float32", 0.1), ("uint64", 2**63 + 5), ("int64", -(2**62)),
                        ("float64", 0.1), ("bool", True), ("string", "ሰላም, 世界")):
        getattr(writer, f"add_{kind}")(f"test.{kind}", value)
    writer.add_array("test.ints", [3, -1, 7])
    writer.add_array("test.floats", [0.5, 1.25])
    writer.add_array("test.strings", ["a", "", "नमस्ते", "abc"])
    writer.add_string("test.not_utf8", "xyz")
    rng = np.random.default_rng(0)
    writer.add_tensor("f32", rng.standard_normal((3, 5)).astype(np.float32))
    writer.add_tensor("f16", rng.standard_normal((2, 7)).astype(np.float16))
    q8 = rng.standard_normal((4, 64)).astype(np.float32)
    writer.add_tensor("q8", gguf.quants.quantize(q8, gguf.GGMLQuantizationType.Q8_0), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_every_value_type_equals_the_gguf_package(tmp_path):
    path = every_type_file(tmp_path / "types.gguf")
    ours = assert_equal_to_gguf_package(path)
    assert ours.metadata["test.strings"] == ["a", "", "नमस्ते", "abc"] and ours.metadata["test.uint64"] == 2**63 + 5
    assert ours.metadata["test.string"] == "ሰላም, 世界" and ours.metadata["test.float32"] == np.float32(0.1)
    q8 = ours.tensors[2]
    assert q8.shape == (64, 4) and q8.data.shape == (4, 68)  # 2 blocks of 32 a row: 2 x (2-byte scale + 32 bytes)
    # text that is not UTF-8 is left out of the metadata (the gguf package cannot decode it either)
    data = path.read_bytes()
    at = data.index(b"xyz")
    path.write_bytes(data[:at] + b"\xff\xfe\xfd" + data[at + 3:])
    assert GGUFFile(path).metadata["test.not_utf8"] is UNDECODABLE
    assert "test.not_utf8" not in read_gguf_metadata(path) and read_gguf_metadata(path)["test.int8"] == -100
    with pytest.raises(UnicodeDecodeError):
        gguf.GGUFReader(str(path)).fields["test.not_utf8"].contents()


@pytest.mark.full  # (the default tier reads this file in every SmolLM2 test, test_golden's logits among them)
def test_smollm2_gguf_equals_the_gguf_package():
    ours = assert_equal_to_gguf_package(resolve("smollm2-135m"))
    assert len(ours.metadata["tokenizer.ggml.tokens"]) == 49152 and len(ours.tensors) == 272


@pytest.mark.full
def test_gemma3_kquant_gguf_equals_the_gguf_package():
    ours = assert_equal_to_gguf_package(resolve("gemma3-270m"))
    assert {t.tensor_type.name for t in ours.tensors} == {"F32", "Q4_K", "Q5_0", "Q6_K", "Q8_0"}
    assert len(ours.metadata["tokenizer.ggml.tokens"]) == 262144


def test_cut_and_foreign_files_are_refused_naming_the_file(tmp_path):
    path = every_type_file(tmp_path / "whole.gguf")
    whole, tensors = path.read_bytes(), gguf.GGUFReader(str(path)).tensors
    first_tensor, last_tensor_end = tensors[0].data_offset, tensors[-1].data_offset + tensors[-1].n_bytes
    cases = {"metadata": (whole[:whole.index(b"test.strings") + 40], "header runs past the end of the file"),
             "tensors": (whole[:first_tensor + 10], "tensor f32 ends at byte"),
             "last-tensor": (whole[:last_tensor_end - 1], "tensor q8 ends at byte"),
             "in-a-string": (whole[:whole.index("नमस्ते".encode()) + 3], "header runs past the end of the file"),
             "in-an-array": (whole[:whole.index(b"test.ints") + 9 + 4 + 12 + 5], "header runs past the end of the file"),
             "foreign": (b"PK\x03\x04" + whole[4:], "GGUF magic invalid"),
             "version": (whole[:4] + struct.pack("<I", 1) + whole[8:], "GGUF version 1"),
             "big-endian": (whole[:4] + struct.pack(">I", 3) + whole[8:], "big-endian")}
    for name, (data, message) in cases.items():
        path = tmp_path / f"{name}.gguf"
        path.write_bytes(data)
        with pytest.raises(BabelevalError, match=f"{name}.gguf: not a readable GGUF file .*{message}"):
            read_gguf_metadata(path)


def _resident_bytes(path) -> int:
    """This process's resident bytes of `path`'s mappings (Linux /proc/self/smaps)."""
    total, mapped = 0, False
    for line in open("/proc/self/smaps"):
        fields = line.split()
        if "-" in fields[0] and ":" not in fields[0]:
            mapped = line.rstrip().endswith(str(path))
        elif mapped and fields[0] == "Rss:":
            total += int(fields[1]) * 1024
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads /proc/self/smaps")
def test_stacked_layers_leave_no_file_pages_resident(tmp_path):
    """Layers copied into a stack (one layout, and two: a QStack of stored row bytes) drop their
    pages of the memory-mapped file once copied, so a streamed load holds the file one tensor at a
    time. Run once against the code that dropped a QStack layer's pages before copying them (which
    read them back): 35.7 MB of this 92.8 MB file stayed resident (an 8B Q4_K_M file: 1.09 GB)."""
    import jax

    from babeleval.loading.gguf_reader import drop_pages
    from babeleval.loading.stacking import Stacks
    from babeleval.quant import QArray, QStack, from_blocks
    from babeleval.quant.layouts import row_bytes

    rows, columns = 65536, 256  # tensors of 9.4 and 13.8 MB: larger than the page cache's folios
    kinds = ["Q6_K", "Q4_K", "Q6_K", "Q4_K"]
    sizes = [rows * row_bytes(k, columns) for k in kinds]
    path = tmp_path / "layers.bin"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, sum(sizes) * 2, dtype=np.uint8).tobytes())
    mapped = np.memmap(path, mode="r")
    offsets = np.cumsum([0] + sizes)
    stacks = Stacks({"mixed": jax.ShapeDtypeStruct((4, rows, columns), np.float32),
                     "one": jax.ShapeDtypeStruct((2, rows, columns), np.float32)}, np.float32, print)

    def read(start, end, kind):  # as gguf_items reads a tensor: its fields copied, its pages released
        raw = mapped[start:end].reshape(rows, -1)
        part = from_blocks(kind, raw, (rows, columns))
        drop_pages(raw)
        return part

    done = {}
    for i, kind in enumerate(kinds):
        done["mixed"] = stacks.add("mixed", i, read(offsets[i], offsets[i + 1], kind))
        if kind == "Q6_K":
            done["one"] = stacks.add("one", i // 2, read(sum(sizes) + offsets[i], sum(sizes) + offsets[i + 1], kind))
    resident = _resident_bytes(path)
    assert isinstance(done["mixed"], QStack) and isinstance(done["one"], QArray)
    second = mapped[offsets[1]:offsets[2]].reshape(rows, -1)
    assert np.array_equal(np.asarray(done["mixed"].raw[1, :, :sizes[1] // rows]), second)
    assert resident <= 0.1 * sum(sizes), resident  # a few folios' pages beside the tensors stay mapped


def test_a_placed_weight_is_copied_before_the_next_is_read():
    """place_leaf returns once its copy is done: jax.device_put copies asynchronously and keeps
    the host array alive until then, so an 8B GGUF's load returned with 3 of its 5.3 GB of weights
    still to copy and their host stacks alive into the first program (peak RSS 9.5 GB, 6.5 with
    the wait). Run once against the code without it: the 128 MB array was not ready."""
    import jax
    from jax.sharding import SingleDeviceSharding

    from babeleval.placement.sharding import place_leaf
    from babeleval.quant import from_blocks
    from babeleval.quant.layouts import row_bytes

    one_device = lambda path, shape: SingleDeviceSharding(jax.devices()[0])  # noqa: E731
    host = np.random.default_rng(0).integers(0, 256, 128 << 20, dtype=np.uint8)
    placed = place_leaf(one_device, "weight", host)
    assert placed.is_ready()
    rows = 1 << 16
    blocks = np.random.default_rng(1).integers(0, 256, (rows, row_bytes("Q4_K", 1024)), dtype=np.uint8)
    quantized = place_leaf(one_device, "mlp.up", from_blocks("Q4_K", blocks, (rows, 1024)))
    assert all(field.is_ready() for field in jax.tree.leaves(quantized))
    assert np.array_equal(np.asarray(placed), host)
