"""One pair of runs on one cell's shared questions: which test fits the metric, and its
numbers. The test follows what the metric is, not its name:
- "binary": every per-question value of the metric, in every run, is 0 or one top value
  (acc 0/1, exact match 0/100): McNemar's exact test;
- "corpus": chrF, chrF++, BLEU, TER are computed from summed n-gram statistics, never
  averaged from sentences: paired bootstrap of the statistics;
- "mean": any other per-question value (F1, acc_per_token): paired bootstrap of the mean."""
from __future__ import annotations

import numpy as np

from ..errors import BabelevalError
from .stats import RESAMPLES, SEED, mcnemar_exact, paired_bootstrap

CORPUS = ("chrf", "chrf++", "bleu", "ter")
LOWER_IS_BETTER = ("ter",)
TESTS = {"binary": "McNemar exact", "mean": "paired bootstrap", "corpus": "paired bootstrap (corpus statistics)"}


def metric_kind(records: list[dict], metric: str, task: str) -> str:
    if metric in CORPUS:
        return "corpus"
    values = [r.get(metric) for r in records]
    if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        present = sorted(k for k, v in (records[0] if records else {}).items()
                         if isinstance(v, float) and k not in ("gold", "prediction"))
        raise BabelevalError(f"task {task}: {metric!r} is not a per-question score in the records, nor a corpus "
                             f"metric compare knows ({', '.join(CORPUS)}); give --metric, one of: "
                             f"{', '.join(present) or '(none)'}")
    levels = set(values)
    return "binary" if levels <= {0, 1} or levels <= {0, 100} else "mean"


def statistics(records: list[dict], metric: str, kind: str):
    """[n, k] per-question statistics and the score of summed statistics (None: a mean)."""
    if kind != "corpus":
        return np.array([[r[metric]] for r in records], np.float64), None
    from ..metrics.generation import GenerationMetric, _streams

    if any("prediction" not in r or "references" not in r for r in records):
        raise BabelevalError(f"{metric} needs each record's prediction and references; these records have none")
    return GenerationMetric(metric)._statistics([r["prediction"] for r in records],
                                                _streams([r["references"] for r in records]))


def value(records: list[dict], metric: str, kind: str) -> float:
    stats, score = statistics(records, metric, kind)
    return float(stats[:, 0].mean()) if score is None else float(score(stats.sum(0)))


def test(records_a: list[dict], records_b: list[dict], metric: str, kind: str, resamples: int = RESAMPLES,
         seed: int = SEED) -> dict:
    """The difference a - b on the same questions (records in the same order), its 95%
    interval (paired bootstrap) and p (McNemar for binary scores, else the bootstrap's)."""
    stats_a, score = statistics(records_a, metric, kind)
    stats_b, _ = statistics(records_b, metric, kind)
    out = paired_bootstrap(stats_a, stats_b, score, resamples, seed)
    out["test"] = TESTS[kind]
    if kind == "binary":
        exact = mcnemar_exact(stats_a[:, 0], stats_b[:, 0])
        out.update(p=exact["p"], only_a=exact["only_a"], only_b=exact["only_b"])
    return out
