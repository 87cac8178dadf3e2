"""The paired tests behind `babeleval compare`: two runs scored on the same questions, so
each question is its own control and the test sees only where the runs disagree.

- McNemar's exact test for per-question 0/1 scores (acc, exact match): under "no
  difference" each discordant question (one run right, the other wrong) is a fair coin, so
  p is the two-sided binomial tail of the discordant counts, computed in exact integers.
- The paired bootstrap for everything else, as sacreBLEU's paired test draws it: numpy's
  default_rng(seed), [resamples, n] question indices in one call, the SAME indices for both
  runs (resampling questions, never one run against the other), per-question statistics
  summed in float32 and the score recomputed from each resample (a mean for F1-like
  scores; chrF/BLEU from summed n-gram statistics, as they are corpus statistics). p is
  the two-sided shift test (Efron & Tibshirani 1993, 16.4): the resampled differences
  moved to mean zero by the observed one stand for "no difference", p = (1 + #{|d* - d| >=
  |d|}) / (resamples + 1). Not sacreBLEU's p, which centres |d*| on its own mean and counts
  strictly greater: that gives two identical systems p = 1 / (resamples + 1), and a zero
  difference p near 0.4 rather than 1.
- The 95% interval of the difference: for 0/1 scores the one that inverts McNemar's exact
  test (Clopper-Pearson for the share of discordant questions won by A, scaled by the
  discordant share of all questions), so it excludes 0 exactly when p < 0.05 (a bootstrap
  percentile interval disagrees with the exact test near the edge: XCOPA-ht, 500 questions,
  [0.002, 0.062] beside McNemar's p = 0.052); for the others the 2.5-97.5 percentile of the
  paired resamples.
- Holm (family-wise error) and Benjamini-Hochberg (false discovery rate) adjust the p-values
  of one pair of runs across the languages of a task: with 5-200 languages tested at once,
  some "significant" differences are expected by chance alone."""
from __future__ import annotations

import numpy as np

RESAMPLES = 10_000
SEED = 12345
CORRECTIONS = ("holm", "bh", "none")


def mcnemar_exact(a, b) -> dict:
    """a, b: per-question 0/1 scores of two runs on the same questions (any two levels, e.g.
    0/100, count as wrong/right). Returns the discordant counts and the exact two-sided p."""
    a, b = np.asarray(a, float) > 0, np.asarray(b, float) > 0
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    n = only_a + only_b
    if n == 0:
        return {"only_a": 0, "only_b": 0, "p": 1.0}
    return {"only_a": only_a, "only_b": only_b, "p": min(1.0, 2 * _binomial_tail(n, min(only_a, only_b)))}


EXACT_UP_TO = 100_000  # discordant questions; the exact sum takes ~1 s there and grows as n^2


def _binomial_tail(n: int, m: int) -> float:
    """P(X <= m) for X ~ Binomial(n, 1/2): C(n, k) built one from the last in exact integers
    (10,000 discordant questions in ~15 ms), scipy's regularised incomplete beta beyond."""
    if n > EXACT_UP_TO:
        from scipy.stats import binom

        return float(binom.cdf(m, n, 0.5))
    term = total = 1
    for k in range(1, m + 1):
        term = term * (n - k + 1) // k
        total += term
    return total / 2 ** n


def mcnemar_interval(only_a: int, only_b: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The interval of the difference in accuracy (a - b) over n questions that inverts the
    exact test, conditional on the only_a + only_b discordant questions."""
    from scipy.stats import beta

    discordant = only_a + only_b
    if discordant == 0:
        return 0.0, 0.0
    tail = (1 - confidence) / 2
    low = beta.ppf(tail, only_a, only_b + 1) if only_a else 0.0
    high = beta.ppf(1 - tail, only_a + 1, only_b) if only_b else 1.0
    return float(discordant * (2 * low - 1) / n), float(discordant * (2 * high - 1) / n)


def resample_indices(n: int, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    return np.random.default_rng(seed).choice(n, size=(resamples, n), replace=True)


CHUNK = 1 << 22  # indices drawn at a time (32 MiB)


def _index_chunks(n: int, resamples: int, seed: int):
    """resample_indices' rows a block at a time: the same stream (numpy draws rows in
    order), in bounded memory for a 10,000-question subset."""
    rng, rows = np.random.default_rng(seed), max(1, CHUNK // max(n, 1))
    for start in range(0, resamples, rows):
        yield rng.choice(n, size=(min(rows, resamples - start), n), replace=True)


def resampled(stats: np.ndarray, indices: np.ndarray, score) -> np.ndarray:
    """The score of each resample: the mean of column 0 (score None, in float64), or
    score(statistics summed in float32, as sacreBLEU sums them) per row of indices."""
    if score is None:
        return np.asarray(stats, np.float64)[indices, 0].mean(axis=1)
    stats = np.asarray(stats, np.float32)
    return np.array([score(stats[row].sum(0)) for row in indices], np.float64)


def paired_bootstrap(stats_a, stats_b, score=None, resamples: int = RESAMPLES, seed: int = SEED) -> dict:
    """stats_a, stats_b: [n, k] per-question statistics of two runs on the same questions;
    score(summed [k]) -> the metric, or None for the mean of one column. Returns the observed
    difference a - b, its 95% percentile interval and the shift test's two-sided p."""
    stats_a, stats_b = (np.asarray(s, np.float64).reshape(len(s), -1) for s in (stats_a, stats_b))
    observed = _score(stats_a, score) - _score(stats_b, score)
    diffs = np.concatenate([resampled(stats_a, rows, score) - resampled(stats_b, rows, score)
                            for rows in _index_chunks(len(stats_a), resamples, seed)])
    p = (int(np.sum(np.abs(diffs - observed) >= abs(observed))) + 1) / (resamples + 1)
    low, high = np.percentile(diffs, [2.5, 97.5])
    return {"difference": float(observed), "low": float(low), "high": float(high), "p": float(p)}


def _score(stats: np.ndarray, score) -> float:
    return float(stats[:, 0].mean()) if score is None else float(score(stats.sum(0)))


def adjust(pvalues: list[float | None], method: str = "holm") -> list[float | None]:
    """Holm's step-down or Benjamini-Hochberg's step-up adjusted p-values (None stays None:
    a cell not tested is not part of the family)."""
    if method not in CORRECTIONS:
        raise ValueError(f"correction {method!r}: expected one of {', '.join(CORRECTIONS)}")
    tested = [i for i, p in enumerate(pvalues) if p is not None]
    out: list[float | None] = list(pvalues)
    if method == "none" or not tested:
        return out
    m = len(tested)
    order = sorted(tested, key=lambda i: pvalues[i])
    if method == "holm":
        running = 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (m - rank) * pvalues[i]))
            out[i] = running
    else:
        running = 1.0
        for rank in range(m - 1, -1, -1):
            i = order[rank]
            running = min(running, m / (rank + 1) * pvalues[i])
            out[i] = running
    return out
