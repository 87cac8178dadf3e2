"""Retrieval-based classification (MINERS): embed the test texts and a labelled pool (the
training split of the same language, or of another one: cross-lingual), take each text's k
nearest pool examples and vote (the most common label; a tie goes to the label met first,
the nearer one). Accuracy and macro F1 at every k, beside a majority-label baseline (the
pool's most common label) and a random one (a label drawn per document with a fixed seed).
"""
from __future__ import annotations

import hashlib
import random
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..errors import BabelevalError
from ..metrics.means import mean_and_stderr
from ..retrieval.metrics import macro_f1, vote
from .config import Variant
from .documents import Document, context_of
from .neighbours import embed_requests, nearest
from .templates import evaluate


@dataclass(frozen=True)
class Example:
    id: str
    text: str
    label: str


class NearestNeighbourClassification:
    chunked = False  # one search of the whole test set against the pool

    def __init__(self, variant: Variant):
        self.variant = variant
        self.pool: list[Example] = []
        self.search_stats = {}

    def _examples(self, docs: list[Document]) -> list[Example]:
        out = []
        for doc in docs:
            ctx = context_of(self.variant, doc.fields)
            text = str(evaluate(self.variant.source_text, ctx, "source_text", doc.origin))
            label = str(evaluate(self.variant.target, ctx, "target", doc.origin)).strip()
            if not text.strip():
                raise BabelevalError(f"{doc.origin}: the text is empty")
            if self.variant.labels and label not in self.variant.labels:
                raise BabelevalError(f"{doc.origin}: label {label!r} is not one of {', '.join(self.variant.labels)}")
            out.append(Example(doc.id, text, label))
        return out

    def prepare(self, docs: list[Document], pool: list[Document]) -> list[Example]:
        self.pool = self._examples(pool)
        if not self.pool:
            raise BabelevalError(f"{self.variant.where}: the pool of labelled examples is empty")
        return self._examples(docs)

    def _texts(self, examples: list[Example]) -> list[str]:
        return [e.text for e in examples] + [e.text for e in self.pool]

    def requests(self, examples: list[Example]):
        return embed_requests(self.variant, self._texts(examples))

    def score(self, examples: list[Example], embeddings) -> list[dict]:
        v, texts = self.variant, self._texts(examples)
        found = nearest(v, texts[:len(examples)], texts[len(examples):], embeddings, max(v.ks))
        self.search_stats = {"method": found.method, "pool": len(self.pool), **found.stats}
        counts = Counter(e.label for e in self.pool)
        majority = max(counts, key=lambda label: (counts[label], -list(counts).index(label)))
        labels = sorted(counts)
        records = []
        for e, row in zip(examples, found.indices):
            neighbours = [self.pool[j].label for j in row]
            seed = hashlib.sha256(f"{v.order_seed}|random-baseline|{e.id}".encode()).digest()
            record = {"id": e.id, "gold": e.label, "neighbours": neighbours, "neighbour_ids": [self.pool[j].id for j in row],
                      "majority": majority, "random": random.Random(seed).choice(labels)}
            for k in v.ks:
                record[f"prediction@{k}"] = vote(neighbours[:k])
            records.append(record)
        return records

    def aggregate(self, records: list[dict]) -> dict:
        if not records:
            return {"n": 0}
        gold = np.array([r["gold"] for r in records])
        out = {}
        for name in [f"prediction@{k}" for k in self.variant.ks] + ["majority", "random"]:
            predicted = np.array([r[name] for r in records])
            stem = name.replace("prediction", "")
            out.update(mean_and_stderr(f"accuracy{stem}" if "@" in stem else f"{name}_accuracy", predicted == gold))
            out[f"macro_f1{stem}" if "@" in stem else f"{name}_macro_f1"] = macro_f1(gold, predicted)
        out["n"] = len(records)
        return out

    def report(self) -> dict:
        return self.search_stats
