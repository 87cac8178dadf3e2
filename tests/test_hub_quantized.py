"""Hub checkpoints with a quantization_config (loading/hub_quantized.py, quant/hub_formats.py)
load kept quantized and give the logits of their dequantized model:
- FP8 block-scaled (transformers' `fp8`) and compressed-tensors (FP8 per channel; int4 groups,
  symmetric and with zero points; int8 per channel), written with torch and compressed-tensors'
  own packer: transformers reads the same folder and dequantizes it on CPU (the reference; not
  for zero points, TRANSFORMERS_READS);
- GPTQ (v1 zeros, act-order too) and AWQ GEMM, written by numpy packers of the published layouts
  here: the reference is a transformers model on the weights the test quantized, (code - zero) x
  scale computed from the integers before packing (no unpacking shared with babeleval).
A tiny llama, 256 wide (two 128 x 128 FP8 blocks per row), 2 layers."""
import json
import re

import ml_dtypes
import numpy as np
import pytest

from tiny_models import build

torch = pytest.importorskip("torch")

LINEAR = re.compile(r"^model\.layers\.\d+\.(self_attn|mlp|mlp\.experts\.\d+)\.\w+_proj\.weight$")
SHAPE = dict(hidden_size=256, intermediate_size=384, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             head_dim=64, initializer_range=0.1)
IDS = np.arange(1, 40)[None] * 7 % 128


def saved(family: str, folder, **shape):
    """(folder, torch model, the tensors as the folder stores them: experts one by one)."""
    from safetensors.numpy import load_file

    model = build(family, folder, **shape)
    return folder, model, {k: v.astype(np.float32) for k, v in load_file(str(folder / "model.safetensors")).items()}


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    return saved("llama", tmp_path_factory.mktemp("dense"), **SHAPE)


# --- writers: {name: numpy weight} -> ({stored name: array}, reference weight) per linear weight

