"""The layer stack as scanned groups (models/stack.py): which layers group with which, a period
that does not fit refused, and the compiled scoring program no larger for a deeper model
(parity of scanned stacks against transformers: test_parity_tiny's deep models)."""
import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from babeleval.errors import BabelevalError
from babeleval.models.config import DecoderConfig
from babeleval.models.decoder import decoder_groups
from babeleval.models.stack import Group, layer_groups, slots, smallest_period

NARROW = dict(arch="llama", vocab_size=256, hidden_size=32, num_heads=2, num_kv_heads=1, head_dim=16,
              intermediate_size=64, max_positions=512)


def gemma3_kinds(n):
    return ["global" if (i + 1) % 6 == 0 else "sliding" for i in range(n)]


def test_groups_of_known_stacks():
    # a uniform stack: one scanned group, the last layer in it (run apart only where a prefill wants it)
    assert layer_groups(["x"] * 32) == (Group(0, 1, 32),)
    # a period of 6 (MoE every sixth layer, 26 layers): 4 repeats, then two layers unrolled
    assert smallest_period(gemma3_kinds(26)) == 6
    assert layer_groups(gemma3_kinds(26), 6) == (Group(0, 6, 4), Group(24, 2, 1))
    assert layer_groups(gemma3_kinds(18), 6) == (Group(0, 6, 3),)
    # alternating; 3 + 1
    assert layer_groups(["local", "global"] * 13, 2)[0] == Group(0, 2, 13)
    assert smallest_period((["local"] * 3 + ["global"]) * 8) == 4
    # MoE with a leading dense layer, a split stack: segments of their own
    assert layer_groups(["dense"] + ["moe"] * 47) == (Group(0, 1, 1), Group(1, 1, 47))
    assert layer_groups(["full"] * 28 + ["sliding"] * 8) == (Group(0, 1, 28), Group(28, 1, 8))
    assert smallest_period(["full"] * 28 + ["sliding"] * 8) == 1
    # where each layer's parameters go
    table = slots(layer_groups(gemma3_kinds(13), 6))
    assert table[0] == ("scan_0/layer_0", 0) and table[11] == ("scan_0/layer_5", 1) and table[12] == ("layers_12", None)


def test_a_period_that_does_not_fit_is_refused():
    """MoE layers every third layer read as period 2 would run a dense layer as an MoE one:
    refused, naming them. Sliding and global layers are one kind (a per-layer flag)."""
    moe = dict(num_experts=4, experts_per_token=2, moe_intermediate_size=32)
    cfg = DecoderConfig(**NARROW, **moe, num_layers=18, moe_layers=tuple((i + 1) % 3 == 0 for i in range(18)))
    assert decoder_groups(cfg) == (Group(0, 3, 6),)
    with pytest.raises(BabelevalError, match=r"layer 2 is moe but .* layer 0, .* period 2 does not fit"):
        decoder_groups(dataclasses.replace(cfg, layer_period=2))
    types = tuple("full" if k == "global" else "sliding" for k in gemma3_kinds(18))
    gemma3 = DecoderConfig(**NARROW, num_layers=18, layer_types=types, sliding_window=4)
    assert decoder_groups(gemma3) == (Group(0, 1, 18),)


def program_size(layers: int) -> int:
    """HLO instructions of the compiled scoring program (engine/scoring.py) for a narrow Llama."""
    from babeleval.engine.head import HEAD_CHUNK
    from babeleval.engine.scoring import score_lines
    from babeleval.models import abstract_params
    from babeleval.placement.devices import make_mesh, using

    cfg = DecoderConfig(**NARROW, num_layers=layers)
    rows, length, scored = 2, 64, HEAD_CHUNK
    lines = [jax.ShapeDtypeStruct((rows, length), jnp.int32)] * 3
    picks = [jax.ShapeDtypeStruct((1, scored), jnp.int32)] * 2 + [jax.ShapeDtypeStruct((1,), jnp.int32)]
    with using(make_mesh("data=1,model=1", 0, 0)):
        compiled = score_lines.lower(abstract_params(cfg), *lines, *picks, config=cfg).compile()
    return sum(1 for line in compiled.as_text().splitlines() if re.match(r"\s*(ROOT )?%?[\w.-]+ = ", line))


def test_compiled_program_does_not_grow_with_depth():
    """2 layers (unrolled) against 16 (one scanned body): the same program size within 10% (694
    and 734 instructions; 80 layers: 734). The unrolled stack it replaced had 694 and 3,508."""
    shallow, deep = program_size(2), program_size(16)
    assert abs(deep - shallow) <= 0.1 * shallow, (shallow, deep)
    assert np.isfinite(shallow) and shallow > 100


