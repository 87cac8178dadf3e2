"""Records -> the numbers of results.json: per variant (subset x axis values), per subset
(language), per axis value, for the whole task; and, for every axis with several values,
its sensitivity: the spread of the main metric (max - min over the values) and, where
records name the option they chose, consistency (the share of questions whose chosen
option text is the same under every value of the axis, the other axes held fixed).
Sensitivity is an aggregation over records that carry their subset: no special cases."""
from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

SCHEMA_VERSION = 1


def _grouped(records: list[dict], key) -> dict[str, list[dict]]:
    groups = defaultdict(list)
    for r in records:
        groups[key(r)].append(r)
    return dict(groups)


def consistency(records: list[dict], axis: str) -> float | None:
    """Share of (subset, document, other axis values) whose chosen option is the same under
    every value of `axis`; None when the records choose no option."""
    if not records or "chosen" not in records[0]:
        return None
    values = {r["variant"][axis] for r in records}
    by_question = _grouped(records, lambda r: json.dumps([r["subset"], r["id"], {a: v for a, v in r["variant"].items()
                                                                                    if a != axis}], sort_keys=True))
    complete = [rs for rs in by_question.values() if {r["variant"][axis] for r in rs} == values]
    return float(np.mean([len({r["chosen"] for r in rs}) == 1 for rs in complete])) if complete else None


def _table(records: list[dict], aggregate, main_metric: str, rows: str, columns: str) -> dict:
    by_row = _grouped(records, lambda r: r["variant"][rows])
    return {row: {col: aggregate(cell).get(main_metric) for col, cell in _grouped(rs, lambda r: r["variant"][columns]).items()}
            for row, rs in by_row.items()}


def summarise(records: list[dict], aggregate, main_metric: str, axes: dict[str, list[str]], breakdown=(),
              axis_groups: dict | None = None) -> dict:
    """aggregate(records) -> metrics (the task kind's own rule, so corpus metrics such as chrF
    are computed over each group, never averaged from per-sample values). axis_groups pools
    values of an axis (ProverbEval: orders 1-3 "random" vs 4 "all-A" vs 5 "all-D"); every
    pair of axes gets a table of the main metric (prompt language x choice language), over
    all subsets and per subset."""
    out = {"metrics": aggregate(records)}
    out["main_score"] = out["metrics"].get(main_metric)
    subsets = _grouped(records, lambda r: r["subset"])
    out["subsets"] = {s: aggregate(rs) for s, rs in subsets.items()}
    if breakdown:
        out["breakdown"] = {f: {value: aggregate(rs) for value, rs in sorted(_grouped(records, lambda r: r["fields"][f]).items())}
                            for f in breakdown}
    if axes:
        out["variants"] = {k: aggregate(rs) for k, rs in _grouped(records, lambda r: r["key"]).items()}
        out["axes"] = {}
        for axis, values in axes.items():
            groups = _grouped(records, lambda r: r["variant"][axis])
            per_value = {v: aggregate(groups[v]) for v in values if v in groups}
            scores = [m.get(main_metric) for m in per_value.values() if m.get(main_metric) is not None]
            entry = {"values": per_value, "spread": float(max(scores) - min(scores)) if scores else None}
            if len(values) > 1:
                entry["consistency"] = consistency(records, axis)
                entry["per_subset_spread"] = {}
                for subset, rs in subsets.items():
                    sub = _grouped(rs, lambda r: r["variant"][axis])
                    ss = [aggregate(sub[v]).get(main_metric) for v in values if v in sub]
                    entry["per_subset_spread"][subset] = float(max(ss) - min(ss)) if ss else None
            if axis in (axis_groups or {}):
                entry["groups"] = {name: aggregate([r for r in records if r["variant"][axis] in map(str, members)])
                                   for name, members in axis_groups[axis].items()}
            out["axes"][axis] = entry
        several = [a for a, values in axes.items() if len(values) > 1]
        out["tables"] = {f"{a} x {b}": {"all": _table(records, aggregate, main_metric, a, b),
                                        **{s: _table(rs, aggregate, main_metric, a, b) for s, rs in subsets.items()}}
                         for i, a in enumerate(several) for b in several[i + 1:]}
    return out


def _number(value) -> str:
    return "-" if value is None or value != value else f"{value:.3f}"


def summary_lines(name: str, task: dict) -> list[str]:
    """A task's results in a few lines of text: its metrics, per subset the main metric, and
    per axis the main metric by value with the spread and consistency (the order table)."""
    metrics, main = task["metrics"], task["main_metric"]
    shown = "  ".join(f"{k} {_number(v)}" for k, v in metrics.items()
                      if not k.endswith("_stderr") and k != "n" and isinstance(v, float))
    lines = [f"{name}: {shown}  n={metrics['n']}"]
    if len(task["subsets"]) > 1:
        lines.append(f"  {main} by subset: " + "  ".join(f"{s} {_number(m.get(main))}" for s, m in task["subsets"].items()))
    for axis, entry in (task.get("axes") or {}).items():
        values = "  ".join(f"{v} {_number(m.get(main))}" for v, m in entry["values"].items())
        groups = "".join(f"  [{g} {_number(m.get(main))}]" for g, m in (entry.get("groups") or {}).items())
        extra = f"  spread {_number(entry['spread'])}" + (f"  consistency {_number(entry['consistency'])}"
                                                          if entry.get("consistency") is not None else "")
        lines.append(f"  {axis}: {values}{groups}{extra}")
    for title, table in (task.get("tables") or {}).items():  # the paper's prompt x choice language tables
        columns = list(dict.fromkeys(c for row in table["all"].values() for c in row))
        width = max(len(str(r)) for r in table["all"]) + 2
        lines.append(f"  {title} ({main}):")
        lines.append("    " + " " * width + "  ".join(f"{c:>8}" for c in columns))
        for row, cells in table["all"].items():
            lines.append(f"    {row:<{width}}" + "  ".join(f"{_number(cells.get(c)):>8}" for c in columns))
    searches = list((task.get("search") or {}).values())
    if searches:
        methods = sorted({s["method"] for s in searches})
        recalls = [s["recall@1"] for s in searches if "recall@1" in s]
        lines.append(f"  search: {', '.join(methods)}" + (f"; HNSW recall@1 vs exact search: min {min(recalls):.3f} over "
                                                         f"{len(recalls)} searches" if recalls else ""))
    return lines


def cannot_write(path: Path, exc: OSError):
    """A full disk or a lost permission, said in one line: what was already written is kept."""
    from .errors import BabelevalError

    return BabelevalError(f"{path}: cannot write ({exc.strerror or exc}); the records written so far are kept: free "
                          "space or fix the permissions, then run the same command to resume")


def write_json_atomic(path: Path, value) -> Path:
    """Temp file + rename: a reader never sees half a results.json."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a results file is as readable as any other
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(value, handle, indent=1, ensure_ascii=False, default=_jsonable)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise cannot_write(path, exc) from None
        raise
    return path


def _jsonable(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
