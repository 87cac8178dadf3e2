"""A report's sections: the runs compared, and per task its tables and charts."""
from __future__ import annotations

import math
from pathlib import Path

from ..pages.blocks import Figure, Heading, Paragraph, Table, number
from ..pages.plots import bar_chart, bars_beside_bars
from ..pages.runs import Run

HIDDEN = ("_stderr", "_ci95")


def cell(metrics: dict | None, key: str) -> str:
    if not metrics or key not in metrics:
        return "-"
    err = metrics.get(f"{key}_stderr")
    return number(metrics[key]) + (f" ± {number(err)}" if err is not None and not math.isnan(err) else "")


def pair(metrics: dict | None, key: str) -> tuple:
    return ((metrics or {}).get(key), (metrics or {}).get(f"{key}_stderr"))


def run_table(runs: list[Run]) -> Table:
    rows = []
    for r in runs:
        res, model = r.results, r.results["model"]
        params = f"{model['params'] / 1e6:.1f}M" if model.get("params") else "-"
        rows.append([r.label, model.get("arch", "-"), params, model.get("dtype", "-"), res.get("babeleval", "-"),
                     (res.get("git_commit") or "-")[:12], str(res.get("seconds", "-")), ", ".join(r.tasks)])
    return Table(["run", "arch", "params", "dtype", "babeleval", "commit", "seconds", "tasks"], rows)


def commands(runs: list[Run]) -> Paragraph:
    return Paragraph("Commands: " + "; ".join(f"{r.label}: `{' '.join(r.results.get('command') or ['-'])}`"
                                              for r in runs))


def _figure(paths: list[Path], caption: str) -> Figure:
    return Figure(f"{paths[0].parent.name}/{paths[0].name}", caption)


def _variant(task: dict, subset: str, axis: str, value: str) -> dict | None:
    """The metrics of one subset under one axis value (only when that axis is the task's only one)."""
    return (task.get("variants") or {}).get(f"{subset}|{axis}={value}")


def task_section(name: str, runs: list[Run], fertility: dict | None, folder: Path, stem: str) -> list:
    tasks = [r.tasks[name] for r in runs]
    first, labels = tasks[0], [r.label for r in runs]
    main = first["main_metric"]
    blocks = [Heading(2, name),
              Paragraph(f"{first['kind']}; main metric {main}; protocol: {first.get('protocol') or '-'}; "
                        f"source: {first.get('source') or '-'}; version {first.get('version', '-')}; "
                        + "; ".join(f"{label}: signature {t.get('signature', '-')}, n = {t['metrics'].get('n', '-')}"
                                    for label, t in zip(labels, tasks)))]
    subsets = list(dict.fromkeys(s for t in tasks for s in t["subsets"]))
    languages = {s: info for t in tasks for s, info in (t.get("languages") or {}).items()}
    rows = [[s, (languages.get(s) or {}).get("language", "-"), (languages.get(s) or {}).get("script", "-"),
             *[cell(t["subsets"].get(s), main) for t in tasks]] for s in subsets]
    rows.append(["all", "", "", *[cell(t["metrics"], main) for t in tasks]])
    blocks.append(Table(["subset", "language", "script", *labels], rows))
    if len(subsets) > 1 or len(runs) > 1:
        paths = bar_chart(subsets, {l: [pair(t["subsets"].get(s), main) for s in subsets] for l, t in zip(labels, tasks)},
                          main, f"{name}: {main} per subset", folder / f"{stem}-subsets")
        blocks.append(_figure(paths, f"{name}: {main} per subset, one bar per run, error bars one standard error"))
    keys = [k for k in dict.fromkeys(k for t in tasks for k in t["metrics"]) if not k.endswith(HIDDEN) and k != "n"]
    blocks += [Heading(3, "All metrics"), Table(["metric", *labels], [[k, *[cell(t["metrics"], k) for t in tasks]]
                                                                        for k in keys])]
    blocks += _axes(name, tasks, labels, main, subsets, folder, stem)
    if fertility:
        blocks += _fertility(name, tasks, labels, main, subsets, languages, fertility, folder, stem)
    searches = [f"{label}: " + ", ".join(sorted({s['method'] for s in t['search'].values()}))
                + (f" (HNSW recall@1 vs exact ≥ {min(rs):.3f})" if (rs := [s['recall@1'] for s in t['search'].values()
                                                                         if 'recall@1' in s]) else "")
                for label, t in zip(labels, tasks) if t.get("search")]
    if searches:
        blocks.append(Paragraph("Nearest-neighbour search: " + "; ".join(searches) + "."))
    return blocks


