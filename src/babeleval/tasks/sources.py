"""Documents from files or the hub, each with its origin ("file:line") so that a bad row
is reported where it is.

Formats: jsonl, json (a list, or a list under a top-level key such as IndicGenBench's
"examples"), squad (SQuAD v1.1 JSON, one document per question), csv, tsv, parquet, a
directory (its files for the split), a hub dataset through `datasets`, or a builtin
Python source (CLDR names from babel). Line-aligned parallel files (Tatoeba) are a list
of paths with format "lines": line i of each file is one document, the fields named
"source" and "target" (then "text3", ...) by the order of the paths.
"""
from __future__ import annotations

import csv
import gzip
import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import BabelevalError

FORMATS = ("jsonl", "json", "squad", "csv", "tsv", "parquet", "lines")
SUFFIXES = {".jsonl": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet"}


@dataclass(frozen=True)
class Raw:
    """One document as read: its fields, and where it came from."""

    fields: dict
    origin: str


def _text(path: Path) -> str:
    try:
        data = path.read_bytes()
        return (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise BabelevalError(f"{path}:{line}: not UTF-8 (byte 0x{exc.object[exc.start]:02x}); "
                             "babeleval reads UTF-8 files only") from None


def _jsonl(path: Path) -> list[Raw]:
    out = []
    for n, line in enumerate(_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BabelevalError(f"{path}:{n}: malformed JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(row, dict):
            raise BabelevalError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
        out.append(Raw(row, f"{path}:{n}"))
    return out


def _json_value(path: Path):
    try:
        return json.loads(_text(path))
    except json.JSONDecodeError as exc:
        raise BabelevalError(f"{path}:{exc.lineno}: malformed JSON ({exc.msg} at column {exc.colno})") from None


def _json(path: Path, key: str | None) -> list[Raw]:
    value = _json_value(path)
    if key is not None:
        if not isinstance(value, dict) or key not in value:
            found = ", ".join(value) if isinstance(value, dict) else type(value).__name__
            raise BabelevalError(f"{path}: no top-level key {key!r} (found: {found})")
        value = value[key]
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise BabelevalError(f"{path}: expected a list of objects{f' under {key!r}' if key else ''}")
    return [Raw(row, f"{path}:record {i + 1}") for i, row in enumerate(value)]


def _squad(path: Path) -> list[Raw]:
    """SQuAD v1.1: data[].paragraphs[].qas[] -> one document per question."""
    out = []
    try:
        for article in _json_value(path)["data"]:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    fields = {"id": qa["id"], "title": article.get("title", ""), "context": paragraph["context"],
                              "question": qa["question"], "answers": qa["answers"]}
                    out.append(Raw(fields, f"{path}:question {qa['id']}"))
    except (KeyError, TypeError) as exc:
        raise BabelevalError(f"{path}: not SQuAD v1.1 JSON (missing {exc})") from None
    return out


def _delimited(path: Path, delimiter: str) -> list[Raw]:
    lines = _text(path).splitlines(keepends=True)
    reader = csv.reader(lines, delimiter=delimiter)
    header = next(reader, None)
    if not header:
        raise BabelevalError(f"{path}:1: empty file, expected a header row")
    out = []
    for row in reader:
        n = reader.line_num
        if not row:
            continue
        if len(row) != len(header):
            raise BabelevalError(f"{path}:{n}: {len(row)} fields, the header has {len(header)} "
                                 f"({', '.join(header)})")
        out.append(Raw(dict(zip(header, row)), f"{path}:{n}"))
    return out


def _parquet(path: Path) -> list[Raw]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise BabelevalError(f"{path}: reading parquet needs pyarrow (pip install pyarrow)") from None
    return [Raw(row, f"{path}:row {i + 1}") for i, row in enumerate(pq.read_table(path).to_pylist())]


def read_file(path: Path, fmt: str | None = None, key: str | None = None) -> list[Raw]:
    path = Path(path)
    fmt = fmt or SUFFIXES.get(path.suffix)
    if fmt not in FORMATS:
        raise BabelevalError(f"{path}: unknown format {fmt or path.suffix!r}; expected one of {', '.join(FORMATS)}")
    if not path.is_file():
        raise BabelevalError(f"{path}: no such file")
    if fmt == "jsonl":
        return _jsonl(path)
    if fmt == "json":
        return _json(path, key)
    if fmt == "squad":
        return _squad(path)
    if fmt == "parquet":
        return _parquet(path)
    return _delimited(path, "," if fmt == "csv" else "\t")


def read_lines(paths: list[Path]) -> list[Raw]:
    columns = [_text(Path(p)).splitlines() if Path(p).is_file() else None for p in paths]
    for p, column in zip(paths, columns):
        if column is None:
            raise BabelevalError(f"{p}: no such file")
    if len({len(c) for c in columns}) != 1:
        counts = ", ".join(f"{p}: {len(c)}" for p, c in zip(paths, columns))
        raise BabelevalError(f"parallel files differ in length ({counts} lines)")
    names = ["source", "target"] + [f"text{i + 1}" for i in range(2, len(paths))]
    return [Raw(dict(zip(names, row)), f"{paths[0]}:{i + 1}") for i, row in enumerate(zip(*columns))]


def read_local(path, split: str, fmt: str | None, key: str | None) -> list[Raw]:
    """A file, a list of line-aligned files, or a directory: its files named after the split
    (test.jsonl, test-00000.parquet)."""
    if isinstance(path, (list, tuple)):
        return read_lines([Path(p) for p in path])
    path = Path(path)
    if not path.is_dir():
        return read_file(path, fmt, key)
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name.split(".")[0].split("-")[0] == split)
    if not files:
        raise BabelevalError(f"{path}: no file for split {split!r} in this directory")
    return [raw for f in files for raw in read_file(f, fmt, key)]


def read_hub(dataset: str, name: str | None, split: str, data_files: str | None = None,
             field: str | None = None) -> list[Raw]:
    """A hub dataset through `datasets` (needs a network, or its local cache); data_files and
    field pick one JSON file of a repository and the list under its top-level key."""
    try:
        import datasets
    except ImportError:
        raise BabelevalError(f"hub dataset {dataset}: install the `datasets` package (pip install datasets)") from None
    try:
        extra = {"data_files": {split: data_files}} if data_files else {}
        rows = datasets.load_dataset(dataset, name, split=split, **extra, **({"field": field} if field else {}))
    except Exception as exc:  # offline, gated, unknown config: datasets raises many types
        raise BabelevalError(f"hub dataset {dataset} ({name or 'default'}, {split}): {type(exc).__name__}: {exc}") from None
    where = f"{dataset}/{name or 'default'}/{split}"
    return [Raw(dict(row), f"{where}:row {i + 1}") for i, row in enumerate(rows)]
