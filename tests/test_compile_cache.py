"""The compilation cache works for library calls: a Scorer built from Python (no `babeleval
run`) writes its compiled programs under $BABELEVAL_CACHE/jax, a second process loads them
instead of compiling, and BABELEVAL_COMPILE_CACHE=0 or evaluate(compile_cache=False) keep it off."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.full  # subprocesses compiling and loading programs

SCRIPT = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_bad_input import byte_model
from babeleval.engine.scoring import Scorer
from babeleval.loading import load_model
from babeleval.requests import Loglikelihood
model = load_model(str(byte_model(Path({folder!r}))))
{before}
print(Scorer(model).loglikelihood([Loglikelihood("Monday is followed by", " Tuesday")])[0].logprob)
"""


def run(tmp_path, cache, before="", **env):
    code = SCRIPT.format(tests=str(Path(__file__).parent), folder=str(tmp_path / "model"), before=before)
    env = {**os.environ, "BABELEVAL_CACHE": str(cache), "BABELEVAL_COMPILE_MIN_SECONDS": "0", **env}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return float(out.stdout.split()[-1])


def programs(cache: Path) -> set:
    folder = cache / "jax"
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


def test_a_scorer_built_from_python_uses_the_compilation_cache(tmp_path):
    cache = tmp_path / "cache"
    first = run(tmp_path, cache)
    written = programs(cache)
    assert any("score_lines" in name for name in written), written
    assert run(tmp_path, cache) == first
    assert programs(cache) == written  # the second process compiled nothing new: every program was loaded


def test_the_cache_stays_off_when_asked(tmp_path):
    run(tmp_path, tmp_path / "off", BABELEVAL_COMPILE_CACHE="0")
    assert programs(tmp_path / "off") == set()
    run(tmp_path, tmp_path / "skipped", "from babeleval.engine.compile_cache import skip_compilation_cache; "
        "skip_compilation_cache()")
    assert programs(tmp_path / "skipped") == set()


def test_babeleval_run_keeps_its_programs_for_the_next_run(tmp_path):
    """`babeleval run` turns the cache on by itself (evaluate's compile_cache=True)."""
    from test_bad_input import byte_model

    folder = byte_model(tmp_path / "model")
    env = {**os.environ, "BABELEVAL_CACHE": str(tmp_path / "cache"), "BABELEVAL_COMPILE_MIN_SECONDS": "0"}
    command = [sys.executable, "-c", "from babeleval.cli.main import cli; cli()", "run", "--quiet", "--model",
               str(folder), "--task", "cldr-weekdays:fr", "--output", str(tmp_path / "run")]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert any("score_lines" in name for name in programs(tmp_path / "cache")), programs(tmp_path / "cache")
