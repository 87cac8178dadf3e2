"""Generation tasks: greedy continuations of a prompt, scored against reference texts by
the metrics the task lists. Every record says why its generation stopped (EOS, a stop
string, the length limit), and the results give the share cut by the limit: in scripts a
tokenizer byte-falls-back (Bengali, Amharic with SmolLM2), 32 new tokens can be ten
characters, and that is where exact match goes to zero."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import BabelevalError
from ..metrics.generation import build_metric
from ..requests import Generate, GenerateResult, Translation
from .config import Variant
from .documents import Document, context_of, demonstrations, fields_for_breakdown
from .prompts import prompt_context
from .nearest import demonstration_table
from ..provenance import text_hash
from .templates import evaluate, render


@dataclass(frozen=True)
class Prompt:
    id: str
    context: str
    references: tuple[str, ...]
    fields: tuple[tuple[str, str], ...] = ()  # values of the task's breakdown fields
    translation: Translation | None = None  # the source sentence alone and its languages (a translation task)

    @property
    def prompt_hash(self) -> str:
        return text_hash(self.context)


def references_of(value, origin: str) -> tuple[str, ...]:
    """A target as one text, a list of texts, or SQuAD-style answers ({"text": ...})."""
    values = value if isinstance(value, (list, tuple)) else [value]
    refs = tuple(str(v["text"]) if isinstance(v, dict) and "text" in v else str(v) for v in values if v is not None)
    if not refs:
        raise BabelevalError(f"{origin}: target gave no reference text ({value!r})")
    return refs


class Generation:
    chunked = True

    def __init__(self, variant: Variant):
        self.variant = variant
        self.metrics = [build_metric(m, variant.language) for m in variant.metrics]

    def _prompt(self, doc: Document) -> str:
        return render(self.variant.prompt, context_of(self.variant, doc.fields), "prompt", doc.origin)

    def _references(self, doc: Document) -> tuple[str, ...]:
        return references_of(evaluate(self.variant.target, context_of(self.variant, doc.fields), "target", doc.origin),
                             doc.origin)

    def _translation(self, doc: Document) -> Translation | None:
        spec = self.variant.translation
        if spec is None:
            return None
        text = evaluate(spec.text, context_of(self.variant, doc.fields), "translation text", doc.origin)
        return Translation(str(text), spec.source, spec.target)

    def prepare(self, docs: list[Document], shots: list[Document]) -> list[Prompt]:
        v = self.variant
        out, table = [], demonstration_table(v, docs, shots)
        for doc in docs:
            demos = [(self._prompt(s), self._references(s)[0]) for s in demonstrations(v, shots, doc, table)]
            out.append(Prompt(doc.id, prompt_context(v, demos, self._prompt(doc)), self._references(doc),
                              fields_for_breakdown(v, doc), self._translation(doc)))
        return out

    def requests(self, prompts: list[Prompt]) -> list[Generate]:
        g = self.variant.generation
        return [Generate(p.context, g.stop, g.max_new_tokens, g.max_new_chars, p.translation) for p in prompts]

    def score(self, prompts: list[Prompt], results: list[GenerateResult]) -> list[dict]:
        predictions = [r.text.strip() for r in results]
        references = [list(p.references) for p in prompts]
        per_sample = {}
        for metric in self.metrics:
            per_sample.update(metric.per_sample(predictions, references))
        return [{"id": p.id, "prompt_hash": p.prompt_hash, "fields": dict(p.fields), "generation": r.text, "prediction": predictions[i],
                 "references": list(p.references), "stop_reason": r.stop_reason, "new_tokens": r.new_tokens,
                 **({"translation": p.translation.__dict__} if p.translation else {}),
                 **{k: values[i] for k, values in per_sample.items()}}
                for i, (p, r) in enumerate(zip(prompts, results))]

    def aggregate(self, records: list[dict]) -> dict:
        predictions = [r["prediction"] for r in records]
        references = [r["references"] for r in records]
        out = {}
        for metric in self.metrics:
            if not records:
                out.update({k: float("nan") for k in metric.keys})
                continue
            out.update(metric.corpus(predictions, references))
        out["cut_by_length"] = float(np.mean([r["stop_reason"] == "length" for r in records])) if records else float("nan")
        out["mean_new_tokens"] = float(np.mean([r["new_tokens"] for r in records])) if records else float("nan")
        out["n"] = len(records)
        return out

    def signatures(self) -> dict[str, str]:
        return {m.name: m.signature for m in self.metrics}
