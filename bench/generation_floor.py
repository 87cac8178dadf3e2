"""The least time this host can take for xquad_generation.py's one-question-per-paragraph run
(ONE_PER_PARAGRAPH=1 QUESTIONS=400: 76 prompts sharing nothing), counted from the prompts'
lengths and the model's shapes at the measured matmul peak and memory read rate, beside where
one decode step's time goes (one device, best of 5). bench/RESULTS.md compares it with the
transformers time that 2x must halve.

python bench/generation_floor.py   (ROW_STEPS=2560 DECODE_SLOTS=1100: what the bench's decode ran)
"""
import os

from conftest import SHARED  # noqa: E402  (tests/ on the path)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from babeleval.bench import matmul_peak  # noqa: E402
from babeleval.placement.sharding import kv_bytes_per_token  # noqa: E402
from babeleval.models import Decoder, build_module  # noqa: E402
from babeleval.models.decoder import empty_cache  # noqa: E402
from babeleval.models.attention import _attend_one_query  # noqa: E402
from real_models import ours  # noqa: E402
from timing import best_seconds  # noqa: E402
from xquad_requests import xquad_hi_requests  # noqa: E402


def best_ms(fn, *args) -> float:
    return best_seconds(fn, *args) * 1e3


model = ours("smollm2-135m")
cfg, dtype = model.config, model.dtype
lengths = np.asarray([len(model.tokenizer.with_prefix(model.tokenizer.encode(r.context)))
                      for r in xquad_hi_requests(SHARED, 400, one_per_paragraph=True)], np.float64)

kv = 2 * cfg.hidden_size * cfg.num_kv_heads * cfg.head_dim
layer = 2 * cfg.hidden_size * cfg.num_heads * cfg.head_dim + kv + 3 * cfg.hidden_size * cfg.intermediate_size
params = sum(x.size for x in jax.tree.leaves(model.params))
# the last layer computes keys and values everywhere, the rest (and the head) at each prompt's last token only
prefill_gemm = (2 * lengths.sum() * ((cfg.num_layers - 1) * layer + kv)
                + 2 * len(lengths) * (layer - kv + cfg.vocab_size * cfg.hidden_size))
prefill_attention = (lengths * (lengths + 1) / 2).sum() * (cfg.num_layers - 1) * cfg.num_heads * cfg.head_dim * 4
row_steps, slots = int(os.environ.get("ROW_STEPS", 2560)), int(os.environ.get("DECODE_SLOTS", 1100))
decode_gemm = row_steps * 2 * params
decode_bytes = row_steps * slots * kv_bytes_per_token(cfg, dtype)

peak = matmul_peak(jnp.float32)
cache_like = jnp.ones((int(decode_bytes // row_steps // 4),), jnp.float32)  # one row step's cache
read_rate = cache_like.nbytes / best_ms(jnp.sum, cache_like) * 1e3
floor = (prefill_gemm + prefill_attention + decode_gemm) / peak + decode_bytes / read_rate
print(f"{len(lengths)} prompts, {int(lengths.sum()):,} tokens; matmul peak {peak / 1e9:.1f} GF/s, "
      f"cache read {read_rate / 1e9:.1f} GB/s")
print(f"prefill GEMMs {prefill_gemm / 1e12:.2f} TFLOP + attention {prefill_attention / 1e12:.2f} TFLOP; "
      f"decode GEMMs {decode_gemm / 1e12:.2f} TFLOP ({row_steps:,} row steps) + {decode_bytes / 1e9:.0f} GB of cache read")
print(f"floor at 100% of peak, no compile: {floor:.0f} s (2x needs half of transformers' time)")

# one decode step on one device: 8 rows over 800 cache slots
rows, held = 8, 800
device = jax.devices()[0]
weights = jax.device_put(model.params, device)
module = build_module(cfg, dtype)
cache = empty_cache(cfg, rows, held, dtype)
token, position = jnp.full((rows, 1), 100, jnp.int32), jnp.full((rows, 1), held // 2, jnp.int32)
mask, kv_positions = jnp.ones((rows, 1, held), bool), jnp.broadcast_to(jnp.arange(held)[None], (rows, held))
hidden = jnp.ones((rows, cfg.hidden_size), dtype)
matrices = [w for w in jax.tree.leaves(weights) if w.ndim == 2]


def all_matrices(x):  # every weight matrix once, M = rows (the embedding as the tied head)
    return sum((jnp.ones((rows, w.shape[0]), dtype) * x[:, :1] @ w).sum() for w in matrices)


def step(weights, cache):
    out, _ = module.apply({"params": weights}, token, position, mask, cache=cache, cache_index=held - 1,
                          kv_positions=kv_positions)
    return out


def head(weights, x):
    return jnp.argmax(module.apply({"params": weights}, x, method=Decoder.logits), -1)


def attention(q, cache):
    return sum(_attend_one_query(q, c["k"], c["v"], mask, cfg.head_dim ** -0.5, None, None).sum() for c in cache)


q = jnp.ones((rows, 1, cfg.num_heads, cfg.head_dim), dtype)
cache_bytes = sum(c["k"].nbytes + c["v"].nbytes for c in cache)
print(f"decode step, {rows} rows x {held} slots, one device: every weight matrix at M={rows} "
      f"{best_ms(all_matrices, hidden):.1f} ms; the step without the head {best_ms(step, weights, cache):.1f} ms; "
      f"the head {best_ms(head, weights, hidden):.1f} ms; {cfg.num_layers} layers of one-query attention "
      f"{best_ms(attention, q, cache):.1f} ms ({cache_bytes / 1e6:.0f} MB of cache; a plain sum of it "
      f"{best_ms(lambda c: sum(x['k'].sum() + x['v'].sum() for x in c), cache):.1f} ms)")
