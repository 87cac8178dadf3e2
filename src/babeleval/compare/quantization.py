"""Which languages a quantization hurts: the runs of one model under several --quantize choices
(evaluate's output/<choice>/ folders), each compared with the unquantized run (`none`, else the
first) language by language, with compare's paired test on the questions both answered and
Holm's correction across a task's languages; languages ordered by their largest loss.
Written as quantization.json (every number) and quantization.md next to the runs."""
from __future__ import annotations

import json
from pathlib import Path

from ..pages.runs import load_runs
from . import compare


def quantization_effects(output: Path, choices: list[str], correction: str = "holm") -> dict:
    """{baseline, choices, tasks: {task: {metric, languages: [{cell, baseline, changes: {choice:
    {difference, low, high, p, p_corrected, n}}}]}}}, languages with the largest loss first."""
    base = "none" if "none" in choices else choices[0]
    runs = load_runs([Path(output) / c for c in choices])
    for run, choice in zip(runs, choices):
        run.label = choice
    comparison = compare([], correction=correction, runs=runs)
    tasks = {}
    for name, task in comparison["tasks"].items():
        if "differences" not in task:  # a task compare could not pair: its reason
            tasks[name] = task
            continue
        languages = {}
        for d in task["differences"]:
            if base not in (d["a"], d["b"]):
                continue
            # compare's difference is a - b: the change is other - baseline
            other, sign = (d["b"], -1) if d["a"] == base else (d["a"], 1)
            entry = languages.setdefault(d["cell"], {"cell": d["cell"], "subset": d["subset"], "changes": {}})
            entry["baseline"] = d["a_value"] if d["a"] == base else d["b_value"]
            difference = None if d["difference"] is None else sign * d["difference"]
            low, high = (None, None) if d["low"] is None else sorted((sign * d["low"], sign * d["high"]))
            entry["changes"][other] = {"difference": difference, "low": low, "high": high, "p": d["p"],
                                       "p_corrected": d["p_corrected"], "n": d["n"], "status": d["status"]}
        worst = lambda e: min((c["difference"] for c in e["changes"].values() if c["difference"] is not None), default=0.0)
        tasks[name] = {"metric": task["metric"], "correction": correction,
                       "languages": sorted(languages.values(), key=worst)}
    return {"baseline": base, "choices": choices, "tasks": tasks}


def markdown(effects: dict) -> str:
    """One table per task: a language per row (largest loss first), each choice's change against
    the baseline with its 95% interval and corrected p (* where below 0.05)."""
    others = [c for c in effects["choices"] if c != effects["baseline"]]
    lines = [f"# Which languages a quantization hurts (baseline: {effects['baseline']})", ""]
    for name, task in effects["tasks"].items():
        if "languages" not in task:
            lines += [f"## {name}", "", f"not compared: {task.get('reason', task)}", ""]
            continue
        lines += [f"## {name} ({task['metric']}; {task['correction']} across languages)", "",
                  "| language | " + effects["baseline"] + " | " + " | ".join(f"{c} change [95% CI] (p)" for c in others) + " |",
                  "|---" * (2 + len(others)) + "|"]
        for lang in task["languages"]:
            cells = []
            for c in others:
                ch = lang["changes"].get(c)
                if ch is None or ch["difference"] is None:
                    cells.append(ch["status"] if ch else "-")
                    continue
                if ch["p_corrected"] is None:  # too few shared questions to test: the change alone
                    cells.append(f"{ch['difference']:+.4f} ({ch.get('status') or 'not tested'})")
                    continue
                star = "*" if ch["p_corrected"] < 0.05 else ""
                cells.append(f"{ch['difference']:+.4f} [{ch['low']:+.4f}, {ch['high']:+.4f}] ({ch['p_corrected']:.3g}){star}")
            lines.append(f"| {lang['cell']} | {lang['baseline']:.4f} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def write_quantization_effects(output: Path, choices: list[str]) -> list[Path]:
    effects = quantization_effects(output, choices)
    paths = [Path(output) / "quantization.json", Path(output) / "quantization.md"]
    paths[0].write_text(json.dumps(effects, indent=1, ensure_ascii=False))
    paths[1].write_text(markdown(effects))
    return paths
