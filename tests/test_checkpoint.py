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
