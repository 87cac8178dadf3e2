"""Orbax checkpoints: save/restore is exact, convert -> restore gives identical logits
(import vs restore times: bench/load_times.py). A GGUF's quantized blocks are saved dequantized
(for now): the restored model is the file dequantized at load, bit for bit."""
import jax
import numpy as np
import pytest
from click.testing import CliRunner

from babeleval.cli.main import cli
from babeleval.engine.forward import decoder_logits
from babeleval.loading import load_model
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
    """A checkpoint saved before the layer stack was scanned (one layers_<i> subtree per layer)
    restores into the scanned groups, equal to the model; a layout neither is refused in one line."""
    import shutil

    import orbax.checkpoint as ocp

    from babeleval.errors import BabelevalError
    from babeleval.loading.checkpoint import MANIFEST
    from babeleval.models.decoder import decoder_groups
    from babeleval.models.stack import per_layer

    build("llama", tmp_path / "hf")  # 3 layers: 0-1 scanned, 2 apart
    model = load_model(str(tmp_path / "hf"))
    folder = model.save(tmp_path / "ckpt")
    (folder / MANIFEST).unlink()
    groups = decoder_groups(model.config)
    assert any(g.scanned for g in groups)
    for layout, name in ((per_layer(model.params, groups), "old"), ({"embed": model.params["embed"]}, "odd")):
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


@pytest.mark.full
def test_convert_smollm2_restores_identical_logits(tmp_path):
    result = CliRunner().invoke(cli, ["convert", "smollm2-135m", str(tmp_path / "smol")])
    assert result.exit_code == 0, result.output
    imported = load_model("smollm2-135m", quantize="none")
    restored = load_model(str(tmp_path / "smol"))
    ids, mask = pad(imported.tokenizer.encode_batch(["Jambo! Habari gani?", "Bonjour"]))
    a = np.asarray(decoder_logits(imported.params, ids, mask, imported.config))
    b = np.asarray(decoder_logits(restored.params, ids, mask, restored.config))
    np.testing.assert_array_equal(a, b)
    assert restored.tokenizer.encode("Habari za asubuhi") == imported.tokenizer.encode("Habari za asubuhi")
