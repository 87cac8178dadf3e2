"""Per-token scoring speed of decoder families at the same ~100M random shape (bench/random_models.py:
hidden 768, 12 layers, SmolLM2's tokenizer), on the same requests (XCOPA sw+ta, every option),
taking turns in one process: tokens computed per second of a warm Scorer (compiled on a first call),
best of --repeats rounds. Claims "no slower than Llama per token" within 10%.

  python bench/family_speed.py [--families llama,cohere,gpt_neox] [--repeats 3] [--limit 50]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--families", default="llama,cohere,gpt_neox")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--limit", type=int, default=50, help="XCOPA documents per language")
    args = parser.parse_args()

    from random_models import write

    from babeleval.engine.scoring import Scorer
    from babeleval.evaluate import prepare_task
    from babeleval.loading import load_model
    from babeleval.tasks.files import find_task

    requests = [r for u in prepare_task(find_task("xcopa:sw,ta"), args.data, limit=args.limit) for r in u.kind.requests(u.items)]
    families = args.families.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        scorers = {}
        for family in families:
            model = load_model(str(write(family, Path(tmp) / family)))
            scorers[family] = (Scorer(model), model.num_params)
            scorers[family][0].loglikelihood(requests)  # compiles
        best = {f: 0.0 for f in families}
        for _ in range(args.repeats):
            for family, (scorer, _) in scorers.items():
                before = scorer.stats.tokens_computed
                start = time.perf_counter()
                scorer.loglikelihood(requests)
                rate = (scorer.stats.tokens_computed - before) / (time.perf_counter() - start)
                best[family] = max(best[family], rate)
    print(f"{len(requests)} requests (XCOPA sw+ta, {args.limit} documents each), best of {args.repeats} warm rounds")
    print("| family | parameters | tokens/s | vs llama |")
    print("|---|---|---|---|")
    for family in families:
        print(f"| {family} | {scorers[family][1] / 1e6:.1f}M | {best[family]:.0f} | {best[family] / best['llama']:.2f} |")


if __name__ == "__main__":
    main()
