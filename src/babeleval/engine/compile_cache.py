"""Compiled XLA programs kept on disk, so that a second run of a task on the same model and
shapes loads its programs instead of compiling them (XCOPA sw+ta's scoring programs take
~40 s to compile on a 2-core CPU)."""
from __future__ import annotations

from pathlib import Path

import jax


def enable_compilation_cache(folder: Path | None = None, min_seconds: float = 1.0) -> Path:
    """Use `folder` (default: <BABELEVAL_CACHE>/jax) for every program that took at least
    min_seconds to compile. Returns the folder."""
    if folder is None:
        from ..paths import cache_dir

        folder = cache_dir() / "jax"
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if jax.config.jax_compilation_cache_dir not in (None, str(folder)):
        from jax._src import compilation_cache  # the cache opened its first folder once: open the new one

        compilation_cache.reset_cache()
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", min_seconds)
    return folder
