"""The runs a comparison reads, and the questions two of them share: each run's results.json
(through the report's reader) and its samples_<task>.jsonl records, keyed by variant
(subset and axis values) and document id. What would make a difference mean something
else is refused here: runs of other --limit/--sample choices (other documents), and per
cell records of another signature (other templates or settings)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BabelevalError
from ..pages.runs import Run
from ..tasks.sources import read_file

REQUIRED = ("id", "key", "subset", "variant", "signature")


def samples_path(run: Run, task: str) -> Path:
    for name in (f"samples_{task}.jsonl", f"samples_{task}.jsonl.gz"):
        if (run.folder / name).is_file():
            return run.folder / name
    raise BabelevalError(f"{run.folder}: no samples_{task}.jsonl (the per-question records of task {task}); "
                         "a comparison needs the run folder as `babeleval run` wrote it")


def read_records(path: Path) -> dict[tuple[str, str], dict]:
    """{(variant key, document id): record}; the last record of a key wins, as in a resumed run."""
    records = {}
    for raw in read_file(path, "jsonl"):
        missing = [k for k in REQUIRED if k not in raw.fields]
        if missing:
            raise BabelevalError(f"{raw.origin}: record without field {missing[0]!r}; not a babeleval samples file")
        records[(raw.fields["key"], str(raw.fields["id"]))] = raw.fields
    return records


def check_same_documents(runs: list[Run]) -> None:
    """Runs of other --limit or --sample choices scored other documents: their shared
    questions are a subset chosen by the options, not by the benchmark. Say which."""
    for option in ("limit", "sample"):
        values = {r.label: r.results.get(option) for r in runs}
        if len(set(values.values())) > 1:
            said = ", ".join(f"{label} ({next(r.folder for r in runs if r.label == label)}): {v}"
                             for label, v in values.items())
            raise BabelevalError(f"runs differ in --{option}: {said}; compare runs of the same documents "
                                 f"(run them again with the same --limit and --sample)")


@dataclass
class Cell:
    """One variant (a subset, with axis values when the task has axes) of one task, with the
    records of every run that has it: {run label: {document id: record}}."""

    task: str
    key: str
    subset: str
    variant: dict
    records: dict[str, dict[str, dict]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.subset if self.key == self.subset else self.key


def cells(runs: list[Run], task: str) -> list[Cell]:
    """The task's variants in the order the runs list them, each with every run's records."""
    found: dict[str, Cell] = {}
    for run in runs:
        if task not in run.tasks:
            continue
        for (key, doc), record in read_records(samples_path(run, task)).items():
            cell = found.setdefault(key, Cell(task, key, record["subset"], record["variant"]))
            cell.records.setdefault(run.label, {})[doc] = record
    return list(found.values())


def signature_refusal(cell: Cell, a: str, b: str) -> str | None:
    """Why two runs' records of a cell cannot be compared, or None."""
    signatures = {label: sorted({r["signature"] for r in cell.records[label].values()}) for label in (a, b)}
    if signatures[a] != signatures[b]:
        return (f"different task signatures ({a}: {', '.join(signatures[a])}; {b}: {', '.join(signatures[b])}): "
                "the prompt template or a setting changed between the runs")
    return None


def shared_ids(cell: Cell, a: str, b: str) -> list[str]:
    """The documents both runs answered, in the first run's order."""
    other = cell.records[b]
    return [doc for doc in cell.records[a] if doc in other]
