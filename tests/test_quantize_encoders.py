"""`--quantize int8|int4` beyond decoders: encoder-decoders (T5 with its tied head and relative
bias tables, mT5 with a head of its own, M2M100) and a BERT sentence embedder (its pooler and a
sentence-transformers Dense module after it). Every matmul weight is held quantized and
dequantized inside the jitted forward; bias tables, position embeddings, norms and biases stay
dense; the logits (embeddings) equal the float32 model's on the numpy reference's dequantized
weights, on one device and with a model axis of 2 (quant_reference.py)."""
import json

import jax
import numpy as np
import pytest

from quant_reference import assert_reference_parity, quantized_leaves
from test_seq2seq_parity import batch, flax_logits
from tiny_models import build, build_seq2seq

METHODS = ("int8", "int4")
# every projection's inputs a whole number of int4's 128-input groups (d_model, heads x d_kv, d_ff);
# T5 with 3 encoder layers: its layers after the first scanned on both sides
T5_SHAPE = dict(d_model=128, d_kv=32, d_ff=256, num_layers=3)
SHAPES = {"t5": T5_SHAPE, "mt5": T5_SHAPE, "m2m_100": dict(d_model=128, encoder_ffn_dim=256, decoder_ffn_dim=256)}


def matmul_weights(params) -> set:
    """What quant/at_load.py quantizes: every kernel and the token embedding (a tied head's)."""
    from babeleval.placement.sharding import path_name
    from babeleval.quant import is_quantized

    names = {path_name(p) for p, _ in jax.tree_util.tree_flatten_with_path(params, is_leaf=is_quantized)[0]}
    return {n for n in names if n.endswith("/kernel") or n == "embed/embedding"}


@pytest.fixture(scope="module")
def seq2seq_folder(tmp_path_factory):
    made = {}

    def get(family):
        if family not in made:
            made[family] = tmp_path_factory.mktemp(family)
            build_seq2seq(family, made[family], **SHAPES[family])
        return made[family]

    return get


@pytest.mark.full  # as the decoder's (test_quantize_at_load.py): three loads and compiles a case
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("family", list(SHAPES))
def test_an_encoder_decoder_quantized_at_load(seq2seq_folder, family, method):
    from babeleval.loading import load_model

    folder = seq2seq_folder(family)
    forward = jax.jit(flax_logits, static_argnums=1)
    logits = lambda params, config: forward(params, config, *batch(config))  # noqa: E731
    model, got, f32 = assert_reference_parity(lambda **kw: load_model(str(folder), **kw), logits, method)
    quantized = quantized_leaves(model.params)
    assert set(quantized) == matmul_weights(model.params) and ("lm_head/kernel" in quantized) == (family == "mt5")
    assert not any("relative_bias" in n or "norm" in n for n in quantized)
    assert model.quantization["method"] == method and got.tolist() != f32.tolist()


@pytest.fixture(scope="module")
def embedder_folder(tmp_path_factory):
    """A tiny random BERT as a sentence-transformers folder: CLS pooling, Dense 128 -> 128 (tanh), Normalize."""
    import torch
    from sentence_transformers import SentenceTransformer, models

    bert, folder = tmp_path_factory.mktemp("bert"), tmp_path_factory.mktemp("embedder")
    build("bert", bert, hidden_size=128, intermediate_size=256)
    torch.manual_seed(0)
    modules = [models.Transformer(str(bert)), models.Pooling(128, pooling_mode="cls"),
               models.Dense(128, 128, activation_function=torch.nn.Tanh()), models.Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(folder))
    return folder


@pytest.mark.full
@pytest.mark.parametrize("method", METHODS)
def test_an_embedder_quantized_at_load(embedder_folder, method):
    """BERT's pooler (pooling=pooler) then the Dense module: every weight reaches the embedding."""
    from babeleval.engine.forward import encoder_forward
    from babeleval.loading import load_model

    tokens = np.arange(3, 3 + 2 * 24).reshape(2, 24) * 7 % 128
    valid = np.arange(24)[None] < np.array([[24], [17]])
    embed = lambda params, config: encoder_forward(params, tokens, valid.astype(np.int32), config)[1]  # noqa: E731
    load = lambda **kw: load_model(str(embedder_folder), pooling="pooler", **kw)  # noqa: E731
    model, got, f32 = assert_reference_parity(load, embed, method)
    quantized = quantized_leaves(model.params)
    assert set(quantized) == matmul_weights(model.params) and {"pooler/kernel", "dense_0/kernel"} <= set(quantized)
    assert got.tolist() != f32.tolist()


def test_info_reports_an_embedder_quantized_at_load():
    from click.testing import CliRunner

    from babeleval.cli.main import cli

    result = CliRunner().invoke(cli, ["info", "all-minilm-l6-v2", "--quantize", "int8"])
    assert result.exit_code == 0, result.output
    held = json.loads(result.output)["quantization"]
    assert held["method"] == "int8" and held["weights"]["layers_*/attn/q/kernel"] == {"int8": 6}
    assert held["weights"]["embed/embedding"] == {"int8": 1} and "pos_embed/embedding" not in held["weights"]
