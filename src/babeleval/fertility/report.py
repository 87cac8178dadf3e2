"""The audit's outputs: fertility.json, fertility.md (a table per language, tokenizers as
columns, plus one per script) and fertility.png / fertility.svg (per language, one dot per
tokenizer, languages ordered by their mean fertility)."""
from __future__ import annotations

import json
from pathlib import Path

from .segment import RULE


def _cell(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def markdown(results: dict[str, dict], corpus: str) -> str:
    names = list(results)
    first = results[names[0]]
    lines = [f"# Tokenizer fertility: {corpus}", "", f"Word segmentation: {RULE}.", "",
             "Fertility = subword tokens per word (each word tokenised alone); in brackets the token tax, tokens for "
             "the same text relative to English.", "",
             "| language | script | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for lang, stats in first["languages"].items():
        cells = [f"{_cell(results[n]['languages'][lang]['fertility'])} "
                 f"({_cell(results[n]['languages'][lang].get('token_tax'))})" for n in names]
        lines.append(f"| {lang} | {stats['script']} | " + " | ".join(cells) + " |")
    lines += ["", "## Per script (fertility / continued words / bytes per token)", "",
              "| script | languages | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for script, stats in first["scripts"].items():
        cells = [f"{_cell(results[n]['scripts'][script]['fertility'])} / "
                 f"{_cell(results[n]['scripts'][script]['continued_words'])} / "
                 f"{_cell(results[n]['scripts'][script]['bytes_per_token'], 1)}" for n in names]
        lines.append(f"| {script} | {stats['languages']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def chart(results: dict[str, dict], path_stem: Path, metric: str = "fertility") -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "babeleval"
    import matplotlib.pyplot as plt

    names = list(results)
    langs = list(results[names[0]]["languages"])
    value = lambda n, l: results[n]["languages"][l][metric] or 0.0
    langs.sort(key=lambda l: sum(value(n, l) for n in names) / len(names))
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.16 * len(langs)))
    for i, name in enumerate(names):
        ax.scatter([value(name, l) for l in langs], range(len(langs)), s=14, label=name,
                   marker="o^sDvP*X"[i % 8], alpha=0.8)
    ax.set_yticks(range(len(langs)), [f"{l} ({results[names[0]]['languages'][l]['script']})" for l in langs],
                  fontsize=6)
    ax.set_ylim(-1, len(langs))
    ax.set_xlabel(f"{metric} (lower is better)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    paths = [path_stem.with_suffix(".png"), path_stem.with_suffix(".svg")]
    for path in paths:  # no timestamps: re-running an audit rewrites identical files
        fig.savefig(path, dpi=130, metadata={"Date": None} if path.suffix == ".svg" else {"Software": None})
    plt.close(fig)
    return paths


def write_report(results: dict[str, dict], corpus: str, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    json_path = folder / "fertility.json"
    json_path.write_text(json.dumps({"corpus": corpus, "segmentation": RULE, "tokenizers": results}, indent=1,
                                    ensure_ascii=False))
    md_path = folder / "fertility.md"
    md_path.write_text(markdown(results, corpus), encoding="utf-8")
    return [json_path, md_path, *chart(results, folder / "fertility")]