def _axes(name, tasks, labels, main, subsets, folder, stem) -> list:
    blocks = []
    axes = list(dict.fromkeys(a for t in tasks for a, e in (t.get("axes") or {}).items() if len(e["values"]) > 1))
    for a_index, axis in enumerate(axes):
        entries = [(t.get("axes") or {}).get(axis) for t in tasks]
        values = list(dict.fromkeys(v for e in entries if e for v in e["values"]))
        rows = [[v, *[cell((e or {}).get("values", {}).get(v), main) for e in entries]] for v in values]
        groups = list(dict.fromkeys(g for e in entries if e for g in e.get("groups") or {}))
        rows += [[f"[{g}]", *[cell(((e or {}).get("groups") or {}).get(g), main) for e in entries]] for g in groups]
        rows.append(["spread (max - min)", *[number((e or {}).get("spread")) for e in entries]])
        rows.append(["consistency", *[number((e or {}).get("consistency")) for e in entries]])
        blocks += [Heading(3, f"{axis} ({main})"),
                   Paragraph(f"{main} under each {axis}; spread = best minus worst; consistency = share of questions "
                             f"whose chosen option is the same under every {axis}."),
                   Table([axis, *labels], rows)]
        for label, t in zip(labels, tasks):
            single = len(t.get("axes") or {}) == 1
            if single and len(subsets) > 1:
                series = {v: [pair(_variant(t, s, axis, v), main) for s in subsets] for v in values}
                paths = bar_chart(subsets, series, main, f"{name} ({label}): {main} per subset and {axis}",
                                  folder / f"{stem}-axis{a_index}-{labels.index(label)}")
                blocks.append(_figure(paths, f"{name}, {label}: {main} per subset, one bar per {axis}"))
        if not all(len(t.get("axes") or {}) == 1 for t in tasks) or len(subsets) == 1:
            series = {l: [pair((e or {}).get("values", {}).get(v), main) for v in values] for l, e in zip(labels, entries)}
            paths = bar_chart(values, series, main, f"{name}: {main} per {axis}", folder / f"{stem}-axis{a_index}")
            blocks.append(_figure(paths, f"{name}: {main} per {axis}, one bar per run"))
    for label, t in zip(labels, tasks):  # two axes at once: ProverbEval's prompt language x choice language
        for title, table in (t.get("tables") or {}).items():
            columns = list(dict.fromkeys(c for row in table["all"].values() for c in row))
            blocks += [Heading(4, f"{title} ({label}, {main})"),
                       Table([title, *columns], [[r, *[number(cells.get(c)) for c in columns]]
                                                 for r, cells in table["all"].items()])]
    return blocks


def _fertility_key(subset: str, info: dict | None, fertility: dict) -> str | None:
    """The fertility file's name for a subset: the subset itself (eng_Latn), its language (eng),
    or the subset's part before the script (eng)."""
    for key in (subset, (info or {}).get("language"), subset.split("_")[0]):
        if key and all(key in langs for langs in fertility.values()):
            return key
    return None


def _fertility(name, tasks, labels, main, subsets, languages, fertility, folder, stem) -> list:
    keys = {s: _fertility_key(s, languages.get(s), fertility) for s in subsets}
    matched = [s for s in subsets if keys[s]]
    if not matched:
        return [Paragraph(f"No fertility for the languages of {name} ({', '.join(subsets)}) in the fertility file.")]
    tokenizers = list(fertility)
    rows = [[s, *[cell(t["subsets"].get(s), main) for t in tasks],
             *[number((fertility[k].get(keys[s]) or {}).get("fertility"), 2) + " / " +
               number((fertility[k].get(keys[s]) or {}).get("token_tax"), 2) for k in tokenizers]] for s in matched]
    paths = bars_beside_bars(matched, {l: [pair(t["subsets"].get(s), main) for s in matched] for l, t in zip(labels, tasks)},
                             main, {k: [((fertility[k].get(keys[s]) or {}).get("fertility"), None) for s in matched]
                                    for k in tokenizers},
                             "tokens per word (fertility)", f"{name}: {main} beside tokenizer fertility",
                             folder / f"{stem}-fertility")
    return [Heading(3, f"Tokens per word beside {main}"),
            Paragraph("Fertility = subword tokens per word; token tax = tokens for the same text relative to English "
                      "(from the fertility file)."),
            Table(["subset", *labels, *[f"{k} fertility / tax" for k in tokenizers]], rows),
            _figure(paths, f"{name}: {main} per language (left) beside tokens per word per tokenizer (right)")]
