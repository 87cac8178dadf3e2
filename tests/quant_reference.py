"""The numpy reference of `--quantize int8|int4` (quant/at_load.py), written apart from the
implementation, and the parity check every family's at-load test makes with it: a model
quantized at load gives the outputs of its float32 model whose weights are replaced by the
reference's dequantized ones (every weight the quantized model holds as a QArray), on one
device and with a model axis of 2."""
import jax
import numpy as np

from babeleval.placement.sharding import path_name
from babeleval.quant import is_quantized


def reference(w, method):
    """(integer codes [..., rows, inputs], scales [..., rows, blocks]) the formats define (int8:
    one scale per row, absmax / 127; int4: one per 128 inputs, absmax / 7; round half to even; a
    block of zeros, such as an embedding's padding row, codes zeros)."""
    group, top = (w.shape[-1], 127) if method == "int8" else (128, 7)
    blocks = w.reshape(*w.shape[:-1], -1, group)
    scale = (np.abs(blocks).max(axis=-1) / top).astype(np.float32)
    ratio = np.divide(blocks, scale[..., None], out=np.zeros_like(blocks), where=scale[..., None] > 0)
    codes = np.clip(np.round(ratio), -top - 1, top)
    return codes.reshape(w.shape).astype(np.int64), scale


def reference_dequantized(w, method):
    codes, scale = reference(w, method)
    return (codes.reshape(*scale.shape, -1) * scale[..., None]).reshape(w.shape).astype(np.float32)


def quantized_leaves(params) -> dict:
    """path -> QArray, for every quantized weight of a parameter tree."""
    flat = jax.tree_util.tree_flatten_with_path(params, is_leaf=is_quantized)[0]
    return {path_name(p): x for p, x in flat if is_quantized(x)}


def by_reference(params, quantized: dict, method: str):
    """A dense tree with each weight `quantized` names replaced by the reference's dequantized
    form: an embedding by its rows, any other weight [..., in, out] by its output channels."""
    def replaced(path, x):
        name, w = path_name(path), np.asarray(x)
        if name not in quantized:
            return x
        if name.endswith("embedding"):
            return reference_dequantized(w, method)
        return np.swapaxes(reference_dequantized(np.swapaxes(w, -1, -2), method), -1, -2)

    return jax.tree_util.tree_map_with_path(replaced, params)


def assert_reference_parity(load, outputs, method: str):
    """load(**load_model's keywords) -> a LoadedModel; outputs(params, config) -> an array.
    Returns (the quantized model, its outputs, the float32 model's)."""
    dense, model = load(), load(quantize=method)
    quantized = quantized_leaves(model.params)
    want = np.asarray(outputs(by_reference(dense.params, quantized, method), dense.config))
    got = np.asarray(outputs(model.params, model.config))
    assert_close(got, want, "against the reference")
    split = load(quantize=method, mesh="data=1,model=2")
    assert_close(np.asarray(outputs(split.params, split.config)), got, "with a model axis of 2")
    return model, got, np.asarray(outputs(dense.params, dense.config))


def assert_close(got, want, what: str):
    error = np.abs(got - want).max() / np.abs(want).max()
    assert error <= 1e-5, f"{what}: off by {error:.1e} of the largest output"
