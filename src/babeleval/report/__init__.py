"""`babeleval report RUN_DIR... [--fertility F] [--output DIR]`: report.md and report.html
with PNG/SVG charts, from the results.json of one or more runs (models side by side).

Per task: the main metric per subset (language) with its standard error, a run per
column; every metric of the task; for each variant axis (choice order, prompt language,
bitext direction, demonstrations) the score per value with its spread and consistency,
and per language by value; with a fertility.json, tokens per word beside the score per
language, so tokenizer bloat shows next to the accuracy it may explain. Given several runs,
the models x languages leaderboard of `babeleval compare` comes first (with its
compare.json and CSVs), or the reason the runs cannot be compared."""
from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import BabelevalError
from ..pages.blocks import Heading, Paragraph, Table, html_page, markdown
from ..pages.runs import Run, load_fertility, load_runs
from .sections import commands, run_table, task_section


def build(runs: list[Run], fertility: dict | None, folder: Path, leaderboard: list = ()) -> list:
    blocks = [Heading(1, "babeleval report"),
              Paragraph(f"{len(runs)} run{'s' * (len(runs) > 1)}: " + ", ".join(f"{r.label} ({r.folder})" for r in runs)
                        + ". Cells are value ± standard error (analytic for means of per-question scores, bootstrap "
                          "for chrF/BLEU/TER); '-' where a run lacks the task or subset."),
              run_table(runs), commands(runs), *leaderboard]
    names = list(dict.fromkeys(name for r in runs for name in r.tasks))
    for index, name in enumerate(names):
        blocks += task_section(name, [r for r in runs if name in r.tasks], fertility, folder, f"t{index:02d}")
    return blocks


def write_report(folders: list[Path], output: Path, fertility: Path | None = None) -> list[Path]:
    runs = load_runs([Path(f) for f in folders])
    tokens = load_fertility(fertility)
    output = Path(output)
    try:
        output.mkdir(parents=True, exist_ok=True)
        probe = output / ".babeleval-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise BabelevalError(f"{output}: cannot write the report there ({exc.strerror})") from None
    figures = output / "figures"
    shutil.rmtree(figures, ignore_errors=True)  # charts of an earlier report with other tasks would linger
    figures.mkdir()
    from ..compare.output import report_section, write_tables

    section, comparison = report_section(runs, figures) if len(runs) > 1 else ([], None)  # models x languages
    blocks = build(runs, tokens, figures, section)
    tables = write_tables(comparison, output) if comparison else []
    md, page = output / "report.md", output / "report.html"
    md.write_text(markdown(blocks), encoding="utf-8")
    page.write_text(html_page("babeleval report: " + ", ".join(r.label for r in runs), blocks), encoding="utf-8")
    return [md, page, *tables, *sorted(figures.iterdir())]
