"""Greedy generation, SmolLM2-135M fp32, same run, same outputs, on two workloads:
- xquad: real XQuAD-hi prompts ("Context: ...\\nQuestion: ...\\nAnswer:", the seed's IndicXQuAD
  prompt; 32 new tokens, answer cut at the first newline), BENCH_PROMPTS of them;
- flores: 1-shot English -> Hindi translation (sib200-translate, IndicGenBench flores_in style:
  the instruction and one exemplar from dev are the same for every prompt, a shared prefix
  babeleval prefills once), 64 new tokens, cut at the first newline, FLORES_PROMPTS of them.
Systems:
- babeleval: KV cache, jitted prefill batches (prompts sorted by length) joined into one decode loop,
  rows stop at EOS or at a token holding the newline.
- transformers batched generate, batch 8 in data order, 32 new tokens then cut at the
  newline (what the seed's eval-indic does), and the same with the newline tokens passed
  as extra EOS ids (transformers stops early too).

BENCH_PROMPTS=16 FLORES_PROMPTS=32 python -m pytest bench/test_bench_generate.py --benchmark-only -s
"""
import os
import time

import pytest

from babeleval.engine.generate import Generator, stop_token_ids
from babeleval.requests import Generate, cut_at_stop
from conftest import SHARED
from real_models import ours
from test_generate import transformers_generate, xquad_prompts

RESULTS = {}


def flores_prompts(n):
    from babeleval.evaluate import prepare_task
    from babeleval.tasks.files import find_task

    units = prepare_task(find_task("sib200-translate:hin_Deva"), SHARED, limit=n)
    enxx = [u for u in units if u.variant.key.endswith("direction=enxx")][0]
    return [r.context for r in enxx.kind.requests(enxx.items)]


WORKLOADS = {"xquad": (lambda: xquad_prompts(SHARED, int(os.environ.get("BENCH_PROMPTS", 16))), 32),
             "flores": (lambda: flores_prompts(int(os.environ.get("FLORES_PROMPTS", 32))), 64)}


@pytest.fixture(scope="module", params=list(WORKLOADS))
def setup(request):
    make, new = WORKLOADS[request.param]
    return request.param, ours("smollm2-135m"), make(), new


def record(benchmark, setup, name, fn):
    workload, _, prompts, _ = setup
    start = time.perf_counter()
    texts = benchmark.pedantic(fn, rounds=1, iterations=1)
    seconds = time.perf_counter() - start
    RESULTS[workload, name] = (texts, seconds)
    benchmark.extra_info["prompts_per_s"] = len(prompts) / seconds
    print(f"\n{workload} {name}: {len(prompts)} prompts in {seconds:.1f} s, {len(prompts) / seconds:.2f} prompts/s")
    return texts


def test_babeleval_generate(benchmark, setup):
    _, model, prompts, new = setup
    warm = Generator(model)
    warm.generate([Generate(p, ("\n",), new) for p in prompts])  # compile outside the timing
    generator = Generator(model)
    texts = record(benchmark, setup, "babeleval", lambda: generator.generate([Generate(p, ("\n",), new) for p in prompts]))
    s = generator.stats
    print(f"compiles {warm.stats.compiles.count}, new tokens {s.new_tokens}, prompt tokens {s.prompt_tokens}, "
          f"shared prefixes {s.prefixes} ({s.prefix_tokens} tokens, {s.prefix_tokens_reused} not prefilled again)")
    assert len(texts) == len(prompts)


def _transformers(setup, stop_ids=None):
    _, model, prompts, new = setup
    generator = Generator(model)
    texts = []
    for i in range(0, len(prompts), 8):
        texts += transformers_generate(generator, prompts[i:i + 8], new, stop_ids)
    return [cut_at_stop(t, ("\n",)) for t in texts]


def test_transformers_generate_then_cut(benchmark, setup):
    texts = record(benchmark, setup, "transformers", lambda: _transformers(setup))
    assert texts == RESULTS[setup[0], "babeleval"][0]


def test_transformers_generate_stopping_at_newline_tokens(benchmark, setup):
    workload, model = setup[:2]
    stop_ids = [i for i in stop_token_ids(model.tokenizer, ("\n",)) if i != model.tokenizer.eos_id]
    texts = record(benchmark, setup, "transformers+stop", lambda: _transformers(setup, stop_ids))
    assert texts == RESULTS[workload, "babeleval"][0]
    ours_s = RESULTS[workload, "babeleval"][1]
    print(f"{workload} speed-up: {RESULTS[workload, 'transformers'][1] / ours_s:.2f}x vs generate-then-cut, "
          f"{RESULTS[workload, 'transformers+stop'][1] / ours_s:.2f}x vs generate with newline stops")
