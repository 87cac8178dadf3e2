"""Bitext retrieval (the embedding task kind): embed both sides of a parallel set and find
each source sentence's translation among all targets. Three published rules, side by side:

- MTEB's bitext mining: cosine top-1; accuracy and weighted F1 over gold indices
  (`accuracy`, `f1`, the task's main score as in MTEB);
- MINERS: the k nearest by the task's search metric (L2 by default, as the paper), counted
  right when the gold is among them, else the nearest is the prediction; accuracy and
  weighted F1 at each k (`accuracy@k`, `f1@k`), through exact search or HNSW (with its
  recall against exact search in the results), or DistFuse over several embedders;
- LASER's xSIM error rate with the ratio margin over the 4 nearest (`xsim_error`, a share).

Directions are variants (an axis in the task file; `reverse: true` searches target ->
source): the reverse direction embeds nothing new, its sentences come from the cache. The whole set is one search, not chunks.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import BabelevalError
from ..metrics.means import mean_and_stderr
from ..retrieval.exact import exact_search
from ..retrieval.metrics import prediction_at_k, weighted_f1, xsim_predictions
from .config import Variant
from .documents import Document, context_of
from .neighbours import embed_requests, nearest
from .templates import evaluate


@dataclass(frozen=True)
class Pair:
    id: str
    source: str
    target: str


class Bitext:
    chunked = False  # one nearest-neighbour search over the whole subset

    def __init__(self, variant: Variant):
        self.variant = variant
        self.search_stats = {}

    def prepare(self, docs: list[Document], shots: list[Document]) -> list[Pair]:
        out = []
        for doc in docs:
            ctx = context_of(self.variant, doc.fields)
            source = evaluate(self.variant.source_text, ctx, "source_text", doc.origin)
            target = evaluate(self.variant.target_text, ctx, "target_text", doc.origin)
            if not str(source).strip() or not str(target).strip():
                raise BabelevalError(f"{doc.origin}: an empty sentence in the pair")
            if self.variant.reverse:
                source, target = target, source
            out.append(Pair(doc.id, str(source), str(target)))
        return out

    def _texts(self, pairs: list[Pair]) -> list[str]:
        return [p.source for p in pairs] + [p.target for p in pairs]

    def requests(self, pairs: list[Pair]):
        return embed_requests(self.variant, self._texts(pairs))

    def score(self, pairs: list[Pair], embeddings) -> list[dict]:
        v, n = self.variant, len(pairs)
        texts = self._texts(pairs)
        found = nearest(v, texts[:n], texts[n:], embeddings, max(v.ks))
        self.search_stats = {"method": found.method, **found.stats}
        if v.fuse:
            top1, xsim = found.indices[:, 0], [None] * n
        else:
            x = np.asarray(embeddings, np.float32)
            top1 = (found.indices[:, 0] if v.search.metric == "cosine" and found.method == "exact"
                    else exact_search([(x[:n], x[n:], 1.0)], 1, "cosine")[0][:, 0])
            xsim = xsim_predictions(x[:n], x[n:], k=min(4, n)).tolist()
        return [{"id": p.id, "gold": i, "nearest": found.indices[i].tolist(), "prediction": int(top1[i]),
                 "accuracy": float(top1[i] == i), "xsim_prediction": xsim[i]} for i, p in enumerate(pairs)]

    def aggregate(self, records: list[dict]) -> dict:
        if not records:
            return {"n": 0}
        # a gold index names a sentence of one variant's set: keep sets apart when pooled
        keys = np.array([r.get("key", "") for r in records])
        gold = np.array([r["gold"] for r in records])
        label = lambda idx: np.char.add(np.char.add(keys, "|"), idx.astype(str))  # noqa: E731
        out = {"f1": weighted_f1(label(gold), label(np.array([r["prediction"] for r in records]))),
               **mean_and_stderr("accuracy", [r["accuracy"] for r in records])}
        width = min(len(r["nearest"]) for r in records)
        near = np.array([r["nearest"][:width] for r in records])
        for k in self.variant.ks:
            predicted = prediction_at_k(near, gold, k)
            out.update(mean_and_stderr(f"accuracy@{k}", predicted == gold))
            out[f"f1@{k}"] = weighted_f1(label(gold), label(predicted))
        if all(r.get("xsim_prediction") is not None for r in records):
            out.update(mean_and_stderr("xsim_error", [r["xsim_prediction"] != r["gold"] for r in records]))
        out["n"] = len(records)
        return out

    def report(self) -> dict:
        return self.search_stats
