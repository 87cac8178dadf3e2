"""Greedy generation on real XQuAD-hi prompts ("Context: ...\\nQuestion: ...\\nAnswer:", the
seed's IndicXQuAD prompt; 32 new tokens, answer cut at the first newline), SmolLM2-135M fp32,
same run, same outputs:
- babeleval: KV cache, jitted prefill batches (prompts sorted by length) joined into one decode loop,
  rows stop at EOS or at a token holding the newline.
- transformers batched generate, batch 8 in data order, 32 new tokens then cut at the
  newline (what the seed's eval-indic does), and the same with the newline tokens passed
  as extra EOS ids (transformers stops early too).

BENCH_PROMPTS=16 python -m pytest bench/test_bench_generate.py --benchmark-only -s
"""
import os
import time

import pytest

from babeleval.engine.generate import Generator, stop_token_ids
from babeleval.requests import Generate, cut_at_stop
from conftest import SHARED
from real_models import ours
from test_generate import transformers_generate, xquad_prompts

PROMPTS = int(os.environ.get("BENCH_PROMPTS", 16))
NEW = 32
RESULTS = {}


@pytest.fixture(scope="module")
def setup():
    model = ours("smollm2-135m")
    return model, xquad_prompts(SHARED, PROMPTS)


def record(benchmark, name, fn):
    start = time.perf_counter()
    texts = benchmark.pedantic(fn, rounds=1, iterations=1)
    seconds = time.perf_counter() - start
    RESULTS[name] = (texts, seconds)
    benchmark.extra_info["prompts_per_s"] = PROMPTS / seconds
    print(f"\n{name}: {seconds:.1f} s, {PROMPTS / seconds:.2f} prompts/s")
    return texts


def test_babeleval_generate(benchmark, setup):
    model, prompts = setup
    warm = Generator(model)
    warm.generate([Generate(p, ("\n",), NEW) for p in prompts])  # compile outside the timing
    generator = Generator(model)
    texts = record(benchmark, "babeleval", lambda: generator.generate([Generate(p, ("\n",), NEW) for p in prompts]))
    print(f"compiles {warm.stats.compiles.count}, new tokens {generator.stats.new_tokens}, "
          f"prompt tokens {generator.stats.prompt_tokens}")
    assert len(texts) == PROMPTS


def _transformers(model, prompts, stop_ids=None):
    generator = Generator(model)
    texts = []
    for i in range(0, len(prompts), 8):
        texts += transformers_generate(generator, prompts[i:i + 8], NEW, stop_ids)
    return [cut_at_stop(t, ("\n",)) for t in texts]


def test_transformers_generate_then_cut(benchmark, setup):
    model, prompts = setup
    texts = record(benchmark, "transformers", lambda: _transformers(model, prompts))
    assert texts == RESULTS["babeleval"][0]


def test_transformers_generate_stopping_at_newline_tokens(benchmark, setup):
    model, prompts = setup
    stop_ids = [i for i in stop_token_ids(model.tokenizer, ("\n",)) if i != model.tokenizer.eos_id]
    texts = record(benchmark, "transformers+stop", lambda: _transformers(model, prompts, stop_ids))
    assert texts == RESULTS["babeleval"][0]
    ours_s = RESULTS["babeleval"][1]
    print(f"speed-up: {RESULTS['transformers'][1] / ours_s:.2f}x vs generate-then-cut, "
          f"{RESULTS['transformers+stop'][1] / ours_s:.2f}x vs generate with newline stops")
