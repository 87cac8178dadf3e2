"""Write builtin_signatures.json: every built-in task's signature (its name, version and its
variants' signatures). A samples file resumes, and `compare` pairs runs, only where the
signatures agree: tests/test_signatures.py fails when one changes, so a change that makes old
records unusable is made on purpose (raise the task's version) and regenerated with this
script: python tests/reference/make_builtin_signatures.py"""
import json
from pathlib import Path

from babeleval.tasks.files import list_tasks

GOLDEN = Path(__file__).with_name("builtin_signatures.json")


def signatures() -> dict[str, str]:
    return {t.name: t.signature for t in sorted(list_tasks(), key=lambda t: t.name)}


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(signatures(), indent=1) + "\n")
    print(f"wrote {GOLDEN}")
