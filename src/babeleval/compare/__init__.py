"""`babeleval compare RUN_DIR RUN_DIR [...]`: is model A better than model B on Yoruba, or is
it noise? For every task, subset (language) and axis value that two or more runs share,
each pair of runs is compared on the questions both answered (matched by document id),
with a paired test fit for the metric (paired.py, stats.py), and the p-values of a pair
corrected across the task's languages. Then a models x languages leaderboard marks where
a run is tied with the language's best. Everything lands in compare.json (every number),
compare.md / compare.html, leaderboard.csv, differences.csv and a chart (output.py)."""
from __future__ import annotations

from itertools import combinations
from pathlib import Path

from ..errors import BabelevalError
from ..pages.runs import Run, load_runs
from .join import cells, check_same_documents, shared_ids, signature_refusal
from .leaderboard import leaderboard
from .paired import metric_kind, test, value
from .stats import CORRECTIONS, RESAMPLES, SEED, adjust

MIN_SHARED = 20
ALPHA = 0.05


def _metric_refusal(a: dict, b: dict, metric: str) -> str | None:
    """Another setting of the metric itself (chrF's word order, SQuAD's normalisation)."""
    from ..metrics.generation import GenerationMetric

    sa, sb = (t.get("metric_signatures") or {} for t in (a, b))
    names = sorted(n for n in set(sa) | set(sb) if sa.get(n) != sb.get(n) and metric in GenerationMetric(n).keys)
    return f"different metric signatures for {names[0]} ({sa.get(names[0])} vs {sb.get(names[0])})" if names else None


def _difference(cell, a: str, b: str, refusal: str | None, metric: str, kind: str, resamples: int, seed: int) -> dict:
    entry = {"cell": cell.label, "key": cell.key, "subset": cell.subset, "variant": cell.variant, "a": a, "b": b,
             "n": None, "a_value": None, "b_value": None, "difference": None, "low": None, "high": None, "p": None,
             "p_corrected": None, "test": None, "status": "tested"}
    refusal = refusal or signature_refusal(cell, a, b)
    if refusal:
        return {**entry, "status": f"refused: {refusal}"}
    ids = shared_ids(cell, a, b)
    ra, rb = [cell.records[a][i] for i in ids], [cell.records[b][i] for i in ids]
    entry.update(n=len(ids), only_in_a=len(cell.records[a]) - len(ids), only_in_b=len(cell.records[b]) - len(ids))
    if len(ids) < MIN_SHARED:
        va, vb = (value(r, metric, kind) if r else None for r in (ra, rb))
        return {**entry, "a_value": va, "b_value": vb, "difference": None if va is None else va - vb,
                "status": f"not tested: {len(ids)} shared questions (fewer than {MIN_SHARED})"}
    result = test(ra, rb, metric, kind, resamples, seed)
    return {**entry, **result, "a_value": value(ra, metric, kind), "b_value": value(rb, metric, kind)}


def compare_task(runs: list[Run], name: str, metric: str | None, correction: str, resamples: int, seed: int,
                 alpha: float = ALPHA) -> dict:
    runs = [r for r in runs if name in r.tasks]
    metric = metric or runs[0].tasks[name]["main_metric"]
    found = cells(runs, name)
    kind = metric_kind([r for c in found for rs in c.records.values() for r in rs.values()], metric, name)
    differences = []
    for a, b in combinations(runs, 2):
        refusal = _metric_refusal(a.tasks[name], b.tasks[name], metric)
        pair = [_difference(c, a.label, b.label, refusal, metric, kind, resamples, seed)
                for c in found if a.label in c.records and b.label in c.records]
        for entry, corrected in zip(pair, adjust([d["p"] for d in pair], correction)):
            entry["p_corrected"] = corrected
        differences += pair
    languages = {s: m for r in runs for s, m in (r.tasks[name].get("languages") or {}).items()}
    columns = [(c.label, c.key, c.subset, (languages.get(c.subset) or {}).get("language"),
                (languages.get(c.subset) or {}).get("script")) for c in found]
    board = leaderboard([(r.label, r.tasks[name]) for r in runs], columns, differences, metric, alpha)
    return {"metric": metric, "kind": kind, "correction": correction,
            "cells": [{"label": c[0], "key": c[1], "subset": c[2], "language": c[3], "script": c[4]} for c in columns],
            "differences": differences, "leaderboard": board}


def compare(folders: list[Path], task: str | None = None, metric: str | None = None, correction: str = "holm",
            resamples: int = RESAMPLES, seed: int = SEED, runs: list[Run] | None = None) -> dict:
    """The comparison as one dict (compare.json): runs, settings, and per task its cells,
    pairwise differences and leaderboard."""
    if correction not in CORRECTIONS:
        raise BabelevalError(f"--correction {correction!r}: expected one of {', '.join(CORRECTIONS)}")
    runs = runs or load_runs([Path(f) for f in folders])
    if len(runs) < 2:
        raise BabelevalError("give two or more run folders to compare")
    check_same_documents(runs)
    names = [n for n in dict.fromkeys(n for r in runs for n in r.tasks) if sum(n in r.tasks for r in runs) >= 2]
    if task is not None:
        if task not in names:
            raise BabelevalError(f"task {task!r} is not in two or more of the runs (shared: {', '.join(names) or 'none'})")
        names = [task]
    if not names:
        raise BabelevalError("the runs share no task: nothing to compare")
    return {"runs": [{"label": r.label, "folder": str(r.folder), "model": r.results["model"].get("source"),
                      "limit": r.results.get("limit"), "sample": r.results.get("sample"),
                      "command": r.results.get("command")} for r in runs],
            "settings": {"correction": correction, "alpha": ALPHA, "resamples": resamples, "seed": seed,
                         "min_shared": MIN_SHARED,
                         "interval": "95%: inverting McNemar's exact test (0/1 metrics), else the paired bootstrap's percentiles",
                         "family": "one pair of runs, one task: its cells (languages, axis values)"},
            "tasks": {n: _task_or_reason(runs, n, metric, correction, resamples, seed, len(names)) for n in names}}


def _task_or_reason(runs: list[Run], name: str, metric: str | None, correction: str, resamples: int, seed: int,
                    tasks: int) -> dict:
    """A task whose metric has no paired test (retrieval F1) is skipped with the reason when
    other tasks are compared; alone, the reason is the error."""
    try:
        return compare_task(runs, name, metric, correction, resamples, seed)
    except BabelevalError as exc:
        if tasks == 1:
            raise
        return {"skipped": str(exc)}
