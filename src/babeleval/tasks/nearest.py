"""Retrieved demonstrations (fewshot sampler `nearest`, MINERS' ICL): each document's n
nearest training examples by Euclidean distance between the retriever's embeddings (not
normalised, as MINERS retrieves), nearest first; never the document itself."""
from __future__ import annotations

from .config import Variant
from .documents import Document, context_of, same_document
from .templates import evaluate


def _texts(variant: Variant, docs: list[Document]) -> list[str]:
    return [str(evaluate(variant.fewshot.text, context_of(variant, d.fields), "fewshot text", d.origin)) for d in docs]


def demonstration_table(variant: Variant, docs: list[Document], shots: list[Document]) -> dict | None:
    """For sampler nearest: every document's retrieved demonstrations (one embedding pass for
    all); None for the other samplers, which documents.demonstrations draws per document."""
    if variant.fewshot.sampler != "nearest" or not variant.fewshot.n:
        return None
    return nearest_demonstrations(variant, docs, shots)


def nearest_demonstrations(variant: Variant, docs: list[Document], shots: list[Document]) -> dict[str, list[Document]]:
    from ..retrieval.embedders import cached
    from ..retrieval.exact import exact_search

    n = variant.fewshot.n
    if not docs or not n:
        return {d.id: [] for d in docs}
    retriever = cached(variant.fewshot.retriever)
    queries, keys = retriever.embed(_texts(variant, docs)), retriever.embed(_texts(variant, shots))
    nearest, _ = exact_search([(queries, keys, 1.0)], n + 1, "l2")
    table = {}
    for doc, row in zip(docs, nearest):
        picked = [shots[j] for j in row if not same_document(shots[j], doc)]
        table[doc.id] = picked[:n]
    return table
