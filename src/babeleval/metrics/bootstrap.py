"""Standard errors of corpus metrics (chrF, BLEU, TER) by bootstrap resampling, drawn as
sacreBLEU draws them: numpy's default_rng(12345), n x n indices with replacement in one
call, per-segment statistics summed in float32, the score recomputed from each resample.
The stderr is the standard deviation of the resampled scores (lm-eval's bootstrap
stderr); ci95 is sacreBLEU's half-width of the 2.5-97.5 percentile interval. The same
records give the same numbers on every run and machine."""
from __future__ import annotations

import numpy as np

RESAMPLES = 1000
SEED = 12345
SIGNATURE = f"bootstrap:{RESAMPLES}|seed:{SEED}|resample:segments"


def resampled_scores(stats: np.ndarray, score, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """stats: [segments, k] per-segment statistics; score(summed [k]) -> float."""
    stats = np.asarray(stats, np.float32)
    rng = np.random.default_rng(seed)
    indices = rng.choice(len(stats), size=(resamples, len(stats)), replace=True)
    return np.array([score(stats[row].sum(0)) for row in indices], np.float64)


def interval(scores: np.ndarray) -> dict[str, float]:
    """stderr (std of the resampled scores) and sacreBLEU's 95% half-width."""
    ordered = np.sort(scores)
    lower = len(ordered) // 40
    return {"stderr": float(ordered.std(ddof=1)),
            "ci95": float(0.5 * (ordered[len(ordered) - lower - 1] - ordered[lower]))}


def bootstrap(stats: np.ndarray, score, resamples: int = RESAMPLES) -> dict[str, float]:
    if len(stats) < 2:
        return {"stderr": float("nan"), "ci95": float("nan")}
    return interval(resampled_scores(stats, score, resamples))
