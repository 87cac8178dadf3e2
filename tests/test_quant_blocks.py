"""Each GGUF block type kept quantized (quant/layouts.py) dequantizes, inside jit, to gguf-py's
numpy `dequantize` bit for bit in float32, on random blocks (every code and packed sub-scale
byte random, float16 scales and minimums finite: tests/gguf_writer.py); and the comparison
catches a swapped nibble order and a scale read from the wrong offset."""
import dataclasses

import numpy as np
import pytest

from gguf_writer import FLOAT16_AT, random_blocks

SHAPE = (3, 512)  # 2 K-quant super-blocks, 16 small blocks per row


def reference(qtype, raw):
    import gguf

    return np.asarray(gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[qtype]), np.float32)


def ours(qtype, raw):
    import jax

    from babeleval.quant import from_blocks

    return np.asarray(jax.jit(lambda q: q.dequantize())(from_blocks(qtype, raw, SHAPE)))


def same_bits(a, b) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("qtype", list(FLOAT16_AT))
def test_blocks_equal_gguf_dequantize_bit_for_bit(qtype):
    raw = random_blocks(SHAPE, qtype, np.random.default_rng(1), scale=0.01)
    want = reference(qtype, raw)
    assert np.isfinite(want).all() and len(np.unique(want)) > 64
    assert same_bits(ours(qtype, raw), want)


def test_blocks_from_ggufs_quantizer_and_the_placed_layout():
    """gguf's own quantizer's blocks too; the representation is the stored codes (uint8), a float16
    scale per block and a float minimum where the type has one (Q4_K's is float16 x a 6-bit integer)."""
    import gguf

    from babeleval.quant import from_blocks

    x = np.random.default_rng(2).normal(0, 0.05, SHAPE).astype(np.float32)
    raw = gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q4_1)
    assert same_bits(ours("Q4_1", raw), reference("Q4_1", raw))
    q = from_blocks("Q4_K", random_blocks(SHAPE, "Q4_K", np.random.default_rng(3)), SHAPE)
    assert {k: (v.dtype.name, v.shape) for k, v in q.fields.items()} == {
        "qs": ("uint8", (3, 2, 128)), "scale": ("float16", (3, 2)), "min": ("float16", (3, 2)),
        "sub_scale": ("uint8", (3, 2, 8)), "sub_min": ("uint8", (3, 2, 8))}


def test_a_swapped_nibble_order_or_a_scale_at_the_wrong_offset_fails(monkeypatch):
    from babeleval.quant import blocks, layouts

    rng = np.random.default_rng(4)
    raws = {t: random_blocks(SHAPE, t, rng, scale=0.01) for t in ("Q4_0", "Q4_K", "Q6_K")}
    real_planes = layouts.planes

    def high_first(x, bits, group, xp=np):  # the high bits of each byte first
        out = real_planes(x, bits, group, xp)
        per = 8 // bits
        return out.reshape(*out.shape[:-1], -1, per, group)[..., ::-1, :].reshape(out.shape)

    with monkeypatch.context() as patch:
        patch.setattr(blocks, "planes", high_first)
        assert not any(same_bits(ours(t, raw), reference(t, raw)) for t, raw in raws.items())
    shifted = {t: dataclasses.replace(layouts.LAYOUTS[t], fields=layouts.LAYOUTS[t].fields[::-1]) for t in raws}
    with monkeypatch.context() as patch:  # every field read from where another is stored
        patch.setattr(layouts, "LAYOUTS", {**layouts.LAYOUTS, **shifted})
        patch.setattr(blocks, "LAYOUTS", {**layouts.LAYOUTS, **shifted})
        for t, raw in raws.items():
            with np.errstate(all="ignore"):
                assert not same_bits(ours(t, raw), reference(t, raw))
    assert all(same_bits(ours(t, raw), reference(t, raw)) for t, raw in raws.items())
