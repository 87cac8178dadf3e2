"""What the retrieval kinds (bitext, knn) share: the Embed requests for their texts, and the
k-nearest-neighbour search over those embeddings, through the model being evaluated or,
with `fuse:`, through several embedders whose distances add up with the given weights
(DistFuse). The embedders other than the model answer from their on-disk cache."""
from __future__ import annotations

import numpy as np

from ..requests import Embed
from .config import Variant

MODEL = "model"  # in fuse: the model being evaluated


def uses_model(variant: Variant) -> bool:
    return not variant.fuse or any(spec == MODEL for spec, _ in variant.fuse)


def embed_requests(variant: Variant, texts: list[str]) -> list[Embed]:
    return [Embed(t) for t in texts] if uses_model(variant) else []


def _vectors(spec: str, texts: list[str], model_vectors):
    if spec == MODEL:
        return np.asarray(model_vectors, np.float32)
    from ..retrieval.embedders import cached

    return cached(spec).embed(texts)


def nearest(variant: Variant, queries: list[str], keys: list[str], model_vectors, k: int):
    """SearchResult for each query's k nearest keys; model_vectors: the model's embeddings of
    queries + keys in that order (as embed_requests asked for them)."""
    from ..retrieval.embedders import embeddings_dir
    from ..retrieval.exact import exact_search
    from ..retrieval.search import SearchResult, search

    n = len(queries)
    if not variant.fuse:
        x = np.asarray(model_vectors, np.float32)
        return search(x[:n], x[n:], k, variant.search, embeddings_dir() / "hnsw")
    parts = []
    for spec, weight in variant.fuse:
        x = _vectors(spec, queries + keys, model_vectors)
        parts.append((x[:n], x[n:], weight))
    indices, distances = exact_search(parts, k, variant.search.metric)
    return SearchResult(indices, distances, "exact (DistFuse)", {"fuse": [list(f) for f in variant.fuse]})