def test_layers_quantized_alike_stack_as_one_qarray_and_mixed_ones_as_a_qstack():
    """A stack's layers copied into their slots as read: one block type -> one stacked QArray whose
    layers dequantize as each layer did; two types (a GGUF holding a few layers wider) -> a QStack,
    still quantized, whose one-layer slices (as a scan sees them, jitted) dequantize as each layer
    did, each layer's stored row bytes held once (padded to the widest row); layouts without stored
    bytes (quantized at load) or a dense layer among quantized ones -> dense, said once; a layer
    that never came is named."""
    from babeleval.loading.stacking import Stacks
    from babeleval.quant import QStack
    from babeleval.quant.at_load import quantize

    rng = np.random.default_rng(0)
    layers = [rng.normal(size=(8, 256)).astype(np.float32) for _ in range(3)]
    want = {"w": jax.ShapeDtypeStruct((3, 8, 256), np.float32)}
    notes = []
    same = Stacks(want, np.float32, notes.append)
    parts = [quantize(w, "int4") for w in layers]
    assert same.add("w", 2, parts[2]) is None and same.add("w", 0, parts[0]) is None
    assert same.lacking() == {"w": [1]}
    stack = same.add("w", 1, parts[1])
    assert stack.layout == "int4" and stack.shape == (3, 8, 256) and not notes
    for i, part in enumerate(parts):
        layer = jax.tree.map(lambda x, i=i: x[i], stack)
        np.testing.assert_array_equal(np.asarray(layer.dequantize()), np.asarray(part.dequantize()))
    import gguf

    from babeleval.quant import from_blocks

    stored = lambda w, t: from_blocks(t, gguf.quants.quantize(w, getattr(gguf.GGMLQuantizationType, t)), w.shape)
    kinds = ("Q4_0", "Q8_0", "Q4_0")
    blocks = [stored(w, t) for w, t in zip(layers, kinds)]
    mixed = Stacks(want, np.float32, notes.append)
    for i in (0, 1):
        assert mixed.add("w", i, blocks[i]) is None
    held = mixed.add("w", 2, blocks[2])
    assert isinstance(held, QStack) and held.layout == "Q4_0+Q8_0" and held.shape == (3, 8, 256) and not notes
    # each layer held once, as stored: its row bytes padded to the widest row (Q8_0's 272 against
    # Q4_0's 144), + `which`; not a full-length stack per layout (3 x 8 x (144 + 272) + 12 bytes)
    assert held.nbytes == 3 * 8 * 272 + 3 * 4 < 3 * 8 * (144 + 272) + 3 * 4
    for i, block in enumerate(blocks):
        np.testing.assert_array_equal(np.asarray(held.raw)[i, :, :block.raw.shape[-1]], block.raw)
    one_layer = jax.jit(lambda s, i: jax.tree.map(lambda x: x[i], s).dequantize())
    for i, block in enumerate(blocks):
        want_i = gguf.quants.dequantize(block.raw, getattr(gguf.GGMLQuantizationType, kinds[i]))
        np.testing.assert_array_equal(np.asarray(one_layer(held, i)), want_i)
        np.testing.assert_array_equal(held.dequantize(np.float32, xp=np)[i], want_i)
    wide_first = Stacks(want, np.float32, notes.append)  # the wider layout first: the narrower padded
    for i in (1, 0, 2):
        out = wide_first.add("w", i, blocks[i])
    np.testing.assert_array_equal(out.dequantize(np.float32, xp=np), held.dequantize(np.float32, xp=np))
    parts[1] = quantize(layers[1], "int8")  # quantized at load, no stored bytes: the two cannot mix, dense
    codes = Stacks(want, np.float32, notes.append)
    for i in (0, 1):
        codes.add("w", i, parts[i])
    out = codes.add("w", 2, parts[2])
    assert isinstance(out, np.ndarray) and len(notes) == 1 and "int4 and int8" in notes.pop()
    np.testing.assert_array_equal(out[1], np.asarray(parts[1].dequantize()))
    dense = Stacks(want, np.float32, notes.append)
    dense.add("w", 0, parts[0])
    assert dense.add("w", 1, layers[1]) is None and len(notes) == 1
    out = dense.add("w", 2, parts[2])
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out[1], layers[1])
    np.testing.assert_array_equal(out[0], np.asarray(parts[0].dequantize()))
