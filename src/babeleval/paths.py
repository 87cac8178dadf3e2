"""Where babeleval keeps what it can compute again (compiled programs, converted models,
npm packages, API responses): $BABELEVAL_CACHE, else ~/.cache/babeleval; and where it reads
benchmark files from: the data folder given, else $BABELEVAL_DATA."""
from __future__ import annotations

import os
from pathlib import Path

from .errors import BabelevalError

DATA_ENV = "BABELEVAL_DATA"


def cache_dir() -> Path:
    path = Path(os.environ.get("BABELEVAL_CACHE", Path.home() / ".cache" / "babeleval"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_root(data: Path | str | None = None) -> Path:
    """The folder benchmark files are read from: the one passed in, else $BABELEVAL_DATA."""
    if data is not None:
        return Path(data).expanduser()
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV]).expanduser()
    raise BabelevalError(f"no data folder: pass --data DIR (or data=... in Python) or set {DATA_ENV}")
