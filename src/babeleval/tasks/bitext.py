"""Bitext retrieval (the embedding task kind): embed both sides of a parallel set, find
each source sentence's nearest target by cosine similarity, and count it right when it is
its own translation (MTEB's bitext mining: accuracy and weighted F1 over gold indices).
The whole set is one search, so a subset is scored at once, not in chunks.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import BabelevalError
from ..requests import Embed
from .config import Variant
from .documents import Document, context_of
from .templates import evaluate


@dataclass(frozen=True)
class Pair:
    id: str
    source: str
    target: str


def weighted_f1(gold: np.ndarray, predicted: np.ndarray) -> float:
    """scikit-learn's f1_score(average="weighted", zero_division=0): per-label F1 weighted by
    the label's count in gold (labels only predicted weigh nothing)."""
    labels, support = np.unique(gold, return_counts=True)
    total = 0.0
    for label, count in zip(labels, support):
        tp = np.sum((predicted == label) & (gold == label))
        precision = tp / max(np.sum(predicted == label), 1)
        recall = tp / count
        total += count * (2 * precision * recall / (precision + recall) if precision + recall else 0.0)
    return float(total / len(gold)) if len(gold) else float("nan")


class Bitext:
    chunked = False  # one nearest-neighbour search over the whole subset

    def __init__(self, variant: Variant):
        self.variant = variant

    def prepare(self, docs: list[Document], shots: list[Document]) -> list[Pair]:
        out = []
        for doc in docs:
            ctx = context_of(self.variant, doc.fields)
            source = evaluate(self.variant.source_text, ctx, "source_text", doc.origin)
            target = evaluate(self.variant.target_text, ctx, "target_text", doc.origin)
            if not str(source).strip() or not str(target).strip():
                raise BabelevalError(f"{doc.origin}: an empty sentence in the pair")
            out.append(Pair(doc.id, str(source), str(target)))
        return out

    def requests(self, pairs: list[Pair]) -> list[Embed]:
        return [Embed(p.source) for p in pairs] + [Embed(p.target) for p in pairs]

    def score(self, pairs: list[Pair], embeddings: np.ndarray) -> list[dict]:
        x = np.asarray(embeddings, np.float32)
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        source, target = x[: len(pairs)], x[len(pairs):]
        nearest = np.argmax(source @ target.T, axis=1)
        return [{"id": p.id, "gold": i, "prediction": int(nearest[i]), "accuracy": float(nearest[i] == i)}
                for i, p in enumerate(pairs)]

    def aggregate(self, records: list[dict]) -> dict:
        # a gold index names a sentence of one variant's set: keep sets apart when pooled
        gold = np.array([f"{r.get('key', '')}|{r['gold']}" for r in records])
        predicted = np.array([f"{r.get('key', '')}|{r['prediction']}" for r in records])
        accuracy = np.array([r["accuracy"] for r in records], float)
        return {"accuracy": float(accuracy.mean()) if len(records) else float("nan"),
                "f1": weighted_f1(gold, predicted), "n": len(records)}
