"""k-nearest-neighbour search over one embedder's vectors: exact (blocked, jitted) or an
hnswlib index, chosen automatically by a cost model whose constants were measured in
bench/test_bench_retrieval.py (exact search costs queries x keys; an index costs its build,
once per key set, then little per query).
Every HNSW search also runs exact search on a sample of its queries and reports recall@k
against it, so an approximate result always says how approximate it was. An index can be
saved and reloaded (keyed by the vectors it holds and its settings).
"""
from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import BabelevalError
from .exact import METRICS, exact_search

METHODS = ("auto", "exact", "hnsw")
RECALL_SAMPLE = 256
# The auto choice's cost model, measured on the 2-core CPU box with real multilingual-e5-small
# vectors (dim 384) by bench/test_bench_retrieval.py (figures in bench/RESULTS.md).
EXACT_SECONDS_PER_PAIR = 2.5e-8  # one query-key distance inside the blocked top-k (2,000 x 100k: 4.97 s)
HNSW_BUILD_SECONDS_PER_KEY = 6.9e-4  # M 32, ef_construction 200, 2 threads (100k keys: 69 s)
HNSW_SECONDS_PER_QUERY = 5.8e-4  # ef 100, k 10, 100k keys (2,000 queries: 1.15 s)
# So a one-off self search (n x n, bitext) goes exact up to n ~ 45k; 2,000 queries against
# 100k keys go exact (5 s against 70 s of build) unless the index is saved, then HNSW (1.8 s).


def choose_method(queries: int, keys: int, dim: int, settings: "SearchSettings", index_saved: bool = False) -> str:
    """Exact search unless the index (built, or loaded when saved) plus its queries and its
    recall check are expected to cost less."""
    scale = dim / 384
    exact = EXACT_SECONDS_PER_PAIR * scale * queries * keys
    hnsw = ((0.0 if index_saved else HNSW_BUILD_SECONDS_PER_KEY * scale * keys) + HNSW_SECONDS_PER_QUERY * queries
            + EXACT_SECONDS_PER_PAIR * scale * min(settings.recall_sample, queries) * keys)
    return "exact" if exact <= hnsw else "hnsw"


@dataclass(frozen=True)
class SearchSettings:
    method: str = "auto"
    metric: str = "l2"
    M: int = 32
    ef_construction: int = 200
    ef: int = 100
    recall_sample: int = RECALL_SAMPLE

    def __post_init__(self):
        if self.method not in METHODS:
            raise BabelevalError(f"search method {self.method!r} is not one of {', '.join(METHODS)}")
        if self.metric not in METRICS:
            raise BabelevalError(f"search metric {self.metric!r} is not one of {', '.join(METRICS)}")
        for name in ("M", "ef_construction", "ef"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise BabelevalError(f"search {name} must be a whole number >= 1, got {getattr(self, name)!r}")


@dataclass
class SearchResult:
    indices: np.ndarray  # [queries, k], nearest first
    distances: np.ndarray
    method: str
    stats: dict = field(default_factory=dict)


class HnswIndex:
    """hnswlib index with the settings beside it; distances returned like exact search's
    (hnswlib's l2 space gives squared distances, ip gives 1 - dot: both converted)."""

    def __init__(self, dim: int, metric: str = "l2", M: int = 32, ef_construction: int = 200, ef: int = 100):
        import hnswlib

        self.metric = metric
        self.index = hnswlib.Index(space=metric, dim=dim)
        self.M, self.ef_construction, self.ef = M, ef_construction, ef

    def build(self, vectors: np.ndarray, threads: int = -1) -> "HnswIndex":
        self.index.init_index(max_elements=max(len(vectors), 1), M=self.M, ef_construction=self.ef_construction,
                              random_seed=100)
        self.index.add_items(np.asarray(vectors, np.float32), np.arange(len(vectors)), num_threads=threads)
        return self

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        self.index.save_index(str(tmp))
        os.replace(tmp, path)

    def load(self, path: Path, count: int) -> "HnswIndex":
        self.index.load_index(str(path), max_elements=count)
        return self

    def query(self, queries: np.ndarray, k: int, threads: int = -1) -> tuple[np.ndarray, np.ndarray]:
        self.index.set_ef(max(self.ef, k))
        labels, d = self.index.knn_query(np.asarray(queries, np.float32), k=k, num_threads=threads)
        if self.metric == "l2":
            d = np.sqrt(np.maximum(d, 0))
        elif self.metric == "ip":
            d = d - 1.0
        return labels.astype(np.int64), d.astype(np.float32)


def index_key(keys: np.ndarray, settings: SearchSettings) -> str:
    digest = hashlib.sha256(np.ascontiguousarray(keys, np.float32).tobytes())
    digest.update(repr((settings.metric, settings.M, settings.ef_construction)).encode())
    return digest.hexdigest()[:24]


def recall_at_k(approximate: np.ndarray, exact: np.ndarray) -> float:
    """Share of the exact k nearest that the approximate search also returned."""
    k = exact.shape[1]
    hits = sum(len(set(a[:k]) & set(e)) for a, e in zip(approximate, exact))
    return hits / max(exact.size, 1)


def search(queries: np.ndarray, keys: np.ndarray, k: int, settings: SearchSettings = SearchSettings(),
           index_dir: Path | None = None) -> SearchResult:
    k = min(k, len(keys))
    path = index_dir / f"{index_key(keys, settings)}.hnsw" if index_dir else None
    method = settings.method
    if method == "auto":
        method = choose_method(len(queries), len(keys), keys.shape[1], settings, path is not None and path.exists())
    if method == "exact":
        start = time.time()
        indices, distances = exact_search([(queries, keys, 1.0)], k, settings.metric)
        return SearchResult(indices, distances, "exact", {"query_seconds": round(time.time() - start, 3)})
    start = time.time()
    index = HnswIndex(keys.shape[1], settings.metric, settings.M, settings.ef_construction, settings.ef)
    loaded = path is not None and path.exists()
    if loaded:
        index.load(path, len(keys))
    else:
        index.build(keys)
        if path is not None:
            index.save(path)
    built = time.time()
    indices, distances = index.query(queries, k)
    queried = time.time()
    sample = np.linspace(0, len(queries) - 1, min(settings.recall_sample, len(queries))).astype(int)
    exact, _ = exact_search([(queries[sample], keys, 1.0)], k, settings.metric)
    stats = {"build_seconds": round(built - start, 3), "index_loaded": loaded, "query_seconds": round(queried - built, 3),
             f"recall@{k}": recall_at_k(indices[sample], exact), "recall@1": float(np.mean(indices[sample, 0] == exact[:, 0])),
             "recall_queries": len(sample), "M": settings.M, "ef_construction": settings.ef_construction,
             "ef": max(settings.ef, k)}
    return SearchResult(indices, distances, "hnsw", stats)