def fp8_blocks(w):
    rows, cols = w.shape
    scale = np.abs(w.reshape(rows // 128, 128, cols // 128, 128)).max(axis=(1, 3)) / 448
    per = np.repeat(np.repeat(scale, 128, 0), 128, 1)
    q = (w / per).astype(ml_dtypes.float8_e4m3fn)
    return {"weight": q, "weight_scale_inv": scale.astype(np.float32)}, q.astype(np.float32) * per


def fp8_channels(w):
    scale = np.abs(w).max(axis=1, keepdims=True) / 448
    q = (w / scale).astype(ml_dtypes.float8_e4m3fn)
    return {"weight": q, "weight_scale": scale.astype(np.float32)}, q.astype(np.float32) * scale


def int_groups(w, bits: int, group: int, symmetric: bool):
    """Signed codes per group of inputs: symmetric absmax, or min-max with an integer zero point."""
    top = (1 << (bits - 1)) - 1
    blocks = w.reshape(w.shape[0], -1, group)
    if symmetric:
        scale, zero = np.abs(blocks).max(-1) / top, np.zeros(blocks.shape[:2], np.int64)
    else:
        lo, hi = blocks.min(-1), blocks.max(-1)
        scale = (hi - lo) / (2 * top + 1)
        zero = np.clip(np.round(-lo / scale) - top - 1, -top - 1, top).astype(np.int64)
    q = np.clip(np.round(blocks / scale[..., None]) + zero[..., None], -top - 1, top).astype(np.int64)
    ref = ((q - zero[..., None]) * scale[..., None].astype(np.float32)).astype(np.float32)
    return q.reshape(w.shape), scale.astype(np.float32), zero, ref.reshape(w.shape)


def compressed_int4(w, symmetric: bool):
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32

    q, scale, zero, ref = int_groups(w, 4, 64, symmetric)
    out = {"weight_packed": pack_to_int32(torch.from_numpy(q.astype(np.int8)), 4), "weight_scale": scale,
           "weight_shape": np.array(w.shape, np.int64)}
    if not symmetric:
        from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32

        packed = pack_to_int32(torch.from_numpy(zero.astype(np.int8)), 4, packed_dim=0)
        assert np.array_equal(unpack_from_int32(packed, 4, zero.shape, packed_dim=0).numpy(), zero)  # the package's reading
        out["weight_zero_point"] = packed
    return out, ref


def compressed_int8(w):
    q, scale, _, ref = int_groups(w, 8, w.shape[1], True)
    return {"weight": q.astype(np.int8), "weight_scale": scale}, ref


def words(codes, bits: int, axis: int):
    """Unsigned codes packed into int32 words along `axis`, element i at bits i * bits (GPTQ's packer)."""
    codes = np.moveaxis(codes.astype(np.uint32), axis, -1)
    per = 32 // bits
    grouped = codes.reshape(*codes.shape[:-1], -1, per)
    packed = np.zeros(grouped.shape[:-1], np.uint32)
    for i in range(per):
        packed |= grouped[..., i] << np.uint32(bits * i)
    return np.moveaxis(packed.view(np.int32), -1, axis)


def gptq(w, act_order: bool = False):
    """GPTQ v1, 4 bits, groups of 64 inputs, asymmetric; act-order: groups by a permutation."""
    rows, cols = w.shape
    perm = np.random.default_rng(1).permutation(cols) if act_order else np.arange(cols)
    q, scale, zero, ref = int_groups(w[:, perm], 4, 64, False)  # groups of the permuted inputs
    codes, zeros = q + 8, np.maximum(zero + 8, 1)  # v1 cannot store a zero point of 0
    g_idx = np.empty(cols, np.int32)
    g_idx[perm] = np.arange(cols) // 64
    inverse = np.argsort(perm)
    out = {"qweight": words(codes[:, inverse].T, 4, 0), "qzeros": words(zeros.T - 1, 4, 1),
           "scales": scale.T.astype(np.float16), "g_idx": g_idx}
    half = np.repeat(scale.astype(np.float16).astype(np.float32), 64, 1)  # stored as float16
    ref = ((q + 8 - np.repeat(zeros, 64, 1)) * half).astype(np.float32)
    return out, ref[:, inverse]


def awq(w):
    """AWQ GEMM, 4 bits, groups of 64 inputs: [in, out] words, nibbles in the order 0 2 4 6 1 3 5 7."""
    q, scale, zero, _ = int_groups(w, 4, 64, False)
    codes, zeros = (q + 8).T, (zero + 8).T  # [in, out], [groups, out]
    order = [0, 2, 4, 6, 1, 3, 5, 7]

    def packed(x):
        x = x.reshape(x.shape[0], -1, 8)[..., order]
        return words(x.reshape(x.shape[0], -1), 4, 1)

    half = scale.astype(np.float16)
    ref = ((q - zero.repeat(64, 1)) * half.astype(np.float32).repeat(64, 1)).astype(np.float32)
    return {"qweight": packed(codes), "qzeros": packed(zeros), "scales": half.T}, ref


def ct_config(fmt: str, weights: dict) -> dict:
    return {"quant_method": "compressed-tensors", "format": fmt, "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": None}},
            "ignore": ["lm_head"]}


