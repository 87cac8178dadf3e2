"""`--quantize int8|int4` (quant/at_load.py): a dense weight quantized at load, symmetric, into
the QArray GGUF blocks use. Codes and scales equal a numpy reference (quant_reference.py; int8: one
scale per output channel, absmax / 127; int4: one per 128 inputs, absmax / 7; round half to even); a
tiny llama's logits equal those of its float32 model on the reference's dequantized weights (and
stay near its float32 logits), what is placed is the codes (bits per parameter asserted), and a
model axis of 2 gives the 1-device logits (encoder-decoders and encoders:
test_quantize_encoders.py)."""
import numpy as np
import pytest

from gguf_writer import random_llama, write_gguf
from quant_reference import assert_reference_parity, quantized_leaves, reference, reference_dequantized


def unpacked(q, method):
    """Our packed codes read back: int8 bytes as signed; int4 bytes j of a 128-input block hold
    inputs j (low nibble) and 64 + j (high nibble), stored + 8."""
    qs = np.asarray(q.fields["qs"])
    if method == "int8":
        return qs.view(np.int8).reshape(qs.shape[0], -1).astype(np.int64)
    low, high = (qs & 0xF).astype(np.int64) - 8, (qs >> 4).astype(np.int64) - 8
    return np.concatenate([low, high], axis=-1).reshape(qs.shape[0], -1)


@pytest.mark.parametrize("method", ["int8", "int4"])
def test_codes_and_scales_equal_the_numpy_reference(method):
    from babeleval.quant.at_load import quantize, quantize_leaf

    w = np.random.default_rng(0).normal(0, 0.05, (48, 384)).astype(np.float32)
    q = quantize(w, method)
    codes, scale = reference(w, method)
    assert np.array_equal(unpacked(q, method), codes)
    assert np.array_equal(np.asarray(q.fields["scale"]), scale)
    assert np.array_equal(np.asarray(q.dequantize(np.float32, np)), reference_dequantized(w, method))
    assert np.abs(np.asarray(q.dequantize(np.float32, np)) - w).max() <= scale.max() / 2 + 1e-7
    kernel = quantize_leaf("layers_0/mlp/down/kernel", w.T, method)  # a flax kernel [in, out]: rows are its columns
    assert kernel.shape == (384, 48) and kernel.transposed and np.array_equal(unpacked(kernel.swap(), method), codes)
    router = w.T
    assert quantize_leaf("layers_0/mlp/router/kernel", router, method) is router  # the router stays exact


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    folder = random_llama(tmp_path_factory.mktemp("llama"), hidden=256, inner=384, heads=4, kv_heads=2, layers=2)
    return write_gguf(folder, folder / "f32.gguf")


@pytest.mark.full
@pytest.mark.parametrize("method, bits", [("int8", 8 + 32 / 320), ("int4", 4.25)])
def test_a_tiny_model_quantized_at_load(tiny_gguf, method, bits):
    """Its logits equal the float32 model run on the reference's dequantized weights, stay near
    the float32 model's, and a model axis of 2 gives them too."""
    from babeleval.engine.forward import decoder_logits
    from babeleval.loading import load_model

    ids = np.arange(1, 40)[None] * 997 % 49152
    logits = lambda params, cfg: decoder_logits(params, ids, np.ones_like(ids), cfg)  # noqa: E731
    model, got, f32 = assert_reference_parity(lambda **kw: load_model(str(tiny_gguf), **kw), logits, method)
    quantized = quantized_leaves(model.params)
    assert len(quantized) == 7 + 2  # every kernel (both layers in one stack), the embedding and the head
    assert all(x.shape[0] == 2 for k, x in quantized.items() if k.startswith("scan_0/"))
    placed = 8 * sum(x.nbytes for x in quantized.values()) / sum(x.size for x in quantized.values())
    assert model.quantization["method"] == method and placed < bits + 0.2
    correlation = np.corrcoef(got.ravel(), f32.ravel())[0, 1]  # quantization noise, amplified by random layers
    assert got.tolist() != f32.tolist() and correlation > (0.999 if method == "int8" else 0.9), correlation


@pytest.mark.full
def test_info_reports_the_quantization_at_load(tiny_gguf):
    import json

    from click.testing import CliRunner

    from babeleval.cli.main import cli

    result = CliRunner().invoke(cli, ["info", str(tiny_gguf), "--quantize", "int4"])
    assert result.exit_code == 0, result.output
    held = json.loads(result.output)["quantization"]
    assert held["method"] == "int4" and held["types"]["int4"]["block_size"] == 128 and held["types"]["int4"]["bits"] == 4.25
    assert held["weights"]["layers_*/mlp/down/kernel"] == {"int4": 2} and "layers_*/attn_norm/scale" not in held["weights"]
