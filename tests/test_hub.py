"""Hub ids go through huggingface_hub.snapshot_download; tested offline against a local
hub cache laid out exactly as the hub client writes it."""
import shutil

import numpy as np

from babeleval.engine.forward import decoder_logits
from babeleval.loading import load_model
from tiny_models import build


def test_hub_id_resolves_through_the_hf_cache(tmp_path, monkeypatch):
    import huggingface_hub.constants as constants

    build("qwen3", tmp_path / "src")
    snapshot = tmp_path / "hub" / "models--babel--tiny-qwen3" / "snapshots" / ("a" * 40)
    shutil.copytree(tmp_path / "src", snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("a" * 40)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    from_hub, local = load_model("babel/tiny-qwen3"), load_model(str(tmp_path / "src"))
    assert from_hub.source == str(snapshot)
    ids, mask = np.array([[5, 6, 7, 8]]), np.ones((1, 4), int)
    np.testing.assert_array_equal(np.asarray(decoder_logits(from_hub.params, ids, mask, from_hub.config)),
                                  np.asarray(decoder_logits(local.params, ids, mask, local.config)))


def test_unreachable_hub_id_is_a_clear_error(tmp_path, monkeypatch):
    import huggingface_hub.constants as constants
    import pytest

    from babeleval.errors import BabelevalError

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(BabelevalError, match="babel/missing: could not download from the Hugging Face hub"):
        load_model("babel/missing")
