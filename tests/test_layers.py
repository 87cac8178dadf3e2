"""The import graph of babeleval (src/babeleval, cli/, kernels/): every import, at module level or
inside a function, goes down the layers below, or stays inside its own package; and no circle
of modules imports itself. LAYERS is the one place the order is written down (bottom first);
a new top-level module or package must be given a layer here."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = [
    ["babeleval", "errors"],  # the package root holds its version only
    ["paths", "provenance", "results", "runlog", "requests", "kernels", "quant"],  # quant: quantized weights
    ["scripts", "assets", "placement", "models"],  # placement: devices, meshes, the sharding rule table
    ["metrics", "udhr", "loading"],
    ["chat", "engine", "remote", "pages"],  # pages: blocks, plots and run folders for report and compare
    ["retrieval", "fertility"],
    ["tasks"],
    ["lm_eval"],
    ["engines"],
    ["evaluate"],
    ["bench", "compare"],
    ["report", "export"],
    ["cli"],
]
LAYER = {unit: i for i, units in enumerate(LAYERS) for unit in units}
FOLDERS = ((ROOT / "src" / "babeleval", "babeleval"), (ROOT / "cli", "babeleval.cli"), (ROOT / "kernels", "babeleval.kernels"))


def modules() -> dict[str, Path]:
    out = {}
    for base, package in FOLDERS:
        for path in base.rglob("*.py"):
            rel = path.relative_to(base).with_suffix("")
            if "__pycache__" not in path.parts:
                out[".".join([package] + [p for p in rel.parts if p != "__init__"])] = path
    return out


def imports(name: str, path: Path, known: dict) -> set[str]:
    """The babeleval modules `name` imports (relative imports resolved; `from . import x` names x)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            if node.level:
                target = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [target] + [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(c for c in candidates if c in known and c != name)
    return found


def unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_every_top_level_module_has_a_layer():
    assert sorted({unit(m) for m in modules()} - set(LAYER)) == []


def test_imports_only_run_down_the_layers():
    upward = [f"{src} imports {dst} ({unit(dst)}, layer {LAYER[unit(dst)]} >= {LAYER[unit(src)]})"
              for src, targets in graph().items() for dst in sorted(targets)
              if unit(src) != unit(dst) and LAYER[unit(dst)] >= LAYER[unit(src)]]
    assert upward == []


def test_no_import_circles():
    assert circles(graph()) == []
