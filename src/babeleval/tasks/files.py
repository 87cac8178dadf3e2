"""Task files: the YAML a user writes (with `include:` for shared bases), where they are
found (the built-in folder, --task-dir folders, a path), and the data root.

A task is named NAME, NAME:SUB1,SUB2 (some subsets) or NAME-SUB (one subset, as in
xcopa-sw), or given as a path to its .yaml file.
"""
from __future__ import annotations

import difflib
import os
from pathlib import Path

import yaml

from ..errors import BabelevalError
from .config import TaskConfig, deep_merge, parse_task

BUILTIN = Path(__file__).parent / "builtin"


def read_yaml(path: Path, seen: tuple = ()) -> dict:
    """A task file with its includes merged (the including file's fields win)."""
    path = Path(path).resolve()
    if path in seen:
        raise BabelevalError(f"{path}: include cycle ({' -> '.join(p.name for p in seen + (path,))})")
    if not path.is_file():
        raise BabelevalError(f"{path}: no such task file")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise BabelevalError(f"{path}{line}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    except UnicodeDecodeError:
        raise BabelevalError(f"{path}: not UTF-8") from None
    if not isinstance(raw, dict):
        raise BabelevalError(f"{path}: a task file is a YAML mapping")
    includes = raw.pop("include", None) or []
    merged: dict = {}
    for include in [includes] if isinstance(includes, str) else includes:
        merged = deep_merge(merged, read_yaml(path.parent / include, seen + (path,)))
    return deep_merge(merged, raw)


def _task_files(task_dirs) -> dict[str, Path]:
    """name -> file over the built-in folder and then each --task-dir (later ones win).
    Files whose name starts with '_' are bases to include, not tasks."""
    found = {}
    for folder in [BUILTIN, *map(Path, task_dirs or ())]:
        if not folder.is_dir():
            raise BabelevalError(f"{folder}: no such task folder")
        for path in sorted(folder.rglob("*.yaml")):
            if not path.name.startswith("_"):
                found[path.stem] = path
    return found


def load_task_file(path: Path, overrides: dict | None = None) -> TaskConfig:
    """overrides: task-file fields set from outside (the CLI's --choice-orders)."""
    path = Path(path)
    return parse_task(deep_merge(read_yaml(path), overrides or {}), str(path))


def find_task(spec: str, task_dirs=(), overrides: dict | None = None) -> TaskConfig:
    """NAME, NAME:SUB,SUB, NAME-SUB or a .yaml path -> the task (restricted to those subsets)."""
    if spec.endswith((".yaml", ".yml")):
        name, subsets = spec, None
    else:
        name, _, picked = spec.partition(":")
        subsets = [s for s in picked.split(",") if s] if picked else None
    if name.endswith((".yaml", ".yml")) or os.sep in name:
        task = load_task_file(Path(name), overrides)
        return task.select(subsets) if subsets else task
    files = _task_files(task_dirs)
    if name not in files and "-" in name:
        base, _, subset = name.rpartition("-")
        while base and base not in files and "-" in base:  # sib200-amh_Ethi, names with dashes
            base, _, head = base.rpartition("-")
            subset = f"{head}-{subset}"
        if base in files:
            task = load_task_file(files[base], overrides)
            if subset in task.subsets:
                return task.select([subset])
    if name not in files:
        close = difflib.get_close_matches(name, files, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise BabelevalError(f"unknown task {name!r}{hint}; tasks: {', '.join(sorted(files))} "
                             "(or a .yaml path; `babeleval tasks` lists them)")
    task = load_task_file(files[name], overrides)
    return task.select(subsets) if subsets else task


SUITE_FIELDS = ("name", "description", "suite", "tags")


def suite_members(spec: str, task_dirs=()) -> list[str] | None:
    """The task specs a suite file lists (a file with `suite:` instead of `kind:`), else None."""
    files = _task_files(task_dirs)
    path = Path(spec) if spec.endswith((".yaml", ".yml")) else files.get(spec)
    if path is None or not path.is_file():
        return None
    raw = read_yaml(path)
    if "suite" not in raw:
        return None
    from .config import check_fields

    check_fields(raw, SUITE_FIELDS, str(path), "a suite file")
    if not isinstance(raw["suite"], list) or not all(isinstance(t, str) for t in raw["suite"]):
        raise BabelevalError(f"{path}: suite must be a list of task names")
    return raw["suite"]


def find_tasks(spec: str, task_dirs=(), overrides: dict | None = None, prefixed: dict | None = None) -> list[TaskConfig]:
    """A task, or every task of a suite (proverbeval: the paper's three tasks). `prefixed` maps
    a spec prefix to the loader of tasks defined elsewhere (the layers above pass
    {"lm-eval:": lm_eval.tasks.load_lm_eval_task}; a suite may list such tasks too)."""
    for prefix, load in (prefixed or {}).items():
        if spec.startswith(prefix):
            return [load(spec[len(prefix):], overrides)]
    members = suite_members(spec, task_dirs)
    if members is None:
        return [find_task(spec, task_dirs, overrides)]
    return [t for member in members for t in find_tasks(member, task_dirs, overrides, prefixed)]


def list_tasks(task_dirs=()) -> list[TaskConfig]:
    return [load_task_file(path) for name, path in _task_files(task_dirs).items() if suite_members(name, task_dirs) is None]


def list_suites(task_dirs=()) -> dict[str, list[str]]:
    return {name: members for name in _task_files(task_dirs) if (members := suite_members(name, task_dirs)) is not None}


def default_suite(task_dirs=()) -> list[str]:
    """The tasks tagged `default` (the embedded CLDR suite: no data files needed)."""
    return [t.name for t in list_tasks(task_dirs) if "default" in t.tags]
