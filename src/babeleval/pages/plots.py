"""The report's charts (matplotlib, Agg): horizontal grouped bars, one group per category
(a language, an axis value), one bar per series (a run, a choice order, a tokenizer),
error bars where a standard error is known. Written as PNG (for the page) and SVG, with
no timestamps, so the same results give the same files."""
from __future__ import annotations

import math
from pathlib import Path

Series = dict[str, list[tuple[float | None, float | None]]]  # name -> per category (value, stderr)


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "babeleval"
    import matplotlib.pyplot as plt

    return plt


def _finite(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def draw_bars(ax, categories: list[str], series: Series, xlabel: str) -> None:
    height = 0.8 / max(len(series), 1)
    for k, (name, cells) in enumerate(series.items()):
        ys = [i - 0.4 + height * (k + 0.5) for i in range(len(categories))]
        values = [v if _finite(v) else 0.0 for v, _ in cells]
        errors = [e if _finite(e) else 0.0 for _, e in cells]
        ax.barh(ys, values, height=height * 0.92, xerr=errors if any(errors) else None, label=name,
                error_kw={"elinewidth": 0.8, "capsize": 1.5, "alpha": 0.7})
    ax.set_yticks(range(len(categories)), categories, fontsize=7 if len(categories) > 12 else 8)
    ax.set_ylim(len(categories) - 0.5, -0.5)  # first category on top, as in the tables
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize=7, loc="best")


def save_figure(fig, stem: Path) -> list[Path]:
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    fig.tight_layout()
    for path in paths:
        fig.savefig(path, dpi=110, metadata={"Date": None} if path.suffix == ".svg" else {"Software": None})
    return paths


def _height(categories: list[str], series: int) -> float:
    return 1.4 + len(categories) * max(0.22, 0.11 * series)


def bar_chart(categories: list[str], series: Series, xlabel: str, title: str, stem: Path) -> list[Path]:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, _height(categories, len(series))))
    draw_bars(ax, categories, series, xlabel)
    ax.set_title(title, fontsize=9)
    paths = save_figure(fig, stem)
    plt.close(fig)
    return paths


def bars_beside_bars(categories: list[str], left: Series, left_label: str, right: Series, right_label: str,
                     title: str, stem: Path) -> list[Path]:
    """Two panels sharing the categories: the score per language beside tokens per word."""
    plt = pyplot()
    rows = max(len(left), len(right))
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, _height(categories, rows)), sharey=True)
    draw_bars(a, categories, left, left_label)
    draw_bars(b, categories, right, right_label)
    fig.suptitle(title, fontsize=9)
    paths = save_figure(fig, stem)
    plt.close(fig)
    return paths