FORMATS = {
    "fp8-blocks": (fp8_blocks, {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                "weight_block_size": [128, 128]}, "fp8_e4m3", 8.25),
    "ct-fp8-channel": (fp8_channels, ct_config("float-quantized", {"num_bits": 8, "type": "float", "symmetric": True,
                                                                   "strategy": "channel"}), "fp8_e4m3", 8.0),
    "ct-int4-sym": (lambda w: compressed_int4(w, True), ct_config("pack-quantized", {
        "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 64}), "uint4", 4.625),
    "ct-int4-zero": (lambda w: compressed_int4(w, False), ct_config("pack-quantized", {
        "num_bits": 4, "type": "int", "symmetric": False, "strategy": "group", "group_size": 64}), "uint4", 4.625),
    "ct-int8-channel": (compressed_int8, ct_config("int-quantized", {"num_bits": 8, "type": "int", "symmetric": True,
                                                                     "strategy": "channel"}), "uint8", 8.0),
    "gptq": (gptq, {"quant_method": "gptq", "bits": 4, "group_size": 64, "desc_act": False, "sym": False,
                    "checkpoint_format": "gptq"}, "uint4", 4.625),
    "awq": (awq, {"quant_method": "awq", "bits": 4, "group_size": 64, "version": "gemm", "zero_point": True},
            "uint4", 4.625),
    "gptq-act-order": (lambda w: gptq(w, True), {"quant_method": "gptq", "bits": 4, "group_size": 64,
                                                 "desc_act": True, "sym": False}, "uint4", 4.8),  # + ORDER
}
# transformers 5.24 with compressed-tensors 0.20 re-initialises the packed zero points of an
# asymmetric pack-quantized folder ("size mismatch": it expects them unpacked), and an
# int-quantized folder's int8 weights do not load on CPU (a [2, 128] weight for a [256, 256]
# one, or logits 8.7 off), so those references are the weights quantized here (the zero points
# read back by the package's own unpacker)
TRANSFORMERS_READS = ("fp8-blocks", "ct-fp8-channel", "ct-int4-sym")


def write(dense, folder, name):
    """The dense folder's model with every layer's linear weights stored in format `name`;
    returns the reference state dict (the weights it stands for)."""
    from safetensors.torch import save_file

    source, _, state = dense
    encode, quantization, _, _ = FORMATS[name]
    stored, reference = {}, {}
    for key, w in state.items():
        if not LINEAR.match(key):
            stored[key], reference[key] = w, w
            continue
        parts, reference[key] = encode(w)
        stored.update({f"{key[:-len('weight')]}{part}": value for part, value in parts.items()})
    tensors = {k: v if isinstance(v, torch.Tensor) else _torch(np.ascontiguousarray(v)) for k, v in stored.items()}
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "model.safetensors"))
    config = json.loads((source / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "quantization_config": quantization}))
    (folder / "tokenizer.json").write_text((source / "tokenizer.json").read_text())
    return reference


def _torch(x):
    if x.dtype.name == "float8_e4m3fn":
        return torch.from_numpy(x.view(np.uint8)).view(torch.float8_e4m3fn)
    return torch.from_numpy(x)


def babeleval_logits(folder, **kw):
    from babeleval.engine.forward import decoder_logits
    from babeleval.loading import load_model

    model = load_model(str(folder), **kw)
    return model, np.asarray(decoder_logits(model.params, IDS, np.ones_like(IDS), model.config))


def reference_logits(dense, folder, name, reference):
    from transformers import AutoModelForCausalLM

    if name in TRANSFORMERS_READS:  # transformers dequantizes the folder itself
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32, attn_implementation="eager")
    else:
        model = dense[1]
        model.load_state_dict({k: torch.from_numpy(v) for k, v in reference.items()})
    with torch.no_grad():
        return model.eval()(torch.from_numpy(IDS)).logits.float().numpy()


DEFAULT_TIER = ("fp8-blocks", "ct-int4-sym", "gptq", "awq")  # one of each reader; the rest in the full tier


