"""Orbax checkpoints: save/restore is exact, convert -> restore gives identical logits
(import vs restore times: bench/load_times.py). Quantized weights are saved as they are held: a
GGUF's blocks (a QStack where stacked layers mix block types) and int8/int4 codes come back as
the same QArray/QStack objects, fields bit for bit, sharded as load_model shards them, the
checkpoint about the quantized size, its method and source recorded. Run once against broken code
(2026-12-07), each failed: a QArray's fields rebuilt swapped (all three: shapes refused at restore),
a QStack's parts rebuilt in reverse order (the GGUF test: another tree), quantized.json not
written (all three: 'a corrupt or partial checkpoint'), the fields restored without their target
shardings (the GGUF test: on one device as saved, not split over model=2)."""
import json
from pathlib import Path

import jax
import numpy as np
import pytest
from click.testing import CliRunner

from babeleval.cli.main import cli
from babeleval.engine.forward import decoder_logits
from babeleval.loading import load_model
from gguf_writer import random_llama, write_gguf
from real_models import pad
from tiny_models import build


def test_save_restore_is_exact(tmp_path):
    build("gemma2", tmp_path / "hf")
    model = load_model(str(tmp_path / "hf"))
    model.save(tmp_path / "ckpt")
    restored = load_model(str(tmp_path / "ckpt"))
    assert restored.config == model.config
    for a, b in zip(jax.tree_util.tree_leaves(model.params), jax.tree_util.tree_leaves(restored.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_checkpoint_saved_per_layer_is_stacked_at_restore(tmp_path):
    """A checkpoint saved before the layer stack was scanned (one layers_<i> subtree per layer),
    or in other groups (the last layer apart; Gemma 2 and 3 scanned 2 and 6 layers per step
    before sliding layers became a flag: the same top-level names), restores into this
    version's groups, equal to the model; a layout neither is refused in one line."""
    import shutil

    import orbax.checkpoint as ocp

    from babeleval.errors import BabelevalError
    from babeleval.loading.checkpoint import MANIFEST
    from babeleval.models.decoder import decoder_groups
    from babeleval.models.stack import Group, per_layer, stacked

    build("llama", tmp_path / "hf", num_hidden_layers=4)
    model = load_model(str(tmp_path / "hf"))
    folder = model.save(tmp_path / "ckpt")
    (folder / MANIFEST).unlink()
    groups = decoder_groups(model.config)
    assert groups == (Group(0, 1, 4),)
    layers = per_layer(model.params, groups)
    peeled = stacked(layers, (Group(0, 1, 3), Group(3, 1, 1)))  # the last layer apart, as saved until 2026-12-07
    period = stacked(layers, (Group(0, 2, 2),))  # scan_0/layer_0..1 [2, ...]: the same top-level names
    assert set(period) == set(model.params)
    odd = {"embed": model.params["embed"]}
    for layout, name in ((layers, "old"), (peeled, "peeled"), (period, "period"), (odd, "odd")):
        shutil.rmtree(folder / "params")
        checkpointer = ocp.StandardCheckpointer()
        checkpointer.save(folder / "params", layout)
        checkpointer.wait_until_finished()
        if name == "odd":
            with pytest.raises(BabelevalError, match="not this version's layout"):
                load_model(str(folder))
            continue
        restored = load_model(str(folder))
        assert jax.tree.structure(restored.params) == jax.tree.structure(model.params)
        for a, b in zip(jax.tree_util.tree_leaves(model.params), jax.tree_util.tree_leaves(restored.params)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _logits(model, ids):
    return np.asarray(decoder_logits(model.params, ids, np.ones_like(ids), model.config))


def assert_restored_as_held(model, restored, ids):
    """Every leaf the same type, its fields the same dtype, bits and sharding; equal logits and
    quantization summary (what `info` and results.json report); the files about the placed bytes."""
    from babeleval.loading.checkpoint import MANIFEST
    from babeleval.quant import is_quantized

    held = jax.tree.leaves(model.params, is_leaf=is_quantized)
    back = jax.tree.leaves(restored.params, is_leaf=is_quantized)
    assert jax.tree.structure(restored.params) == jax.tree.structure(model.params)
    assert [type(x) for x in back] == [type(x) for x in held] and any(is_quantized(x) for x in held)
    for a, b in zip(jax.tree.leaves(model.params), jax.tree.leaves(restored.params)):
        assert a.dtype == b.dtype and a.sharding == b.sharding
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(_logits(restored, ids), _logits(model, ids))
    assert restored.quantization == model.quantization and restored.quantization["bytes_per_param"] < 1.2
    on_disk = sum(json.loads((Path(restored.source) / MANIFEST).read_text()).values())
    assert on_disk < 1.1 * sum(x.nbytes for x in held) + 2**16  # + orbax metadata; saved dense: 4 bytes a parameter


def test_a_gguf_saved_quantized_restores_as_it_was(tmp_path):
    """A tiny GGUF in Q4_0 whose layer 1 holds attn_v in Q8_0 (the scanned layers 0-1: a QStack),
    saved from one device and restored split over model=2: as the file loads on that mesh; none
    dequantizes it, int8 is refused in one line."""
    from babeleval.errors import BabelevalError
    from babeleval.quant import QStack, is_quantized

    folder = random_llama(tmp_path / "hf", hidden=64, inner=128, heads=4, kv_heads=2, layers=3)
    path = write_gguf(folder, tmp_path / "mixed.gguf", "Q4_0", types={"blk.1.attn_v.weight": "Q8_0"})
    load_model(str(path)).save(tmp_path / "ckpt")
    model = load_model(str(path), mesh="data=1,model=2")
    assert isinstance(model.params["scan_0"]["layer_0"]["attn"]["v"]["kernel"], QStack)
    restored = load_model(str(tmp_path / "ckpt"), mesh="data=1,model=2")
    ids = np.arange(1, 24)[None] * 997 % 49152
    assert_restored_as_held(model, restored, ids)
    assert restored.quantization["method"] == "gguf" and restored.quantization["source"] == str(path)
    dense = load_model(str(tmp_path / "ckpt"), quantize="none")
    assert dense.quantization is None and not any(is_quantized(x) for x in jax.tree.leaves(dense.params, is_leaf=is_quantized))
    want = _logits(model, ids)
    assert np.abs(_logits(dense, ids) - want).max() <= 1e-5 * np.abs(want).max()
    with pytest.raises(BabelevalError, match=r"quantized already \(gguf, from .*mixed.gguf\); --quantize int8"):
        load_model(str(tmp_path / "ckpt"), quantize="int8")


@pytest.mark.parametrize("method", ["int8", "int4"])
def test_a_model_quantized_at_load_restores_as_it_was(tmp_path, method):
    """Its method and source (the HF folder) recorded; asking for the same method keeps it as saved."""
    build("llama", tmp_path / "hf")
    model = load_model(str(tmp_path / "hf"), quantize=method)
    restored = load_model(str(model.save(tmp_path / "ckpt")))
    assert_restored_as_held(model, restored, np.arange(1, 24)[None] * 7 % 128)
    assert restored.quantization["method"] == method and restored.quantization["source"] == str(tmp_path / "hf")
    assert load_model(str(tmp_path / "ckpt"), quantize=method).quantization == model.quantization


@pytest.mark.full
def test_convert_smollm2_restores_identical_logits(tmp_path):
    """Its Q4_1 blocks (and tied Q8_0 embedding) saved as they are: the import's logits exactly."""
    result = CliRunner().invoke(cli, ["convert", "smollm2-135m", str(tmp_path / "smol")])
    assert result.exit_code == 0, result.output
    imported = load_model("smollm2-135m")
    restored = load_model(str(tmp_path / "smol"))
    ids, mask = pad(imported.tokenizer.encode_batch(["Jambo! Habari gani?", "Bonjour"]))
    a = np.asarray(decoder_logits(imported.params, ids, mask, imported.config))
    b = np.asarray(decoder_logits(restored.params, ids, mask, restored.config))
    np.testing.assert_array_equal(a, b)
    assert restored.quantization == imported.quantization
    assert restored.tokenizer.encode("Habari za asubuhi") == imported.tokenizer.encode("Habari za asubuhi")
