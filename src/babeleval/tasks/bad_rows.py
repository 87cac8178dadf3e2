"""Rows that are not clean but can still be scored: two options with the same text, an empty
option, a target that names no option. Real benchmark files have a few (a figurative-inference
set: 4 of 1,000 Hindi rows, 15 of 1,198 Kannada rows with two identical endings); refusing the
whole benchmark for them loses the language, while lm-evaluation-harness scores them. So each
problem has a policy (task field `bad_rows:`): keep (the default) scores the row exactly as
lm-eval does, flags its record and counts it; skip leaves it out and counts it; error stops
with the row's file:line. A file that cannot be read (broken JSON, bad bytes) is always an error.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import BabelevalError
from .config import BadRows

HOW_TO = ("set bad_rows: {{{problem}: keep}} (score it as lm-eval does) or skip in the task file "
          "(or --bad-rows {problem}=keep)")


def option_problems(options: list[str], gold: int | None, target) -> list[tuple[str, str]]:
    """(problem, what is wrong) for one row; gold None: the target named no option."""
    out = []
    empty = [i + 1 for i, o in enumerate(options) if not o.strip()]
    if empty:
        out.append(("empty_choice", f"choice {empty[0]} of {len(options)} is empty"))
    first: dict[str, int] = {}
    for i, o in enumerate(options):
        if o.strip() and o.strip() in first:
            out.append(("duplicate_choices", f"choices {first[o.strip()] + 1} and {i + 1} are the same text {o.strip()!r} "
                                             "(duplicate choices make the answer ambiguous)"))
            break
        first.setdefault(o.strip(), i)
    if gold is None:
        out.append(("unknown_target", f"target {target!r} is not an option: expected an index 0..{len(options) - 1}, "
                                      f"a label, option1..option{len(options)}, or an option's text"))
    return out


def lm_eval_problems(task, doc: dict) -> tuple[list[tuple[str, str]], bool]:
    """An lm-eval multiple-choice document's problems (its doc_to_choice and doc_to_target, read
    as process_results reads them) and whether it can be scored at all (an empty option after
    an empty target delimiter is an empty continuation): the same policy for `lm-eval:` tasks."""
    choices = [str(c) for c in task.doc_to_choice(doc)]
    target = task.doc_to_text(doc) if task.multiple_input else task.doc_to_target(doc)
    valid = lambda t: isinstance(t, int) and not isinstance(t, bool) and 0 <= t < len(choices)
    if isinstance(target, list):
        gold = 0 if all(valid(t) for t in target) else None
    elif isinstance(target, str):
        gold = choices.index(target) if target in choices else None
    else:
        gold = target if valid(target) else None
    delimiter = task.config.target_delimiter or ""
    return option_problems(choices, gold, target), all(delimiter + c for c in choices)


@dataclass
class BadRowLog:
    """The rows a variant kept or skipped: (problem, kept, file:line origin), in file order."""

    rows: list[tuple[str, bool, str]] = field(default_factory=list)

    def decide(self, policy: BadRows, problems: list[tuple[str, str]], origin: str, scorable: bool = True) -> bool:
        """True: score the row. Raises where a problem's policy is error; a row that cannot be
        scored at all (scorable False) is skipped even where the policy keeps it."""
        for problem, message in problems:
            if getattr(policy, problem) == "error":
                raise BabelevalError(f"{origin}: {message}; {HOW_TO.format(problem=problem)}")
        keep = scorable and all(getattr(policy, problem) == "keep" for problem, _ in problems)
        self.rows += [(problem, keep, origin) for problem, _ in problems]
        return keep


def summarise_bad_rows(logs: dict[str, list[BadRowLog]]) -> dict:
    """{subset: {problem: {kept, skipped, first}}} over a subset's variants, each row once
    (orders and prompt variants read the same rows)."""
    out = {}
    for subset, subset_logs in logs.items():
        seen: dict[str, dict] = {}
        for problem, kept, origin in (row for log in subset_logs for row in log.rows):
            entry = seen.setdefault(problem, {"kept": set(), "skipped": set(), "first": origin})
            entry["kept" if kept else "skipped"].add(origin)
        if seen:
            out[subset] = {p: {"kept": len(e["kept"]), "skipped": len(e["skipped"] - e["kept"]), "first": e["first"]}
                           for p, e in sorted(seen.items())}
    return out


def warning_lines(task: str, summary: dict) -> list[str]:
    """One line per problem for the whole task, with its count per subset and its first row."""
    lines = []
    for problem in sorted({p for subset in summary.values() for p in subset}):
        entries = {s: e[problem] for s, e in summary.items() if problem in e}
        kept, skipped = sum(e["kept"] for e in entries.values()), sum(e["skipped"] for e in entries.values())
        per_subset = ", ".join(f"{s} {e['kept'] + e['skipped']}" for s, e in entries.items())
        first = next(iter(entries.values()))["first"]
        lines.append(f"task {task}: {kept + skipped} rows with {problem.replace('_', ' ')} ({per_subset}): {kept} scored "
                     f"as lm-eval scores them (flagged in their records), {skipped} skipped; first at {first} "
                     f"(bad_rows: {{{problem}: keep|skip|error}} in the task file, or --bad-rows {problem}=...)")
    return lines


def report_bad_rows(task: str, units) -> dict:
    """The task's bad rows per subset (summarise_bad_rows over its prepared units), with one
    warning per problem on the terminal and in run.log."""
    from ..runlog import LOGGER

    logs: dict[str, list[BadRowLog]] = {}
    for unit in units:
        if getattr(unit.kind, "bad_rows", None) is not None:
            logs.setdefault(unit.variant.subset, []).append(unit.kind.bad_rows)
    summary = summarise_bad_rows(logs)
    for line in warning_lines(task, summary):
        LOGGER.warning(line)
    return summary