@pytest.mark.parametrize("name", [n if n in DEFAULT_TIER else pytest.param(n, marks=pytest.mark.full) for n in FORMATS])
def test_a_hub_quantized_folder_gives_its_dequantized_logits(dense, tmp_path, name):
    from babeleval.quant import ORDER, QArray

    reference = write(dense, tmp_path / name, name)
    want = reference_logits(dense, tmp_path / name, name, reference)
    model, got = babeleval_logits(tmp_path / name)
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 2e-5 * scale, (np.abs(got - want).max(), scale)
    layout, bits = FORMATS[name][2], FORMATS[name][3]
    held = [x for x in __import__("jax").tree_util.tree_leaves(model.params, is_leaf=lambda x: isinstance(x, QArray))
            if isinstance(x, QArray)]
    assert {x.layout for x in held} == {layout}
    assert all((ORDER in x.fields) == name.endswith("act-order") for x in held)
    assert all(abs(x.bits - bits) < 0.2 for x in held), [x.bits for x in held]  # packed codes placed, not float32
    summary = model.quantization
    assert summary["method"] == FORMATS[name][1]["quant_method"]
    assert summary["types"][layout]["tensors"] == 2 * 7  # q k v o gate up down of both layers
    _, dense_logits = babeleval_logits(tmp_path / name, quantize="none")  # dequantized at load: the same model
    assert np.abs(dense_logits - got).max() <= 1e-5 * scale


def test_gptq_act_order_is_held_sorted_by_group():
    """An act-order module's codes are held with the inputs sorted by group, each group one run of
    64 (a row's scales and zero points as GPTQ stores them), and dequantize to the numpy
    unpacking's weight bit for bit; groups that are not equal runs once sorted are refused (the
    loader dequantizes them whole)."""
    from jax.sharding import PartitionSpec as P

    from babeleval.placement.sharding import quantized_spec
    from babeleval.quant import ORDER, QArray
    from babeleval.quant.hub_formats import gptq as read_gptq, gptq_act_order

    w = np.random.default_rng(3).normal(0, 1, (96, 256)).astype(np.float32)
    parts, want = gptq(w, act_order=True)
    q = read_gptq(parts["qweight"], parts["qzeros"], parts["scales"], 4, 64, True, parts["g_idx"])
    assert q.layout == "uint4" and q.fields["qs"].shape == (96, 4, 32) and q.fields[ORDER].shape == (256,)
    assert np.array_equal(np.asarray(q.dequantize(np.float32, np)), want)
    assert np.array_equal(np.asarray(q.dequantize()), want)  # inside jit's ops as well
    restored = QArray(dict(sorted(q.fields.items())), q.layout, q.shape)  # ORDER first, as a restore may list it
    assert restored.blocks == 4 and restored.rows(slice(0, 48)).stored_shape == (48, 256)
    assert quantized_spec(P(None, "model"), restored, 2).fields[ORDER] == P(None)  # whole along the inputs
    uneven = parts["g_idx"].copy()
    uneven[uneven == 0] = 1  # group 1 now holds 128 inputs, group 0 none
    assert read_gptq(parts["qweight"], parts["qzeros"], parts["scales"], 4, 64, True, uneven) is None
    assert gptq_act_order(parts["qweight"], parts["qzeros"], parts["scales"], uneven, 4, True).shape == (96, 256)


@pytest.mark.full
def test_an_act_order_folder_split_over_the_model_axis_and_saved(dense, tmp_path):
    """The act-order GPTQ folder on model=2 (its ORDER whole, the codes split as the dense weight)
    gives the one-device logits, and an orbax checkpoint restores its ORDER as loaded."""
    from babeleval.engine.forward import decoder_logits
    from babeleval.loading import load_model
    from babeleval.quant import ORDER

    write(dense, tmp_path / "gptq", "gptq-act-order")
    one, want = babeleval_logits(tmp_path / "gptq")
    split = load_model(str(tmp_path / "gptq"), mesh="data=1,model=2")
    got = np.asarray(decoder_logits(split.params, IDS, np.ones_like(IDS), split.config))
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    restored = load_model(str(one.save(tmp_path / "ckpt")))
    down = restored.params["scan_0"]["layer_0"]["mlp"]["down"]["kernel"]
    assert np.array_equal(np.asarray(down.fields[ORDER]),
                          np.asarray(one.params["scan_0"]["layer_0"]["mlp"]["down"]["kernel"].fields[ORDER]))
    again = np.asarray(decoder_logits(restored.params, IDS, np.ones_like(IDS), restored.config))
    assert np.array_equal(again, want)


