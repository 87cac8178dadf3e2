"""Built-in tasks keep their signatures unless a change means it: old samples files resume and
old runs pair in `compare` only where signatures agree (issue 50 changed the two fill-blank
tasks on purpose; adding translation blocks and counting versions changed no other)."""
import json

from reference.make_builtin_signatures import GOLDEN, signatures


def test_builtin_task_signatures_are_unchanged():
    golden, now = json.loads(GOLDEN.read_text()), signatures()
    changed = sorted(name for name in golden if now.get(name) != golden[name])
    assert not changed, (f"signatures changed for {changed}: their old records no longer resume or compare; "
                         "if that is meant, raise the task's version and run tests/reference/make_builtin_signatures.py")
    assert set(now) == set(golden), "a task was added or removed: run tests/reference/make_builtin_signatures.py"
