"""Where babeleval keeps what it can compute again (compiled programs, converted models,
npm packages, API responses): $BABELEVAL_CACHE, else ~/.cache/babeleval."""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    path = Path(os.environ.get("BABELEVAL_CACHE", Path.home() / ".cache" / "babeleval"))
    path.mkdir(parents=True, exist_ok=True)
    return path
