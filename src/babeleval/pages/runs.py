"""The run folders a report compares: each one's results.json, read and checked, with a
short label (the model's file or folder name; the run folder's name when two runs share a
model), and a fertility.json from `babeleval fertility` to set beside the scores."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import BabelevalError
from ..results import SCHEMA_VERSION


@dataclass
class Run:
    label: str
    folder: Path
    results: dict

    @property
    def tasks(self) -> dict:
        return self.results["tasks"]


def _read_json(path: Path, what: str) -> dict:
    if not path.is_file():
        raise BabelevalError(f"{path}: no such file ({what})")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise BabelevalError(f"{path}: not UTF-8 (byte {exc.start}); is it {what}?") from None
    except json.JSONDecodeError as exc:
        raise BabelevalError(f"{path}:{exc.lineno}: malformed JSON ({exc.msg}); is the run still writing it?") from None


def model_label(model: dict) -> str:
    source = str(model.get("identity") or model.get("source") or "model")
    name = Path(source.split(" ")[0]).name if "/" in source else source.split(" ")[0]
    for suffix in (".gguf", ".safetensors"):
        name = name.removesuffix(suffix)
    quantization = model.get("quantization") or {}
    return f"{name} [{quantization['method']}]" if quantization.get("method") else name  # runs told apart by it


def load_runs(folders: list[Path]) -> list[Run]:
    if not folders:
        raise BabelevalError("give one or more run folders (each with the results.json of a `babeleval run`)")
    runs = []
    for folder in folders:
        path = Path(folder) / "results.json" if Path(folder).is_dir() else Path(folder)
        results = _read_json(path, "the results.json of a `babeleval run`")
        missing = [k for k in ("schema_version", "model", "tasks") if k not in results]
        if missing:
            raise BabelevalError(f"{path}: not a babeleval results.json (no {', '.join(missing)})")
        if results["schema_version"] > SCHEMA_VERSION:
            raise BabelevalError(f"{path}: schema version {results['schema_version']} is newer than this babeleval "
                                 f"reads ({SCHEMA_VERSION}); upgrade babeleval")
        runs.append(Run(model_label(results["model"]), path.parent, results))
    labels = [r.label for r in runs]
    for run in runs:
        if labels.count(run.label) > 1:
            run.label = f"{run.label} ({run.folder.name})"
    if len({r.label for r in runs}) < len(runs):
        raise BabelevalError("two run folders with the same model and the same folder name: give distinct folders")
    return runs


def load_fertility(path: Path | None) -> dict | None:
    """{tokenizer: {language: stats}} from a fertility.json."""
    if path is None:
        return None
    data = _read_json(Path(path), "the fertility.json of `babeleval fertility`")
    if "tokenizers" not in data:
        raise BabelevalError(f"{path}: not a fertility.json (no 'tokenizers'); make one with `babeleval fertility`")
    return {name: audit["languages"] for name, audit in data["tokenizers"].items()}
