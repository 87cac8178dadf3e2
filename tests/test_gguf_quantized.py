"""GGUF blocks kept quantized (quant/): a tiny llama written in llama.cpp's layout with each block
type (tests/gguf_writer.py: gguf's own quantizer for Q4_0-Q8_0, random blocks with float16 scales
for the K-quants; its Q/K rows permuted for interleaved rotary) gives, held as QArrays and
dequantized inside the forward, the logits of the same file dequantized to float32 at load by
gguf's own dequantizers (load_model(quantize="none")); what
is placed is the file's blocks (bytes per parameter asserted), on one device and split over a
model axis of 2. The default tier runs Q4_K (SmolLM2's Q4_1 with its tied Q8_0 embedding runs
quantized against transformers' golden log-probs in test_golden); the full tier every type, a tied
embedding and a mixture of experts (stacked experts). Run once against broken code (2026-12-07):
Q4_K's nibbles read high first gave a max |logit difference| of 1.61 (allowed 0.0018), its scale
read from the minimum's offset 29.3; test_quant_blocks fails on both too."""
import numpy as np
import pytest

from gguf_writer import random_llama, write_gguf

SHAPE = dict(hidden=256, inner=256, heads=4, kv_heads=2, layers=2)  # rows of 256: whole K-quant super-blocks
BITS = {"Q4_0": 4.5, "Q4_1": 5.0, "Q5_0": 5.5, "Q5_1": 6.0, "Q8_0": 8.5, "Q2_K": 2.625, "Q3_K": 3.4375,
        "Q4_K": 4.5, "Q5_K": 5.5, "Q6_K": 6.5625}  # llama.cpp's bits per weight of each type
