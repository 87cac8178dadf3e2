"""A comparison written out: compare.json (every number), the leaderboard and the paired
differences as report blocks (so compare.md and compare.html are the report's Markdown and
page, and `babeleval report` can show the same section), leaderboard.csv and
differences.csv for spreadsheets, and per task a chart of each run's score per language
with its 95% interval."""
from __future__ import annotations

import csv
import shutil
from pathlib import Path

from ..errors import BabelevalError
from ..pages.blocks import Figure, Heading, Paragraph, Table, html_page, markdown, number
from ..pages.plots import bar_chart, pyplot, save_figure
from ..results import write_json_atomic
from .paired import TESTS

TIED, UNTESTED = "≈", "?"
NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "none"}
AFTER = {"holm": "after Holm correction across the task's languages",
         "bh": "after Benjamini-Hochberg correction across the task's languages", "none": "without correction"}


def _score_cell(s: dict | None) -> str:
    if s is None:
        return "-"
    mark = "" if s["rank"] == 1 else (TIED if s["tied_with_best"] else UNTESTED if s["tied_with_best"] is None else "")
    err = f" ± {number(s['stderr'])}" if s.get("stderr") is not None else ""
    return f"{number(s['value'])}{err} #{s['rank']}{' ' + mark if mark else ''}"


def leaderboard_table(board: dict) -> Table:
    header = ["run", *board["columns"], "macro", "micro"]
    rows = [[row["run"], *(_score_cell(row["cells"].get(c)) for c in board["columns"]), number(row["macro"]),
             number(row["micro"])] for row in board["rows"]]
    return Table(header, rows)


def differences_table(differences: list[dict], correction: str) -> Table:
    rows = [[d["cell"], d["a"], d["b"], str(d["n"] if d["n"] is not None else "-"), number(d["a_value"]),
             number(d["b_value"]), number(d["difference"]),
             f"[{number(d['low'])}, {number(d['high'])}]" if d["low"] is not None else "-",
             _p(d["p"]), _p(d["p_corrected"]), d["test"] or d["status"]] for d in differences]
    return Table(["cell", "A", "B", "n", "A score", "B score", "A - B", "95% interval", "p", f"p ({NAMES[correction]})", "test"],
                 rows)


def _p(p: float | None) -> str:
    return "-" if p is None else f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def _chart(name: str, task: dict, folder: Path, stem: str) -> Figure:
    board = task["leaderboard"]
    series = {}
    for row in board["rows"]:
        cells = [row["cells"].get(c) for c in board["columns"]]
        series[row["run"]] = [(s["value"], None if s["high"] is None else s["high"] - s["value"]) if s else (None, None)
                              for s in cells]
    paths = bar_chart(board["columns"], series, f"{board['metric']} (error bars: 95% interval)",
                      f"{name}: {board['metric']} per language, 95% intervals", folder / stem)
    return Figure(f"{folder.name}/{paths[0].name}", f"{name}: {board['metric']} per language and run, error bars the "
                                                    "95% interval of each run's score")