def test_fp8_blocks_at_an_edge_and_per_tensor():
    """A 128 x 128 block's scale covers the partial blocks at the edges (DeepSeek's layout: a
    [ceil(rows / 128), ceil(cols / 128)] grid); one scale per tensor covers everything."""
    from babeleval.quant.hub_formats import fp8

    rng = np.random.default_rng(0)
    w = rng.normal(0, 1, (200, 320)).astype(ml_dtypes.float8_e4m3fn)
    grid = rng.uniform(0.5, 2, (2, 3)).astype(np.float32)
    per = np.repeat(np.repeat(grid, 128, 0)[:200], 128, 1)[:, :320]
    q = fp8(w, grid, (128, 128))
    assert np.array_equal(np.asarray(q.dequantize(np.float32, np)), w.astype(np.float32) * per)
    assert q.fields["qs"].shape == (200, 5, 64)  # runs of gcd(320, 128) = 64 inputs
    assert np.array_equal(np.asarray(fp8(w, np.float32(3), (200, 320)).dequantize()), w.astype(np.float32) * 3)
    with pytest.raises(ValueError, match=r"expected \[2, 3\]"):
        fp8(w, grid[:, :2], (128, 128))


@pytest.mark.parametrize("config, said", [
    ({"quant_method": "hqq"}, "method 'hqq' is not read"),
    ({"quant_method": "gptq", "bits": 3, "group_size": 128}, "3-bit weights"),
    ({"quant_method": "awq", "bits": 4, "version": "gemv"}, "version 'gemv'"),
    (ct_config("marlin-24", {"num_bits": 4, "type": "int"}), "format 'marlin-24'"),
])
def test_a_scheme_babeleval_does_not_read_is_one_line(config, said):
    from babeleval.errors import BabelevalError
    from babeleval.loading.hub_quantized import hub_scheme

    with pytest.raises(BabelevalError, match=said):
        hub_scheme({"quantization_config": config}, "config.json")


def test_a_gptq_folder_saves_and_restores_quantized(dense, tmp_path):
    """A babeleval checkpoint of a GPTQ import holds its codes, zero points and scales as they
    are (loading/quantized_checkpoint.py) and records the method and source."""
    from babeleval.engine.forward import decoder_logits
    from babeleval.loading import load_model

    write(dense, tmp_path / "gptq", "gptq")
    model, got = babeleval_logits(tmp_path / "gptq")
    model.save(tmp_path / "ckpt")
    restored = load_model(str(tmp_path / "ckpt"))
    again = np.asarray(decoder_logits(restored.params, IDS, np.ones_like(IDS), restored.config))
    assert np.array_equal(again, got)
    assert restored.quantization == model.quantization and restored.quantization["method"] == "gptq"


def test_an_fp8_mixture_of_experts(tmp_path):
    """Qwen3-MoE-FP8's layout: every expert's projections FP8 one by one, stacked per layer into
    one QArray of experts; the router dense. transformers reads the folder (its own expert fusing)."""
    from babeleval.quant import QArray

    dense = saved("qwen3_moe", tmp_path / "dense", hidden_size=256, head_dim=64, moe_intermediate_size=128,
                  num_hidden_layers=2, initializer_range=0.1)
    write(dense, tmp_path / "fp8", "fp8-blocks")
    want = reference_logits(dense, tmp_path / "fp8", "fp8-blocks", None)
    model, got = babeleval_logits(tmp_path / "fp8")
    assert np.abs(got - want).max() <= 2e-5 * np.abs(want).max()
    experts = [x for x in __import__("jax").tree_util.tree_leaves(model.params, is_leaf=lambda x: isinstance(x, QArray))
               if isinstance(x, QArray) and x.ndim == 4]  # [layers, experts, in, out]: both layers in one stack
    assert len(experts) == 3 and all(x.layout == "fp8_e4m3" and x.shape[:2] == (2, 8) for x in experts)