DEFAULT = ("Q4_K",)  # SmolLM2 (Q4_1, a tied Q8_0 embedding) runs quantized in test_golden


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Each random folder written when a test first asks for it (the default tier needs one)."""
    options = {"llama": {}, "tied": dict(tied=True), "mixtral": dict(experts=4)}

    class Folders(dict):
        def __missing__(self, name):
            self[name] = random_llama(tmp_path_factory.mktemp(name), **SHAPE, **options[name])
            return self[name]

    return Folders()


def _logits(model, ids):
    from babeleval.engine.forward import decoder_logits

    return np.asarray(decoder_logits(model.params, ids, np.ones_like(ids), model.config))


def check(folder, qtype, tmp_path, mesh=None):
    import jax

    from babeleval.loading import load_model
    from babeleval.quant import is_quantized

    path = write_gguf(folder, tmp_path / f"{qtype}.gguf", qtype)
    quantized = load_model(str(path), mesh=mesh)
    dense = load_model(str(path), quantize="none")
    leaves = jax.tree.leaves(quantized.params, is_leaf=is_quantized)
    matrices = [x for x in leaves if is_quantized(x)]
    assert matrices and all(x.layout == qtype for x in matrices)
    assert not any(is_quantized(x) for x in jax.tree.leaves(dense.params, is_leaf=is_quantized))
    # the placed fields are the file's blocks: bits per weight as llama.cpp counts them (+ the sub-scales
    # of K-quants unpacked to a byte each: 4 bits / 16 weights for Q2_K/Q3_K, 1/4 bit for Q4_K/Q5_K; Q6_K's are bytes)
    unpacked = {"Q2_K": 0.5, "Q3_K": 0.125, "Q4_K": 0.125, "Q5_K": 0.125}.get(qtype, 0.0)
    placed_bits = 8 * sum(x.nbytes for x in matrices) / sum(x.size for x in matrices)
    assert placed_bits == pytest.approx(BITS[qtype] + unpacked)
    held = quantized.quantization  # what `babeleval info` and results.json report
    assert held["types"][qtype]["bits"] == pytest.approx(placed_bits, abs=1e-3) and held["weights"][
        "layers_*/attn/q/kernel"] == {qtype: 2} and dense.quantization is None
    assert all(isinstance(f, jax.Array) and f.dtype in (np.uint8, np.int8, np.float16)
               for x in matrices for f in x.fields.values())
    tok = quantized.tokenizer
    ids = np.asarray([tok.with_prefix(tok.encode("Kila mtu ana haki ya kuishi, uhuru na usalama wa nafsi yake."))])
    got, want = _logits(quantized, ids), _logits(dense, ids)
    assert np.isfinite(want).all() and np.abs(want).max() > 0.1
    assert np.abs(got - want).max() <= 1e-4 * max(1.0, np.abs(want).max())
    return quantized, got


@pytest.mark.parametrize("qtype", [pytest.param(t, marks=() if t in DEFAULT else pytest.mark.full) for t in BITS])
def test_quantized_logits_equal_the_dequantized_model(folders, qtype, tmp_path):
    check(folders["llama"], qtype, tmp_path)


@pytest.mark.full
def test_quantized_tied_embedding(folders, tmp_path):
    """The embedding looked up row by row and, tied, dequantized whole for the head."""
    check(folders["tied"], "Q8_0", tmp_path)


@pytest.mark.full
def test_quantized_stacked_experts_and_a_model_axis(folders, tmp_path):
    import jax

    from babeleval.placement.sharding import bytes_per_device

    _, one = check(folders["mixtral"], "Q4_K", tmp_path)
    split, got = check(folders["mixtral"], "Q4_K", tmp_path, mesh="data=1,model=2")
    assert np.abs(got - one).max() <= 1e-4 * max(1.0, np.abs(one).max())
    per_device = bytes_per_device(split.params)
    assert len(per_device) == 2 and max(per_device.values()) < 0.6 * sum(x.nbytes for x in jax.tree.leaves(split.params))


@pytest.mark.full
def test_other_block_types_are_dequantized_at_load_with_one_line(folders, tmp_path, caplog):
    """A type outside the kept table (TQ2_0, as IQ* would be) loads as float32 and says so once."""
    import jax

    from babeleval.loading import load_model
    from babeleval.quant import is_quantized

    path = write_gguf(folders["llama"], tmp_path / "TQ2_0.gguf", "TQ2_0")
    with caplog.at_level("WARNING", logger="babeleval"):
        model = load_model(str(path))
    lines = [r.getMessage() for r in caplog.records if "dequantized to float32 at load" in r.getMessage()]
    assert len(lines) == 1 and "TQ2_0 tensors" in lines[0]
    assert not any(is_quantized(x) for x in jax.tree.leaves(model.params, is_leaf=is_quantized))


def test_layers_of_two_block_types_are_held_once_as_stored(tmp_path):
    """A Q4_K_M-like file (attn_v, ffn_down and here attn_k Q6_K in some layers, Q4_K in the rest): the scanned
    stacks that mix them are QStacks holding each layer's stored row bytes once (padded to Q6_K's
    210 bytes per 256 weights, not a full-length stack per type), whose logits equal the file
    dequantized at load, the summary counting each layer's type. Run once against the QStack of
    full-length parts (2026-12-07): attn_v held 91,656 bytes (a full-length Q4_K
    stack, its sub-scales unpacked, and a Q6_K one) where 53,768 are asserted."""
    import jax

    from babeleval.loading import load_model
    from babeleval.quant import QStack, is_quantized

    folder = random_llama(tmp_path / "hf", **dict(SHAPE, layers=3))
    path = write_gguf(folder, tmp_path / "mixed.gguf", "Q4_K",
                      types={"blk.1.attn_v.weight": "Q6_K", "blk.0.ffn_down.weight": "Q6_K",
                             "blk.1.attn_k.weight": "Q6_K"})  # K: its rows unpermuted as read
    quantized, dense = load_model(str(path)), load_model(str(path), quantize="none")
    group = quantized.params["scan_0"]["layer_0"]
    stacks = [group["attn"]["v"]["kernel"], group["mlp"]["down"]["kernel"], group["attn"]["k"]["kernel"]]
    assert all(isinstance(s, QStack) and s.layout == "Q4_K+Q6_K" for s in stacks)
    for s in stacks:  # each layer's rows at Q6_K's width, and `which`
        assert s.nbytes == s.size // 256 * 210 + 4 * s.shape[0]
    matrices = [x for x in jax.tree.leaves(quantized.params, is_leaf=is_quantized) if is_quantized(x)]
    assert not any(isinstance(x, QStack) for x in matrices if x not in stacks)
    weights = quantized.quantization["weights"]
    assert weights["layers_*/attn/v/kernel"] == {"Q4_K": 2, "Q6_K": 1}
    assert weights["layers_*/mlp/down/kernel"] == {"Q6_K": 1, "Q4_K": 2}
    assert weights["layers_*/attn/k/kernel"] == {"Q4_K": 2, "Q6_K": 1}
    assert weights["layers_*/attn/q/kernel"] == {"Q4_K": 3}
    tok = quantized.tokenizer
    ids = np.asarray([tok.with_prefix(tok.encode("Kila mtu ana haki ya kuishi, uhuru na usalama wa nafsi yake."))])
    got, want = _logits(quantized, ids), _logits(dense, ids)
    assert np.isfinite(want).all() and np.abs(want).max() > 0.1
    assert np.abs(got - want).max() <= 1e-4 * max(1.0, np.abs(want).max())


@pytest.mark.parametrize("qtype", list(BITS))
def test_row_bytes_split_inside_jit_dequantize_as_gguf_does(qtype):
    """A QStack's layer is split into its layout's fields inside the jitted forward (jax.numpy):
    the same fields as numpy's split at load and, dequantized, gguf's values bit for bit."""
    import gguf
    import jax
    import jax.numpy as jnp

    from babeleval.quant.blocks import dequantize_blocks
    from babeleval.quant.layouts import row_bytes, split_blocks

    raw = np.random.default_rng(0).integers(0, 256, (4, row_bytes(qtype, 512)), dtype=np.uint8)
    host = split_blocks(qtype, raw)
    inside = jax.jit(lambda r: split_blocks(qtype, r, jnp))(raw)
    assert host.keys() == inside.keys()
    for key, field in host.items():
        np.testing.assert_array_equal(np.asarray(inside[key]).view(np.uint8), field.view(np.uint8))
    got = np.asarray(jax.jit(lambda r: dequantize_blocks(qtype, split_blocks(qtype, r, jnp)))(raw))
    with np.errstate(invalid="ignore", over="ignore"):
        want = gguf.quants.dequantize(raw, getattr(gguf.GGMLQuantizationType, qtype))
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_generation_reads_a_quantized_head_a_slice_at_a_time(folders, tmp_path, monkeypatch):
    """Greedy generation with the Q4_K head equals the dequantized model's tokens, the head read in
    slices of VOCAB_CHUNK rows (here 5,000 of 49,152: ten slices, the last overlapping the ninth);
    the step's program holds no dense [vocabulary, hidden] head, which the dense model's does."""
    import jax

    from babeleval.engine import head
    from babeleval.engine.generate import Generator
    from babeleval.loading import load_model
    from babeleval.models import build_module
    from babeleval.requests import Generate

    monkeypatch.setattr(head, "VOCAB_CHUNK", 5000)
    path = write_gguf(folders["llama"], tmp_path / "Q4_K.gguf", "Q4_K")
    quantized, dense = load_model(str(path)), load_model(str(path), quantize="none")
    requests = [Generate(p, (), 12) for p in ("Kila mtu ana haki ya", "Habari za asubuhi", "Ibu pergi ke")]
    got = Generator(quantized, max_length=64).generate(requests)
    assert got == Generator(dense, max_length=64).generate(requests) and all(got)

    module = build_module(quantized.config, quantized.dtype)

    def temporaries(step):  # bytes the compiled step holds besides its inputs and outputs
        program = jax.jit(lambda params, hidden: step(module, params, hidden)).lower(quantized.params, np.ones((2, 256)))
        return program.compile().memory_analysis().temp_size_in_bytes

    whole = quantized.config.vocab_size * 256 * 4  # the head dense in float32
    all_logits = lambda module, params, hidden: module.apply({"params": params}, hidden, method=type(module).logits)
    assert temporaries(head.greedy_tokens) < whole / 4 <= whole <= temporaries(all_logits)
