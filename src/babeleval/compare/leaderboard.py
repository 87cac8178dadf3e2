"""The models x languages table: per language each run's score with its standard error and
95% interval (the run's own results.json numbers), its rank, and whether its difference
to the language's best run is significant after correction. A run whose paired test
against the best is not significant is "tied with the best": a reader should not say it
is worse there."""
from __future__ import annotations

import math

from .paired import LOWER_IS_BETTER

Z95 = 1.959963984540054


def _cell_metrics(task: dict, key: str, subset: str) -> dict | None:
    return (task.get("variants") or {}).get(key) or (task["subsets"].get(subset) if key == subset else None)


def score(task: dict, key: str, subset: str, metric: str) -> dict | None:
    """value, stderr and the 95% interval of a cell, from a run's results.json."""
    m = _cell_metrics(task, key, subset)
    if not m or m.get(metric) is None:
        return None
    stderr = m.get(f"{metric}_stderr")
    half = m.get(f"{metric}_ci95", Z95 * stderr if stderr is not None else None)
    if half is not None and isinstance(half, float) and math.isnan(half):
        half = None
    v = m[metric]
    return {"value": v, "stderr": stderr, "low": None if half is None else v - half,
            "high": None if half is None else v + half, "n": m.get("n")}


def _pair(differences: list[dict], cell: str, a: str, b: str) -> dict | None:
    return next((d for d in differences if d["cell"] == cell and {d["a"], d["b"]} == {a, b}), None)


def _ranks(values: dict[str, float], lower_better: bool) -> dict[str, int]:
    """Competition ranking (1, 2, 2, 4): equal values share a rank."""
    sign = 1 if lower_better else -1
    return {label: 1 + sum(sign * other < sign * v for other in values.values()) for label, v in values.items()}


def leaderboard(runs: list, cells: list, differences: list[dict], metric: str, alpha: float) -> dict:
    """runs: [(label, task results)]; cells: [(label, key, subset, language, script)]."""
    lower = metric in LOWER_IS_BETTER
    rows = {label: {"run": label, "cells": {}} for label, _ in runs}
    for cell, key, subset, _, _ in cells:
        scores = {label: s for label, task in runs if (s := score(task, key, subset, metric)) is not None}
        ranks = _ranks({label: s["value"] for label, s in scores.items()}, lower)
        best = next((label for label, r in ranks.items() if r == 1), None)
        for label, s in scores.items():
            s["rank"] = ranks[label]
            if ranks[label] == 1:
                s["tied_with_best"], s["p_vs_best"] = True, None
            else:
                d = _pair(differences, cell, best, label)
                tested = d is not None and d.get("p_corrected") is not None
                s["p_vs_best"] = d["p_corrected"] if tested else None
                s["tied_with_best"] = (d["p_corrected"] >= alpha) if tested else None
            rows[label]["cells"][cell] = s
    for label, task in runs:
        row = rows[label]
        values = [row["cells"][c[0]]["value"] for c in cells if c[0] in row["cells"]]
        complete = len(values) == len(cells)
        row["macro"] = sum(values) / len(values) if complete else None
        row["micro"] = task["metrics"].get(metric) if complete and set(task["subsets"]) == {c[2] for c in cells} else None
    return {"metric": metric, "lower_is_better": lower, "columns": [c[0] for c in cells], "rows": list(rows.values())}
