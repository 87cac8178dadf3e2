"""jax.nn.dot_product_attention (implementation="xla", what TPUs run; GPUs get cuDNN's kernel
with the same inputs) gives babeleval's own attention kernels' outputs on the masks the engine
builds: a left-padded causal prefill past one query chunk, rows after a cached prefix (the
looped kernel), one decode query over a cache with empty slots, packed option rows."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from babeleval.engine.radix import LineArrays, radix_rows
from babeleval.engine.scoring import fill_lines, tree_mask
from babeleval.models.attention import attend, attend_fused, attention_choice, fused_implementation

SHAPES = {"smollm2": (9, 3, 64), "gemma3": (4, 1, 256)}  # query heads, KV heads, head dim


def _qkv(b, t, s, heads, kv_heads, d, seed=0):
    r = np.random.default_rng(seed)
    q = r.standard_normal((b, t, heads, d), np.float32)
    k, v = (r.standard_normal((b, kv_heads, s, d), np.float32) for _ in range(2))
    return jnp.asarray(q), jnp.asarray(k), jnp.asarray(v)


def _same(q, k, v, mask, **kernel):
    scale = q.shape[-1] ** -0.5
    want = jax.jit(lambda *a: attend(*a, scale, causal=True, **kernel))(q, k, v, mask)
    got = jax.jit(lambda *a: attend_fused(*a, scale, "xla"))(q, k, v, mask)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("model", SHAPES)
def test_left_padded_causal_prefill(model):
    t = 200  # past one 64-query chunk: the kernel's chunked path
    valid = np.ones((2, t), bool)
    valid[0, :37] = False
    q, k, v = _qkv(2, t, t, *SHAPES[model])
    mask = jnp.tril(jnp.ones((t, t), bool))[None] & valid[:, None, :] | jnp.eye(t, dtype=bool)[None]
    _same(q, k, v, mask)


@pytest.mark.parametrize("model", SHAPES)
def test_rows_after_a_cached_prefix(model):
    prefix, t = 96, 80
    q, k, v = _qkv(2, t, prefix + t, *SHAPES[model], seed=1)
    lengths = np.asarray([96, 50])  # the second row's prefix is shorter than its slots
    band = np.arange(prefix)[None, None, :] < lengths[:, None, None]
    own = np.tril(np.ones((t, t), bool))[None].repeat(2, 0)
    mask = jnp.asarray(np.concatenate([np.broadcast_to(band, (2, t, prefix)), own], axis=2))
    _same(q, k, v, mask, offset=prefix)


@pytest.mark.parametrize("model", SHAPES)
def test_one_decode_query_over_a_cache(model):
    q, k, v = _qkv(3, 1, 160, *SHAPES[model], seed=2)
    valid = np.zeros((3, 160), bool)
    valid[0, 10:100], valid[1, :130], valid[2, 60:61] = True, True, True
    _same(q, k, v, jnp.asarray(valid)[:, None, :])


def test_packed_option_rows():
    """Two lines: two questions whose options branch after a shared context, then one long row."""
    r = np.random.default_rng(4)
    words = lambda n: r.integers(3, 1000, n).tolist()
    shared, other, long = words(30), words(12), words(100)
    pairs = [(shared, words(10)), (shared, words(10)), (other, words(9) + words(1)), (other, words(19)),
             (long[:80], long[80:])]
    ends = np.zeros((2, 128), np.int32)
    lines = fill_lines(radix_rows(pairs, 128), 128)
    assert [len(line) for _, line in lines] == [1, 2]
    for b, (_, line) in enumerate(lines):
        arrays = LineArrays()
        for row in line:
            arrays.add_row(row)
        ends[b, :len(arrays.ends)] = arrays.ends
    q, k, v = _qkv(2, 128, 128, *SHAPES["smollm2"], seed=3)
    _same(q, k, v, tree_mask(jnp.asarray(ends)))


def test_kernels_on_cpu_unless_asked(monkeypatch, tmp_path):
    """The choice is the run's, written into the model config at load (BABELEVAL_ATTENTION),
    not read while tracing."""
    from babeleval.loading import load_model
    from tiny_models import build

    assert attention_choice() == "auto" and fused_implementation("auto") is None  # CPU: babeleval's kernels
    build("llama", tmp_path)
    monkeypatch.setenv("BABELEVAL_ATTENTION", "xla")
    model = load_model(str(tmp_path))
    assert model.config.attention == "xla" and fused_implementation(model.config.attention) == "xla"
    monkeypatch.setenv("BABELEVAL_ATTENTION", "flash")
    with pytest.raises(Exception, match="BABELEVAL_ATTENTION='flash'"):
        load_model(str(tmp_path))
