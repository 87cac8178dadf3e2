"""Long-prompt generation on XQuAD-hi (task xquad-hi: the IndicXQuAD protocol, greedy, 32 new
tokens, cut at the first newline), SmolLM2-135M fp32, compiles included (a fresh compilation
cache): babeleval's Generator on the first QUESTIONS prompts (default all 1,190; the ~5
questions of a paragraph share it as a prompt prefix, prefilled once), then transformers one
prompt at a time (no padding, the simplest peer) on every SAMPLE_EVERY-th of them, its total
extrapolated from that sample by prompt tokens. Outputs must be identical on the sample.

QUESTIONS=1190 SAMPLE_EVERY=10 python bench/xquad_generation.py
ONE_PER_PARAGRAPH=1 QUESTIONS=1190 SAMPLE_EVERY=4 python bench/xquad_generation.py   (prompts sharing nothing:
the first question of each of the 240 paragraphs among the first QUESTIONS)
"""
import os
import tempfile
import time

os.environ["BABELEVAL_CACHE"] = tempfile.mkdtemp(prefix="bench-xquad-")  # cold: compiles are counted

from conftest import SHARED  # noqa: E402  (bench/ and tests/ on the path)

import numpy as np  # noqa: E402

from babeleval.engine.generate import Generator  # noqa: E402
from real_models import ours, reference  # noqa: E402
from xquad_requests import transformers_text, xquad_hi_requests  # noqa: E402

N = int(os.environ.get("QUESTIONS", "1190"))
EVERY = int(os.environ.get("SAMPLE_EVERY", "10"))

requests = xquad_hi_requests(SHARED, N, bool(os.environ.get("ONE_PER_PARAGRAPH")))
model = ours("smollm2-135m")
start = time.perf_counter()
generator = Generator(model)
ours_texts = generator.generate(requests)
ours_s = time.perf_counter() - start
s = generator.stats
prompt_tokens = [len(generator.prompt_tokens(r.context, r.max_new_tokens)) for r in requests]
print(f"babeleval: {len(requests)} prompts ({sum(prompt_tokens):,} prompt tokens, median {int(np.median(prompt_tokens))}, "
      f"max {max(prompt_tokens)}) in {ours_s:.1f} s, {len(requests) / ours_s:.2f} prompts/s; {s.compiles.count} programs; "
      f"{s.prefixes} shared prefixes, {s.prefix_tokens:,} tokens computed once, {s.prefix_tokens_reused:,} not prefilled again; "
      f"truncated {s.truncated}; prefill {s.prefill_seconds:.0f} s ({s.prefill_slots:,} packed line slots), "
      f"decode {s.decode_seconds:.0f} s "
      f"({s.decode_row_steps:,} row steps for {s.new_tokens:,} new tokens)", flush=True)

hf = reference("smollm2-135m")
tok = model.tokenizer
sample = list(range(0, len(requests), EVERY))
start = time.perf_counter()
theirs = [transformers_text(hf, tok, generator.prompt_tokens(requests[i].context, 32), 32, ("\n",)) for i in sample]
hf_sample_s = time.perf_counter() - start
share = sum(prompt_tokens[i] + 32 for i in sample) / sum(t + 32 for t in prompt_tokens)
hf_s = hf_sample_s / share
same = sum(a == ours_texts[i] for a, i in zip(theirs, sample))
print(f"transformers one at a time: {len(sample)} prompts in {hf_sample_s:.1f} s ({share:.3f} of all tokens): "
      f"~{hf_s:.0f} s for all {len(requests)}; outputs identical {same}/{len(sample)}")
print(f"speed-up: {hf_s / ours_s:.2f}x")
differ = [i for a, i in zip(theirs, sample) if a != ours_texts[i]]
for i in differ[:5]:
    print("differs:", i, prompt_tokens[i], repr(ours_texts[i]), repr(theirs[sample.index(i)]))
