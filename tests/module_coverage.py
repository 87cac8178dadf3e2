"""The default tier's promise: every module under src/, cli/ and kernels/ runs at least one of
its functions (imported is not enough: a module's functions could all be dead to the tier).

The check measures lines with coverage.py while the whole default tier runs (`python -m pytest`
with no paths, -k or -m of its own) and fails the session naming each module none of whose
functions ran. A module without plain-Python functions (constants, re-exports, numba kernels
whose bodies run compiled) counts once imported. BABELEVAL_MODULE_COVERAGE=0 turns it off;
=1 turns it on for any selection."""
from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = [ROOT / "src" / "babeleval", ROOT / "cli", ROOT / "kernels"]
_coverage = None


def modules() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _compiled(node) -> bool:
    """A numba kernel: its body never runs as Python lines."""
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("njit", "jit", "vectorize", "guvectorize"):
            return True
    return False


def function_body_lines(path: Path) -> set[int]:
    """Line numbers of the statements inside the module's plain-Python functions and methods."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _compiled(node):
            for statement in node.body:
                lines.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    return lines


def unexecuted(executed: dict[str, set[int]]) -> list[str]:
    """Modules none of whose functions ran (or, without functions, never imported)."""
    missing = []
    for path in modules():
        ran = executed.get(str(path), set())
        body = function_body_lines(path)
        if not (ran & body if body else ran) and path.read_text().strip():
            missing.append(str(path.relative_to(ROOT)))
    return missing


def _wanted(config) -> bool:
    flag = os.environ.get("BABELEVAL_MODULE_COVERAGE")
    if flag is not None:
        return flag == "1"
    whole = not config.args or [Path(a).resolve() for a in config.args] == [ROOT / "tests"]
    return whole and not config.option.keyword and config.option.markexpr == DEFAULT_TIER


DEFAULT_TIER = "not full"


def pytest_configure(config):
    global _coverage
    if not _wanted(config):
        return
    import coverage

    _coverage = coverage.Coverage(source=[str(f) for f in FOLDERS], data_file=None, config_file=False)
    _coverage.start()


def pytest_sessionfinish(session, exitstatus):
    global _coverage
    if _coverage is None:
        return
    _coverage.stop()
    data = _coverage.get_data()
    executed = {name: set(data.lines(name) or ()) for name in data.measured_files()}
    _coverage = None
    missing = unexecuted(executed)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if missing:
        reporter.write_line(f"module coverage: {len(missing)} module(s) the default tier never executes "
                            "(give each a test in the default tier):", red=True)
        for name in missing:
            reporter.write_line(f"  {name}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    else:
        reporter.write_line(f"module coverage: all {len(modules())} modules under src/, cli/, kernels/ executed")
