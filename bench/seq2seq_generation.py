"""Greedy translation with an encoder-decoder: babeleval's Seq2SeqGenerator vs transformers'
generate, same weights, same prompts, one process, taking turns.

NusaX-MT's first N Indonesian test sentences as "translate Indonesian to English: <sentence>"
(T5's task-prefix style), greedy, max_new_tokens new tokens (a random model rarely emits EOS:
every row runs to the limit, the worst case for both). transformers runs its generate (KV
cache on, fp32) one batch of --hf-batch prompts at a time in file order; babeleval answers all
prompts in one call (its own batches, longest first), once cold (compiling) and once warm.
Reported: seconds, sentences/s, the ratios, and how many outputs are identical token for token.

  python bench/random_models.py mt5-small /tmp/bench-mt5
  nice -n 10 python bench/seq2seq_generation.py /tmp/bench-mt5 --sentences 200 [--json out.json]
"""
from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def prompts(count: int) -> list[str]:
    with open(ROOT.parent / "shared" / "data" / "nusax" / "mt" / "test.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [f"translate Indonesian to English: {row['indonesian']}" for row in rows[:count]]


def transformers_generate(model, tokenizer, texts: list[str], batch: int, max_new: int) -> list[list[int]]:
    import torch

    out = []
    for start in range(0, len(texts), batch):
        enc = tokenizer(texts[start:start + batch], return_tensors="pt", padding=True)
        with torch.no_grad():
            ids = model.generate(**enc, max_new_tokens=max_new, do_sample=False, num_beams=1)
        for row in ids.tolist():
            row = row[1:]  # the decoder start token
            out.append(row[:row.index(tokenizer.eos_token_id)] if tokenizer.eos_token_id in row else row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", help="an encoder-decoder HF folder (bench/random_models.py mt5-small DIR)")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--max-new", type=int, default=32)
    parser.add_argument("--hf-batch", type=int, default=8)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    import transformers

    from babeleval.engine.seq2seq_generate import Seq2SeqGenerator
    from babeleval.loading import load_model
    from babeleval.requests import Generate

    texts = prompts(args.sentences)
    model = load_model(args.model)
    requests = [Generate(t, max_new_tokens=args.max_new) for t in texts]
    start = time.perf_counter()
    Seq2SeqGenerator(model).generate_results(requests)
    cold = time.perf_counter() - start
    generator = Seq2SeqGenerator(model)
    start = time.perf_counter()
    ours = generator.generate_results(requests)
    warm = time.perf_counter() - start

    hf_model = transformers.AutoModelForSeq2SeqLM.from_pretrained(args.model, dtype="float32").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
    start = time.perf_counter()
    theirs = transformers_generate(hf_model, tokenizer, texts, args.hf_batch, args.max_new)
    hf_seconds = time.perf_counter() - start
    same = sum(r.text == model.tokenizer.decode(ids) for r, ids in zip(ours, theirs))
    row = {"sentences": len(texts), "max_new_tokens": args.max_new, "hf_batch": args.hf_batch,
           "hf_seconds": round(hf_seconds, 2), "babeleval_seconds_first": round(cold, 2),
           "babeleval_seconds": round(warm, 2), "ratio": round(hf_seconds / warm, 2),
           "ratio_first": round(hf_seconds / cold, 2), "identical": same, "new_tokens": generator.stats.new_tokens,
           "decode_row_steps": generator.stats.decode_row_steps}
    print(json.dumps(row))
    print("\n| sentences | transformers s | babeleval s (first call) | ratio (first call) | identical |")
    print("|---|---|---|---|---|")
    print(f"| {len(texts)} | {hf_seconds:.1f} | {warm:.1f} ({cold:.1f}) | {hf_seconds / warm:.2f}x "
          f"({hf_seconds / cold:.2f}x) | {same}/{len(texts)} |")
    if args.json:
        Path(args.json).write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
