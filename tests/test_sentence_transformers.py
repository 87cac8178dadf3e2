"""A sentence-transformers folder's whole pipeline, as sentence-transformers applies it: a
LaBSE-shaped pipeline (CLS pooling, a Dense projection with tanh, L2 normalisation; here over
the real all-MiniLM-L6-v2 transformer, the Dense 384 -> 256 random) and all-MiniLM's own (mean
pooling, normalisation) give sentence-transformers' embeddings of real multilingual text."""
import numpy as np
import pytest

TEXTS = ["Kila mtu ana haki ya kuishi, uhuru na usalama wa nafsi yake.", "Everyone has the right to life.",
         "Tout individu a droit à la vie, à la liberté et à la sûreté de sa personne.", "Habari"]


@pytest.fixture(scope="module")
def labse_like(tmp_path_factory):
    import torch
    from sentence_transformers import SentenceTransformer, models

    from babeleval.loading import resolve

    folder = tmp_path_factory.mktemp("labse-like")
    torch.manual_seed(0)
    modules = [models.Transformer(str(resolve("all-minilm-l6-v2"))), models.Pooling(384, pooling_mode="cls"),
               models.Dense(384, 256, activation_function=torch.nn.Tanh()), models.Normalize()]
    model = SentenceTransformer(modules=modules, device="cpu")
    model.save(str(folder))
    return folder, model


def embeddings(folder) -> np.ndarray:
    from babeleval.engine.embed import Embedder
    from babeleval.loading import load_model
    from babeleval.requests import Embed

    return Embedder(load_model(str(folder))).embed([Embed(t) for t in TEXTS])


def test_cls_dense_tanh_normalize_equal_sentence_transformers(labse_like):
    from babeleval.loading import load_model

    folder, model = labse_like
    config = load_model(str(folder)).config
    assert (config.pooling, config.dense, config.normalize) == ("cls", ((384, 256, True, "tanh"),), True)
    want = model.encode(TEXTS, convert_to_numpy=True)
    got = embeddings(folder)
    assert got.shape == (len(TEXTS), 256)
    assert np.abs(got - want).max() <= 1e-5


@pytest.mark.full
def test_minilm_mean_normalize_equal_sentence_transformers():
    from sentence_transformers import SentenceTransformer

    from babeleval.loading import resolve

    folder = resolve("all-minilm-l6-v2")
    want = SentenceTransformer(str(folder), device="cpu").encode(TEXTS, convert_to_numpy=True)
    assert np.abs(embeddings(folder) - want).max() <= 1e-5


def test_an_unsupported_module_setting_names_its_file(labse_like, tmp_path):
    import json
    import shutil

    from babeleval.errors import BabelevalError
    from babeleval.loading import load_model

    folder, _ = labse_like
    shutil.copytree(folder, tmp_path / "m")
    config = tmp_path / "m" / "2_Dense" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "activation_function": "torch.nn.modules.activation.ReLU"}))
    with pytest.raises(BabelevalError, match=r"2_Dense/config.json: activation_function 'torch.nn.modules.activation.ReLU'"):
        load_model(str(tmp_path / "m"))