def _difference_chart(name: str, task: dict, folder: Path, stem: str) -> Figure | None:
    """Each pair's difference per cell with its 95% interval and a line at zero (the
    intervals are not corrected for the number of languages; the table's corrected p is)."""
    tested = [d for d in task["differences"] if d["low"] is not None]
    if not tested:
        return None
    cells = list(dict.fromkeys(d["cell"] for d in tested))
    pairs = list(dict.fromkeys((d["a"], d["b"]) for d in tested))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 1.4 + len(cells) * max(0.25, 0.12 * len(pairs))))
    for k, pair in enumerate(pairs):
        rows = [d for d in tested if (d["a"], d["b"]) == pair]
        ys = [cells.index(d["cell"]) + (k - (len(pairs) - 1) / 2) * 0.8 / len(pairs) for d in rows]
        xs = [d["difference"] for d in rows]
        ax.errorbar(xs, ys, xerr=[[x - d["low"] for x, d in zip(xs, rows)], [d["high"] - x for x, d in zip(xs, rows)]],
                    fmt="o", capsize=2, label=f"{pair[0]} - {pair[1]}")
    ax.axvline(0, color="#555", linewidth=0.8)
    ax.set_yticks(range(len(cells)), cells, fontsize=8)
    ax.set_ylim(len(cells) - 0.5, -0.5)
    ax.set_xlabel(f"difference in {task['metric']} (95% interval)")
    ax.set_title(f"{name}: paired differences", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    paths = save_figure(fig, folder / stem)
    plt.close(fig)
    return Figure(f"{folder.name}/{paths[0].name}",
                  f"{name}: each pair's difference per language with its 95% interval (uncorrected); one that crosses "
                  "zero is not significant even before correction")


def _method(task: dict, settings: dict) -> str:
    if task["kind"] == "binary":
        return ("On the questions both runs answered: McNemar's exact test (binomial on the discordant questions) "
                "for p, and the 95% interval that inverts it (Clopper-Pearson on the discordant questions won by A).")
    return (f"On the questions both runs answered: {TESTS[task['kind']]}, {settings['resamples']:,} resamples (seed "
            f"{settings['seed']}), the same questions drawn for both runs; p is the two-sided shift test, the 95% "
            "interval the 2.5-97.5 percentile of the resampled differences.")


def _significance(task: dict) -> Paragraph:
    """What a reader may and may not claim, in words."""
    tested = [d for d in task["differences"] if d["p_corrected"] is not None]
    significant = [d for d in tested if d["p_corrected"] < 0.05]
    said = "; ".join(f"{d['cell']}: {d['a'] if d['difference'] > 0 else d['b']} higher by {abs(d['difference']):.3f} "
                     f"(p {_p(d['p_corrected'])})" for d in significant)
    untested = [d for d in task["differences"] if d["p_corrected"] is None]
    return Paragraph(f"{len(significant)} of {len(tested)} paired differences significant {AFTER[task['correction']]} "
                     f"(p < 0.05)" + (f": {said}" if said else "") + "."
                     + (" Not tested: " + "; ".join(f"{d['cell']} {d['a']} vs {d['b']} ({d['status']})" for d in untested)
                        + "." if untested else ""))


def blocks(comparison: dict, folder: Path, level: int = 2, prefix: str = "c") -> list:
    """Per task: the leaderboard, its chart, the paired differences and what is significant."""
    out = []
    for index, (name, task) in enumerate(comparison["tasks"].items()):
        if "skipped" in task:
            out += [Heading(level, name), Paragraph(f"Not compared: {task['skipped']}.")]
            continue
        out += [Heading(level, f"{name}: leaderboard ({task['leaderboard']['metric']})"),
                Paragraph(f"Cells: score ± standard error #rank; {TIED} tied with the language's best (their paired "
                          f"difference is not significant {AFTER[task['correction']]}, p >= 0.05); {UNTESTED} not "
                          "tested (too few shared questions, or refused). macro: mean over languages; micro: over all "
                          "questions."),
                leaderboard_table(task["leaderboard"]),
                _chart(name, task, folder, f"{prefix}{index:02d}-leaderboard"),
                Heading(level + 1, f"{name}: paired differences"),
                Paragraph(_method(task, comparison["settings"])),
                differences_table(task["differences"], task["correction"]),
                *filter(None, [_difference_chart(name, task, folder, f"{prefix}{index:02d}-differences")]),
                _significance(task)]
    return out


def _csv(path: Path, header: list[str], rows: list[list]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _compared(comparison: dict) -> list[tuple[str, dict]]:
    return [(name, task) for name, task in comparison["tasks"].items() if "skipped" not in task]


def leaderboard_rows(comparison: dict) -> list[list]:
    rows = []
    for name, task in _compared(comparison):
        board, cells = task["leaderboard"], {c["label"]: c for c in task["cells"]}
        for row in board["rows"]:
            for column in board["columns"]:
                s = row["cells"].get(column)
                if s:
                    c = cells[column]
                    rows.append([name, board["metric"], column, c["subset"], c["language"], c["script"], row["run"],
                                 s["value"], s["stderr"], s["low"], s["high"], s["n"], s["rank"], s["tied_with_best"],
                                 s["p_vs_best"]])
            for summary in ("macro", "micro"):
                rows.append([name, board["metric"], summary, "", "", "", row["run"], row[summary], *[""] * 7])
    return rows


LEADERBOARD_CSV = ["task", "metric", "column", "subset", "language", "script", "run", "value", "stderr", "ci_low",
                   "ci_high", "n", "rank", "tied_with_best", "p_vs_best_corrected"]
DIFFERENCES_CSV = ["task", "metric", "cell", "a", "b", "n", "a_value", "b_value", "difference", "ci_low", "ci_high",
                   "p", "p_corrected", "test", "status"]


def write_tables(comparison: dict, output: Path) -> list[Path]:
    """compare.json, leaderboard.csv, differences.csv."""
    paths = [write_json_atomic(output / "compare.json", comparison), output / "leaderboard.csv", output / "differences.csv"]
    _csv(paths[1], LEADERBOARD_CSV, leaderboard_rows(comparison))
    _csv(paths[2], DIFFERENCES_CSV, [[name, task["metric"], d["cell"], d["a"], d["b"], d["n"], d["a_value"], d["b_value"],
                                      d["difference"], d["low"], d["high"], d["p"], d["p_corrected"], d["test"], d["status"]]
                                     for name, task in _compared(comparison) for d in task["differences"]])
    return paths


def write_comparison(comparison: dict, output: Path) -> list[Path]:
    output = Path(output)
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BabelevalError(f"{output}: cannot create the output folder ({exc.strerror})") from None
    figures = output / "figures"
    shutil.rmtree(figures, ignore_errors=True)
    figures.mkdir()
    runs = comparison["runs"]
    page = [Heading(1, "babeleval compare"),
            Paragraph(f"{len(runs)} runs: " + ", ".join(f"{r['label']} ({r['folder']})" for r in runs)
                      + f"; limit {runs[0]['limit']}, sample {runs[0]['sample']}."),
            *blocks(comparison, figures)]
    md, html = output / "compare.md", output / "compare.html"
    md.write_text(markdown(page), encoding="utf-8")
    html.write_text(html_page("babeleval compare: " + ", ".join(r["label"] for r in runs), page), encoding="utf-8")
    return [md, html, *write_tables(comparison, output), *sorted(figures.iterdir())]


def report_section(runs: list, folder: Path) -> tuple[list, dict | None]:
    """The leaderboard section `babeleval report` shows for several runs, and its comparison;
    runs that cannot be compared (other --limit, no shared task, no samples file) get the
    reason in one paragraph, and the report goes on."""
    from . import compare

    heading = Heading(2, "Leaderboard (babeleval compare)")
    try:
        comparison = compare([], runs=runs)
    except BabelevalError as exc:
        return [heading, Paragraph(f"No leaderboard: {exc}.")], None
    return [heading, *blocks(comparison, folder, level=3)], comparison
