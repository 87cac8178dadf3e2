"""loading/safetensors_file.py reads what safetensors' numpy loader cannot (bfloat16, most hub
checkpoints; float8, FP8 releases) to the values torch reads, and names the file and tensor
when a file is cut short or holds an unknown dtype."""
import json

import numpy as np
import pytest

from babeleval.errors import BabelevalError
from babeleval.loading.safetensors_file import tensors

torch = pytest.importorskip("torch")


def test_every_dtype_reads_as_torch_reads_it(tmp_path):
    from safetensors.torch import save_file

    base = torch.randn(3, 5)
    written = {"bf16": base.bfloat16(), "f16": base.half(), "f32": base, "f8": base.to(torch.float8_e4m3fn),
               "e5m2": base.to(torch.float8_e5m2), "i32": torch.arange(6, dtype=torch.int32).reshape(2, 3),
               "u8": torch.arange(4, dtype=torch.uint8), "flag": torch.tensor([True, False])}
    save_file(written, str(tmp_path / "m.safetensors"))
    read = dict(tensors(tmp_path / "m.safetensors"))
    assert set(read) == set(written)
    for name, value in written.items():
        assert read[name].shape == tuple(value.shape)
        assert np.array_equal(read[name].astype(np.float32), value.float().numpy()), name
    assert read["bf16"].dtype.name == "bfloat16" and read["f8"].dtype.name == "float8_e4m3fn"


def test_a_cut_file_and_an_unknown_dtype_are_named(tmp_path):
    header = json.dumps({"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]}}).encode()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(len(header).to_bytes(8, "little") + header + bytes(40))
    with pytest.raises(BabelevalError, match=r"cut\.safetensors: tensor w: the file ends before its data"):
        list(tensors(cut))
    header = json.dumps({"w": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}}).encode()
    odd = tmp_path / "odd.safetensors"
    odd.write_bytes(len(header).to_bytes(8, "little") + header + bytes(1))
    with pytest.raises(BabelevalError, match=r"odd\.safetensors: tensor w: unsupported dtype 'F4'"):
        list(tensors(odd))
