"""`babeleval lm-eval` reads only the folders of lm-eval's task files that hold the named tasks
(lm_eval/task_index.py): a task's folder, a group's members' and a tag's tasks' folders, a
folder inside another once; a name it cannot place gets the full TaskManager (None); the index
is cached and rebuilt when the files change. On a small task root here; lm-eval's own tasks in
the full tier (its full index takes ~10 s to build)."""
import os
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

FILES = {
    "a/task_a.yaml": "task: ta\ntag: tg\n",
    "b/task_b.yaml": "task: tb\ntag: [tg]\n",
    "c/group_c.yaml": "group: gc\ntask:\n  - ta\n  - task: tb\n    num_fewshot: 1\n",
    "d/task_d2.yaml": "task: td2\n",
    "d/sub/task_d.yaml": "task: td\n",
    "e/nested.yaml": "group: ge\ntask:\n  - group: inner\n    task: [td]\n",
}


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("BABELEVAL_CACHE", str(tmp_path / "cache"))
    for name, text in FILES.items():
        (tmp_path / "tasks" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "tasks" / name).write_text(text)
    return tmp_path / "tasks"


def test_the_folders_of_tasks_groups_and_tags(root):
    from babeleval.lm_eval.task_index import folders_for

    at = lambda *names: [str(root / n) for n in names]  # noqa: E731
    assert folders_for(["ta"], root=root) == at("a")
    assert folders_for(["gc"], root=root) == at("a", "b", "c")
    assert folders_for(["tg"], root=root) == at("a", "b")
    assert folders_for(["td", "td2"], root=root) == at("d")  # d/sub is read with d
    assert folders_for(["ge"], root=root) == at("d/sub", "e")
    assert folders_for(["nope"], root=root) is None
    assert folders_for(["t*"], root=root) is None


def test_an_include_path_group_of_lm_evals_tasks(root, tmp_path, monkeypatch):
    from babeleval.lm_eval import task_index
    from babeleval.lm_eval.task_index import folders_for

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "g.yaml").write_text("group: gm\ntask: [ta, tm]\n")
    (mine / "t.yaml").write_text("task: tm\n")
    (mine / "tb.yaml").write_text("task: tb\n")  # a task of the same name wins over lm-eval's
    assert folders_for(["gm", "tb"], include_path=str(mine), root=root) == [str(root / "a")]
    monkeypatch.setattr(task_index, "load_index", lambda root: pytest.fail("lm-eval's index read"))
    assert folders_for(["tm"], include_path=str(mine), root=root) == []  # include_path's alone


def test_the_index_is_cached_and_rebuilt_when_the_files_change(root, monkeypatch):
    from lm_eval.tasks._index import TaskIndex

    from babeleval.lm_eval.task_index import folders_for

    assert folders_for(["ta"], root=root) == [str(root / "a")]
    built = TaskIndex.build
    monkeypatch.setattr(TaskIndex, "build", staticmethod(lambda *a, **k: pytest.fail("built again")))
    assert folders_for(["tb"], root=root) == [str(root / "b")]  # from the cache
    (root / "f").mkdir()
    (root / "f" / "new.yaml").write_text("task: tf\n")
    monkeypatch.setattr(TaskIndex, "build", built)
    assert folders_for(["tf"], root=root) == [str(root / "f")]
    later = os.stat(root / "a" / "task_a.yaml").st_mtime_ns + 10**9
    (root / "a" / "task_a.yaml").write_text("task: ta2\n")
    os.utime(root / "a" / "task_a.yaml", ns=(later, later))
    assert folders_for(["ta2"], root=root) == [str(root / "a")] and folders_for(["ta"], root=root) is None


@pytest.mark.full
def test_lm_evals_own_groups_are_indexed_as_the_full_task_manager_indexes_them(tmp_path, monkeypatch):
    """Every entry the small TaskManager holds is the full one's (same YAML, same config), and it
    holds the named group's and tag's members (building the tasks would need the hub's datasets)."""
    from lm_eval.tasks import TaskManager

    from babeleval.lm_eval.task_index import members, task_manager

    monkeypatch.setenv("BABELEVAL_CACHE", str(tmp_path))
    names = ["xcopa", "belebele", "arc_easy"]
    small, full = task_manager(names).task_index, TaskManager().task_index
    assert all(small[n].yaml_path == full[n].yaml_path and small[n].cfg == full[n].cfg for n in small)
    for name in names:
        entry = full[name]
        wanted = sorted(entry.tags) if entry.kind.name == "TAG" else members(entry.cfg.get("task"))
        assert wanted and all(n in small for n in wanted), name
    assert len(small) < len(full) / 10


def test_run_task_names_load_from_their_folder_alone(tmp_path, monkeypatch):
    """`babeleval run --task lm-eval:NAME` builds its TaskManager from the names' folders: a task
    root written here stands in for lm-eval's library (its data a local JSON file, no ../shared)."""
    from babeleval.lm_eval import task_index
    from babeleval.lm_eval.tasks import load_lm_eval_tasks

    data = tmp_path / "docs.jsonl"
    data.write_text("".join(f'{{"q": "Swali {i}?", "choices": ["ndiyo", "hapana"], "label": {i % 2}}}\n' for i in range(4)))
    for name in ("ta_local", "tb_local"):
        (tmp_path / "tasks" / name).mkdir(parents=True)
        (tmp_path / "tasks" / name / "task.yaml").write_text(
            f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\ntest_split: test\n"
            "output_type: multiple_choice\ndoc_to_text: '{{q}}'\ndoc_to_choice: '{{choices}}'\ndoc_to_target: label\n")
    monkeypatch.setenv("BABELEVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(task_index, "default_root", lambda: tmp_path / "tasks")
    loaded = load_lm_eval_tasks("ta_local,tb_local")
    assert sorted(loaded) == ["ta_local", "tb_local"] and len(loaded["ta_local"].eval_docs) == 4
