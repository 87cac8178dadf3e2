"""The analytic standard error of a mean of per-sample scores (0/1 accuracies, 0..100
sentence scores): sample std (ddof 1) / sqrt(n), as lm-eval reports it."""
from __future__ import annotations

import numpy as np


def mean_and_stderr(name: str, values) -> dict[str, float]:
    values = np.asarray(values, float)
    return {name: float(values.mean()) if len(values) else float("nan"),
            f"{name}_stderr": float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan")}
