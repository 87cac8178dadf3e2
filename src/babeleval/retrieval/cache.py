"""Embeddings on disk, keyed by embedder identity + text hash, so a rerun (or a new k, a new
search setting, the other bitext direction) costs no forward pass.

One folder per embedder identity: identity.txt, vectors.f32 (raw float32 rows, appended,
read memory-mapped) and keys.txt (one text hash per line; line n names row n). Vectors are
appended before their keys: a run killed in between leaves rows without keys, which the
next run ignores and overwrites.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class EmbeddingCache:
    def __init__(self, root: Path, identity: str):
        self.dir = Path(root) / hashlib.sha256(identity.encode("utf-8")).hexdigest()[:20]
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "identity.txt").write_text(identity + "\n", encoding="utf-8")
        self.keys_path, self.vectors_path, self.meta_path = self.dir / "keys.txt", self.dir / "vectors.f32", self.dir / "meta.json"
        self.dim = json.loads(self.meta_path.read_text())["dim"] if self.meta_path.exists() else None
        keys = self.keys_path.read_text(encoding="ascii").split() if self.keys_path.exists() else []
        rows = self.vectors_path.stat().st_size // (4 * self.dim) if self.dim and self.vectors_path.exists() else 0
        self.rows = {key: i for i, key in enumerate(keys[:rows])}
        if len(keys) > rows or (self.vectors_path.exists() and self.dim and self.vectors_path.stat().st_size != 4 * self.dim * len(self.rows)):
            self._truncate(len(self.rows))

    def _truncate(self, rows: int) -> None:
        with self.vectors_path.open("r+b") as f:
            f.truncate(4 * self.dim * rows)
        self.keys_path.write_text("".join(k + "\n" for k, _ in sorted(self.rows.items(), key=lambda kv: kv[1])),
                                  encoding="ascii")

    def __len__(self) -> int:
        return len(self.rows)

    def get(self, keys: list[str]) -> np.ndarray:
        table = np.memmap(self.vectors_path, np.float32, "r", shape=(len(self.rows), self.dim))
        return np.array(table[[self.rows[k] for k in keys]])

    def add(self, keys: list[str], vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, np.float32)
        if self.dim is None:
            self.dim = int(vectors.shape[1])
            self.meta_path.write_text(json.dumps({"dim": self.dim}))
        fresh = {}
        for row, key in enumerate(keys):
            if key not in self.rows and key not in fresh:
                fresh[key] = row
        if not fresh:
            return
        with self.vectors_path.open("ab") as f:
            f.write(vectors[list(fresh.values())].tobytes())
            f.flush()
        with self.keys_path.open("a", encoding="ascii") as f:
            f.write("".join(k + "\n" for k in fresh))
        for key in fresh:
            self.rows[key] = len(self.rows)


@dataclass
class CacheStats:
    computed: int = 0
    from_cache: int = 0
    seconds: float = 0.0


class CachedEmbedder:
    """Any embedder (identity + embed(texts)) behind the cache; counts what it computed."""

    def __init__(self, embedder, root: Path):
        self.embedder = embedder
        self.identity = embedder.identity
        self.cache = EmbeddingCache(root, embedder.identity)
        self.stats = CacheStats()

    def embed(self, texts: list[str], progress=None) -> np.ndarray:
        import time

        start = time.time()
        keys = [text_key(t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self.cache.rows))
        if missing:
            first = {k: i for i, k in reversed(list(enumerate(keys)))}
            vectors = self.embedder.embed([texts[first[k]] for k in missing], progress)
            self.cache.add(missing, vectors)
        self.stats.computed += len(missing)
        self.stats.from_cache += len(keys) - len(missing)
        self.stats.seconds += time.time() - start
        if not keys:
            return np.zeros((0, self.cache.dim or 0), np.float32)
        return self.cache.get(keys)
