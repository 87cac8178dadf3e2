"""Compiled XLA programs kept on disk, so that a second run of a task on the same model and
shapes loads its programs instead of compiling them (XCOPA sw+ta's scoring programs take
~40 s to compile on a 2-core CPU).

`babeleval run` turns it on (or off: evaluate(..., compile_cache=False)); a Scorer, Generator or
Embedder built from Python turns it on at the default folder unless that was decided already,
jax has a cache folder of the user's own, or BABELEVAL_COMPILE_CACHE=0.
BABELEVAL_COMPILE_MIN_SECONDS (default 1) is the shortest compile worth a file."""
from __future__ import annotations

import os
from pathlib import Path

import jax

_decided = False  # set once evaluate or the first engine chose


def enable_compilation_cache(folder: Path | None = None, min_seconds: float | None = None) -> Path:
    """Use `folder` (default: <BABELEVAL_CACHE>/jax) for every program that took at least
    min_seconds to compile. Returns the folder."""
    global _decided
    if folder is None:
        from ..paths import cache_dir

        folder = cache_dir() / "jax"
    if min_seconds is None:
        min_seconds = float(os.environ.get("BABELEVAL_COMPILE_MIN_SECONDS", "1"))
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if jax.config.jax_compilation_cache_dir not in (None, str(folder)):
        from jax._src import compilation_cache  # the cache opened its first folder once: open the new one

        compilation_cache.reset_cache()
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", min_seconds)
    _decided = True
    return folder


def skip_compilation_cache() -> None:
    """Engines built in this process from now on do not turn the cache on by themselves."""
    global _decided
    _decided = True


def default_compilation_cache() -> None:
    """What an engine built from Python calls: the cache at the default folder, unless already
    decided, set up by the user in jax, or BABELEVAL_COMPILE_CACHE=0."""
    if _decided or jax.config.jax_compilation_cache_dir is not None or os.environ.get("BABELEVAL_COMPILE_CACHE") == "0":
        return
    enable_compilation_cache()
