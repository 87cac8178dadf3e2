"""lm-eval's per-sample records for a backend on the fixture task files (tests/fixtures/lm_eval_tasks),
the first N documents of each task, sorted by document: what the per-sample parity tests compare."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def samples(lm, tasks: dict[str, int]) -> dict:
    import lm_eval
    from lm_eval.tasks import TaskManager

    out = lm_eval.simple_evaluate(model=lm, tasks=list(tasks), samples={t: list(range(n)) for t, n in tasks.items()},
                                  task_manager=TaskManager(include_path=str(ROOT / "tests" / "fixtures" / "lm_eval_tasks")),
                                  log_samples=True)
    return {t: sorted(s, key=lambda s: s["doc_id"]) for t, s in out["samples"].items()}
