"""When should requests of different contexts share a row? The xnli-style workload (NusaX
jv/su/ban/ace premises, English hypotheses, lm-eval's empty context: [EOS] + the whole option,
3 options per question) scored under several join rules (engine/radix.py's MIN_SHARED,
SHARE_FRACTION, ROW_LIMIT), taking turns in one process: tokens computed, padded slots, lines,
seconds. Log-probs are compared with the default rule's.

nice -n 5 python bench/radix_rows.py [--questions 100] [--turns 2]
"""
from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

LANGUAGES = ("javanese", "sundanese", "balinese", "acehnese")
# (name, MIN_SHARED, SHARE_FRACTION, ROW_LIMIT); SHARE_FRACTION 10**9: only a shared whole context joins
RULES = [("no sharing across contexts (one row per request)", 10**9, 1, 0),
         ("whole contexts only: [EOS] shared by all -> rows up to max_length", 1, 1, 0),
         ("share >= 1/4, rows <= 512 (default)", 2, 4, 512),
         ("share >= 1/4, rows <= 128", 2, 4, 128),
         ("share >= 1/16, rows <= 2048", 2, 16, 2048)]


def requests(questions: int):
    from real_models import ours

    tok = ours("smollm2-135m").tokenizer
    rows = list(csv.DictReader(open(ROOT.parent / "shared" / "data" / "nusax" / "mt" / "test.csv")))[:questions]
    return [([tok.eos_id], tok.encode(f"{r[lang]}, right? {word}, {r['english']}"))
            for lang in LANGUAGES for r in rows for word in ("Yes", "Also", "No")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=100, help="per language")
    parser.add_argument("--turns", type=int, default=2)
    args = parser.parse_args()
    from babeleval.engine import radix
    from babeleval.engine.scoring import Scorer
    from real_models import ours

    model = ours("smollm2-135m")
    pairs = requests(args.questions)
    seconds = {name: [] for name, *_ in RULES}
    stats, logprobs = {}, {}
    for turn in range(args.turns + 1):  # turn 0 compiles
        for name, min_shared, fraction, limit in RULES:
            radix.MIN_SHARED, radix.SHARE_FRACTION, radix.ROW_LIMIT = min_shared, fraction, limit
            scorer = Scorer(model)
            start = time.perf_counter()
            got = scorer.loglikelihood_tokens(pairs)
            if turn:
                seconds[name].append(time.perf_counter() - start)
            stats[name], logprobs[name] = scorer.stats, np.asarray([g.logprob for g in got])
    base = logprobs[RULES[2][0]]
    print(f"{len(pairs)} requests, {stats[RULES[0][0]].tokens_alone} tokens alone; seconds: median of {args.turns} turns")
    print("| rule | tokens computed | padded slots | lines | seconds | max abs diff vs default |")
    print("|---|---|---|---|---|---|")
    for name, *_ in RULES:
        s = stats[name]
        print(f"| {name} | {s.tokens_computed:,} | {s.tokens_padded:,} | {s.lines} | {np.median(seconds[name]):.1f} | "
              f"{np.abs(logprobs[name] - base).max():.1e} |")


if __name__ == "__main__":
    main()
