"""lm-eval's TaskManager for the tasks a run names, reading only the folders that hold them.

lm-eval's TaskManager parses every one of its ~14,000 task YAML files before a run starts (10 s
on 2 cores, each process, whatever the run asks for). babeleval keeps a name -> folder index of
lm-eval's own task files in its cache (built once by that full TaskManager; rebuilt when the
installed files change: lm-eval's version, their count or newest mtime) and gives TaskManager the
folders of the named tasks, of a group's members and of a tag's tasks (include_defaults off).
A name the index cannot place (a pattern, a YAML path, a member no folder holds) gets lm-eval's
full TaskManager, as before."""
from __future__ import annotations

import json
import os
from pathlib import Path

from babeleval.paths import cache_dir

WILDCARDS = set("*?[")


def task_manager(tasks: list[str], include_path: str | None = None):
    """A TaskManager that knows `tasks` (and include_path's own tasks) as the full one does."""
    from lm_eval.tasks import TaskManager

    folders = folders_for(tasks, include_path)
    if folders is None:
        return TaskManager(include_path=include_path)
    return TaskManager(include_path=folders + ([include_path] if include_path else []), include_defaults=False)


def folders_for(tasks: list[str], include_path: str | None = None, root: Path | None = None) -> list[str] | None:
    """The folders under lm-eval's task root that hold `tasks` (and whatever their groups and tags
    name, transitively), or None where a name is not placed. include_path's own entries are
    read (it is small) and win over lm-eval's, as in TaskManager; lm-eval's index is read only
    for a name include_path does not hold."""
    if any(WILDCARDS & set(t) or Path(t).is_file() for t in tasks):
        return None
    root = root or default_root()
    mine, lm_evals = {}, {}  # lm-eval's index read only when a name is not include_path's
    if include_path:
        from lm_eval.tasks._index import TaskIndex

        mine = {name: summary(entry, None) for name, entry in TaskIndex.build([Path(include_path)]).items()}
    folders, seen, todo = set(), set(), list(tasks)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name not in mine and not lm_evals:
            lm_evals = load_index(root)
        entry = mine.get(name) or lm_evals.get(name)
        if entry is None:
            return None
        if entry["folder"] is not None:
            folders.add(entry["folder"])
        todo += entry["names"]
    kept = [f for f in sorted(folders) if not any(f.startswith(other + os.sep) for other in folders)]
    return [str(root / f) for f in kept]  # a folder inside another chosen one is indexed with it


def default_root() -> Path:
    import lm_eval.tasks

    return Path(lm_eval.tasks.__file__).parent.resolve()


def load_index(root: Path) -> dict:
    """{name: {"folder": its YAML's folder under root (None: a tag, or include_path's), "names":
    the names it stands for (a group's members, a tag's tasks)}} of lm-eval's own tasks, from the
    cache when it was built from the same files."""
    stamp = files_stamp(root)
    path = cache_dir() / "lm_eval_task_index.json"
    try:
        saved = json.loads(path.read_text())
        if saved["stamp"] == stamp:
            return saved["index"]
    except (OSError, ValueError, KeyError):
        pass
    from lm_eval.tasks._index import TaskIndex

    index = {name: summary(entry, root) for name, entry in TaskIndex.build([root]).items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(f".{os.getpid()}.part")
    part.write_text(json.dumps({"stamp": stamp, "index": index}))
    part.replace(path)  # whole or not at all: a concurrent run reads either file
    return index


def files_stamp(root: Path) -> list:
    """What changes when lm-eval's task files do: its version, the root, how many YAML files and the newest mtime."""
    from importlib.metadata import version

    count, newest = 0, 0
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".yaml"):
                count += 1
                newest = max(newest, os.stat(os.path.join(folder, name)).st_mtime_ns)
    return [version("lm_eval"), str(root), count, newest]


def summary(entry, root: Path | None) -> dict:
    """An index Entry as the folder of its YAML and the names it stands for."""
    names = []
    if entry.kind.name == "TAG":
        names = sorted(entry.tags)
    elif entry.kind.name == "GROUP":
        names = members((entry.cfg or {}).get("task"))
    folder = None
    if root is not None and entry.yaml_path is not None:
        folder = str(Path(entry.yaml_path).resolve().parent.relative_to(root))
    return {"folder": folder, "names": names}


def members(tasks) -> list[str]:
    """The registered names a group's `task` list refers to (inline task or group configs: the names
    they build on, a nested group's members)."""
    out = []
    for item in tasks if isinstance(tasks, list) else [tasks] if tasks else []:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and "group" in item:
            out += members(item.get("task"))
        elif isinstance(item, dict) and isinstance(item.get("task"), str):
            out.append(item["task"])
    return out
