"""What a results.json must say about how it was made: library versions, the git commit
when run from a checkout, the command line, and a hash of the weights file."""
from __future__ import annotations

import functools
import hashlib
import subprocess
import sys
from importlib import metadata
from pathlib import Path

LIBRARIES = ("babeleval", "jax", "jaxlib", "flax", "numba", "numpy", "transformers", "tokenizers", "sacrebleu")


def versions() -> dict[str, str | None]:
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit() -> str | None:
    """The checkout's commit (with "+dirty" when files differ from it), or None when the
    package is not run from a git checkout."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (commit + ("+dirty" if dirty else "")) or None


@functools.lru_cache(maxsize=8)
@functools.lru_cache(maxsize=32)
def file_sha256(path: str) -> str | None:
    """sha256 of a weights file (a .gguf, or a folder's safetensors files in name order)."""
    p = Path(path)
    files = sorted(p.glob("*.safetensors")) if p.is_dir() else [p] if p.is_file() else []
    if not files:
        return None
    digest = hashlib.sha256()
    for f in files:
        with f.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()


def run_provenance() -> dict:
    return {"versions": versions(), "git_commit": git_commit(), "command": [Path(sys.argv[0]).name] + sys.argv[1:],
            "python": sys.version.split()[0]}


def text_hash(text: str) -> str:
    """The 16-hex-digit hash that names a template, a prompt or a chat template in results."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
