"""One pair of runs on one cell's shared questions: which test fits the metric, and its
numbers. The test follows what the metric is, not its name:
- "binary": every per-question value of the metric, in every run, is 0 or one top value
  (acc 0/1, exact match 0/100): McNemar's exact test;
- "corpus": chrF, chrF++, BLEU, TER are computed from summed n-gram statistics, never
  averaged from sentences: paired bootstrap of the statistics;
- "mean": any other per-question value (F1, acc_per_token): paired bootstrap of the mean;
- "labels": kNN classification's macro F1 (macro_f1@k, majority_macro_f1), a statistic of
  the whole label set: each question contributes one-hot gold, predicted and hit counts,
  summed per resample, so a resample's macro F1 is sklearn's over the labels it holds.
  (kNN accuracy@k is binary: the predicted label is the gold one or not.)"""
from __future__ import annotations

import re

import numpy as np

from ..errors import BabelevalError
from .stats import RESAMPLES, SEED, mcnemar_exact, mcnemar_interval, paired_bootstrap

CORPUS = ("chrf", "chrf++", "bleu", "ter")
LOWER_IS_BETTER = ("ter",)
TESTS = {"binary": "McNemar exact", "mean": "paired bootstrap", "corpus": "paired bootstrap (corpus statistics)",
         "labels": "paired bootstrap (label counts)"}


def _label_field(metric: str) -> str | None:
    """The record field holding the predicted label a kNN metric is computed from."""
    if m := re.fullmatch(r"(?:macro_f1|accuracy)@(\d+)", metric):
        return f"prediction@{m.group(1)}"
    if m := re.fullmatch(r"(majority|random)_(?:macro_f1|accuracy)", metric):
        return m.group(1)
    return None


def _values(records: list[dict], metric: str) -> list:
    """Per-question values: the record's own field, or whether a kNN prediction is the gold label."""
    field = _label_field(metric)
    if metric not in (records[0] if records else {}) and field and all(field in r and "gold" in r for r in records):
        return [float(r[field] == r["gold"]) for r in records]
    return [r.get(metric) for r in records]


def metric_kind(records: list[dict], metric: str, task: str) -> str:
    if metric in CORPUS:
        return "corpus"
    if "macro_f1" in metric and _label_field(metric) and all(_label_field(metric) in r and "gold" in r for r in records):
        return "labels"
    values = _values(records, metric)
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
    if kind == "labels":
        return _label_counts([r["gold"] for r in records], [r[_label_field(metric)] for r in records])
    if kind != "corpus":
        return np.array(_values(records, metric), np.float64)[:, None], None
    from ..metrics.generation import GenerationMetric, _streams

    if any("prediction" not in r or "references" not in r for r in records):
        raise BabelevalError(f"{metric} needs each record's prediction and references; these records have none")
    return GenerationMetric(metric)._statistics([r["prediction"] for r in records],
                                                _streams([r["references"] for r in records]))


def _label_counts(gold: list, predicted: list):
    """[n, 3 x labels]: one-hot gold, predicted and hit per question; macro F1 of summed counts."""
    labels = {label: i for i, label in enumerate(sorted(set(map(str, gold)) | set(map(str, predicted))))}
    width = len(labels)
    stats = np.zeros((len(gold), 3 * width))
    rows = np.arange(len(gold))
    g, p = np.array([labels[str(x)] for x in gold], int), np.array([labels[str(x)] for x in predicted], int)
    stats[rows, g] = 1
    stats[rows, width + p] = 1
    stats[rows[g == p], 2 * width + g[g == p]] = 1

    def macro_f1(summed):
        summed = np.asarray(summed, np.float64)
        seen, hits = summed[:width] + summed[width:2 * width], summed[2 * width:]
        present = seen > 0
        return float(np.mean(2 * hits[present] / seen[present]))

    return stats, macro_f1


def value(records: list[dict], metric: str, kind: str) -> float:
    stats, score = statistics(records, metric, kind)
    return float(stats[:, 0].mean()) if score is None else float(score(stats.sum(0)))


def test(records_a: list[dict], records_b: list[dict], metric: str, kind: str, resamples: int = RESAMPLES,
         seed: int = SEED) -> dict:
    """The difference a - b on the same questions (records in the same order), its 95%
    interval and p: McNemar's for binary scores, else the paired bootstrap's."""
    stats_a, score = statistics(records_a, metric, kind)
    stats_b, _ = statistics(records_b, metric, kind)
    if kind == "binary":
        exact = mcnemar_exact(stats_a[:, 0], stats_b[:, 0])
        top = max(stats_a.max(), stats_b.max(), 1.0)  # exact match counts 0/100
        low, high = (top * x for x in mcnemar_interval(exact["only_a"], exact["only_b"], len(stats_a)))
        # mean(a) - mean(b) counted from the discordant questions, as the interval is: where one run
        # is never right alone the interval ends exactly at the difference, which two rounded means missed
        difference = float(top * ((exact["only_a"] - exact["only_b"]) / len(stats_a)))
        return {"difference": difference, "low": low, "high": high, **exact, "test": TESTS[kind]}
    return {**paired_bootstrap(stats_a, stats_b, score, resamples, seed), "test": TESTS[kind]}
