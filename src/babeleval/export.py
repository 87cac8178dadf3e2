"""`babeleval export RUN_DIR... --output FILE.parquet`: every per-question record of every run
as one Parquet table, so many runs can be queried with DuckDB or pandas without parsing
JSON lines: `SELECT model, subset, avg(acc) FROM 'runs.parquet' GROUP BY ALL`.

One row per record. Columns (docs/compare.md, `babeleval export`): run, model,
model_source, task, subset, language, script, variant_key, axes (map of axis -> value),
id (document key), signature, prediction and gold as text (the chosen option's text for
multiple choice, the generation for generation tasks), references, loglikelihoods (list
of the options' log-likelihoods, null where the task has none), one float64 column per
per-question metric any record carries (acc, acc_norm, chrf, squad_f1, ...; null where a
record lacks it), and record: the record's own JSON line, so nothing is lost."""
from __future__ import annotations

import json
from pathlib import Path

from .compare.join import read_records, samples_path
from .errors import BabelevalError
from .pages.runs import load_runs

FIXED = ("run", "model", "model_source", "task", "subset", "language", "script", "variant_key", "axes", "id",
         "signature", "prediction", "gold", "references", "loglikelihoods", "record")


def _text(value) -> str | None:
    return value if isinstance(value, str) or value is None else json.dumps(value, ensure_ascii=False)


def _row(run, task: str, languages: dict, record: dict) -> dict:
    where = languages.get(record["subset"]) or {}
    references = record.get("references")
    gold = record["target"] if "target" in record else references[0] if references else record.get("gold")
    return {"run": str(run.folder), "model": run.label, "model_source": _text(run.results["model"].get("source")),
            "task": task, "subset": record["subset"], "language": where.get("language"), "script": where.get("script"),
            "variant_key": record["key"], "axes": [(str(k), str(v)) for k, v in record["variant"].items()],
            "id": str(record["id"]), "signature": record["signature"],
            "prediction": _text(record["chosen"] if "chosen" in record else record.get("prediction")),
            "gold": _text(gold), "references": [str(r) for r in references] if references is not None else None,
            "loglikelihoods": record.get("loglikelihoods"),
            "record": json.dumps(record, ensure_ascii=False)}


def metric_columns(records: list[dict]) -> list[str]:
    """Per-question metrics: the float-valued fields of the records (ints are indices and
    counts: gold, prediction, new_tokens)."""
    return sorted({k for r in records for k, v in r.items() if isinstance(v, float) and k not in FIXED})


def export(folders: list[Path], output: Path) -> dict:
    """Write the Parquet file; returns {"rows": n, "columns": [...]}."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise BabelevalError("babeleval export writes Parquet with pyarrow: pip install pyarrow") from None
    rows, records = [], []
    for run in load_runs([Path(f) for f in folders]):
        for task, result in run.tasks.items():
            for record in read_records(samples_path(run, task)).values():
                rows.append(_row(run, task, result.get("languages") or {}, record))
                records.append(record)
    if not rows:
        raise BabelevalError("the runs hold no records to export")
    metrics = metric_columns(records)
    string = pa.string()
    schema = pa.schema([*((n, string) for n in FIXED[:8]), ("axes", pa.map_(string, string)),
                        *((n, string) for n in ("id", "signature", "prediction", "gold")),
                        ("references", pa.list_(string)), ("loglikelihoods", pa.list_(pa.float64())),
                        *((m, pa.float64()) for m in metrics), ("record", string)])
    columns = {name: [row[name] for row in rows] for name in FIXED}
    for m in metrics:
        columns[m] = [r.get(m) if isinstance(r.get(m), float) else None for r in records]
    output = Path(output)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(columns, schema=schema), output)
    except OSError as exc:
        raise BabelevalError(f"{output}: cannot write ({exc.strerror or exc})") from None
    return {"rows": len(rows), "columns": schema.names}
