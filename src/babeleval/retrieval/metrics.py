"""Retrieval metrics, each the reference's definition: scikit-learn's F1 (weighted as MTEB and
MINERS' bitext use it, macro as MINERS' classification does; zero_division=0), MINERS'
prediction at k and kNN vote, and LASER's xSIM margin (source/xsim.py)."""
from __future__ import annotations

from collections import Counter

import numpy as np


def _per_label_f1(gold: np.ndarray, predicted: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """F1 of each label in the sorted array `labels` (counts by bincount: linear in the records,
    so a pooled bitext set with as many labels as sentences stays fast)."""
    def position(values):
        at = np.clip(np.searchsorted(labels, values), 0, len(labels) - 1)
        return np.where(labels[at] == values, at, -1)

    g, p = position(gold), position(predicted)
    count = lambda idx: np.bincount(idx[idx >= 0], minlength=len(labels)).astype(float)  # noqa: E731
    tp, gold_n, predicted_n = count(np.where(gold == predicted, g, -1)), count(g), count(p)
    precision = np.divide(tp, predicted_n, out=np.zeros_like(tp), where=predicted_n > 0)
    recall = np.divide(tp, gold_n, out=np.zeros_like(tp), where=gold_n > 0)
    total = precision + recall
    return np.divide(2 * precision * recall, total, out=np.zeros_like(tp), where=total > 0)


def weighted_f1(gold, predicted) -> float:
    """f1_score(average="weighted", zero_division=0): per-label F1 weighted by the label's
    count in gold (labels only ever predicted weigh nothing)."""
    gold, predicted = np.asarray(gold), np.asarray(predicted)
    if not len(gold):
        return float("nan")
    labels, support = np.unique(gold, return_counts=True)
    return float(np.sum(_per_label_f1(gold, predicted, labels) * support) / len(gold))


def macro_f1(gold, predicted) -> float:
    """f1_score(average="macro", zero_division=0): the plain mean over every label seen in
    gold or predictions."""
    gold, predicted = np.asarray(gold), np.asarray(predicted)
    if not len(gold):
        return float("nan")
    return float(np.mean(_per_label_f1(gold, predicted, np.union1d(gold, predicted))))


def prediction_at_k(nearest: np.ndarray, gold: np.ndarray, k: int) -> np.ndarray:
    """MINERS' bitext rule: the gold index when it is among the k nearest, else the nearest."""
    hit = np.any(nearest[:, :k] == gold[:, None], axis=1)
    return np.where(hit, gold, nearest[:, 0])


def vote(labels: list) -> object:
    """The most common label among the neighbours (nearest first); a tie goes to the label
    met first, that is the nearer one (MINERS' kNN rule)."""
    counts = Counter(labels)
    best = max(counts.values())
    return next(label for label in labels if counts[label] == best)


def xsim_predictions(x: np.ndarray, y: np.ndarray, k: int = 4, margin: str = "ratio") -> np.ndarray:
    """LASER xSIM: cosine on L2-normalised vectors; each x_i's candidates are its k nearest y;
    a = cos(x_i, y_j), b = (mean cos of x_i's k nearest y + mean cos of y_j's k nearest x) / 2;
    the prediction is the candidate with the largest margin (ratio a / b, distance a - b,
    absolute a)."""
    from .exact import exact_search

    xy_i, xy_d = exact_search([(x, y, 1.0)], k, "cosine")
    _, yx_d = exact_search([(y, x, 1.0)], k, "cosine")
    xy_cos, x_mean, y_mean = 1.0 - xy_d, (1.0 - xy_d).mean(1), (1.0 - yx_d).mean(1)
    b = (x_mean[:, None] + y_mean[xy_i]) / 2
    score = {"ratio": xy_cos / b, "distance": xy_cos - b, "absolute": xy_cos}[margin]
    return xy_i[np.arange(len(x)), np.argmax(score, axis=1)]
