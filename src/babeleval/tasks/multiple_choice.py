"""Multiple choice by log-likelihood (the lm-evaluation-harness semantics).

One request per option: context = the prompt (after any few-shot block), continuation =
target delimiter + the option text (sequence-based scoring) or + its label (label-based:
the letter, or a native label such as ሀ ለ ሐ መ). acc takes the arg-max log-likelihood;
acc_norm divides by the choice's length in characters and acc_bytes by its UTF-8 bytes,
both WITHOUT the delimiter (lm-eval's rule); acc_per_token by its token count (the MINERS
rule); acc_mutual_info subtracts log P(choice) with an empty context.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import BabelevalError
from ..metrics.means import mean_and_stderr
from ..requests import Generate, GenerateResult, Loglikelihood, LoglikelihoodResult
from .config import LETTERS, Variant
from .documents import Document, context_of, demonstrations, fields_for_breakdown, with_shots
from .nearest import demonstration_table
from .order import permutation, reorder
from .templates import evaluate, render, text_hash
from .verbalise import verbalise


@dataclass(frozen=True)
class Question:
    id: str
    context: str
    choices: tuple[str, ...]  # what each continuation says: option texts, or labels
    options: tuple[str, ...]  # the option texts in the order shown
    gold: int
    order: tuple[int, ...]  # the original index of each shown option
    delimiter: str = " "
    fields: tuple[tuple[str, str], ...] = ()  # values of the task's breakdown fields

    @property
    def prompt_hash(self) -> str:
        return text_hash(self.context)


def gold_index(value, options: list[str], labels: tuple[str, ...], origin: str) -> int:
    """A target as an index (0-based), a label (B, or a native label), "optionN" (1-based,
    as MILU writes it), a digit string, or the literal option text."""
    n = len(options)
    if isinstance(value, bool) or value is None:
        index = None
    elif isinstance(value, int):
        index = value
    else:
        text = str(value).strip()
        if text in labels:
            index = labels.index(text)
        elif text.lower().startswith("option") and text[6:].strip().isdigit():
            index = int(text[6:]) - 1
        elif text.isdigit():
            index = int(text)
        elif text in options:
            index = options.index(text)
        else:
            index = None
    if index is None or not 0 <= index < n:
        raise BabelevalError(f"{origin}: target {value!r} is not an option: expected an index 0..{n - 1}, a label "
                             f"({', '.join(labels)}), option1..option{n}, or an option's text")
    return index


class MultipleChoice:
    chunked = True  # documents are independent: scored and saved in chunks

    def __init__(self, variant: Variant):
        self.variant = variant

    def _options(self, doc: Document) -> tuple[list[str], int]:
        ctx = context_of(self.variant, doc.fields)
        options = evaluate(self.variant.choices, ctx, "choices", doc.origin)
        if not isinstance(options, (list, tuple)) or not options:
            raise BabelevalError(f"{doc.origin}: choices gave {options!r}, expected a non-empty list")
        options = [str(o) for o in options]
        empty = [i + 1 for i, o in enumerate(options) if not o.strip()]
        if empty:
            raise BabelevalError(f"{doc.origin}: choice {empty[0]} of {len(options)} is empty")
        first = {}
        for i, o in enumerate(options):
            if o.strip() in first:
                raise BabelevalError(f"{doc.origin}: choices {first[o.strip()] + 1} and {i + 1} are the same text "
                                     f"{o.strip()!r} (duplicate choices make the answer ambiguous)")
            first[o.strip()] = i
        gold = gold_index(evaluate(self.variant.target, ctx, "target", doc.origin), options, self._labels(len(options)),
                          doc.origin)
        return options, gold

    def _labels(self, n: int) -> tuple[str, ...]:
        labels = self.variant.labels or LETTERS[:n]
        if len(labels) < n:
            raise BabelevalError(f"{self.variant.where}: {n} choices but only {len(labels)} labels")
        return tuple(labels[:n])

    def _prompt(self, doc: Document, options: list[str]) -> str:
        ctx = {**context_of(self.variant, doc.fields), "choices": options, "labels": self._labels(len(options))}
        return render(self.variant.prompt, ctx, "prompt", doc.origin)

    def _answer(self, options: list[str], gold: int) -> str:
        return options[gold] if self.variant.scoring == "sequence" else self._labels(len(options))[gold]

    def prepare(self, docs: list[Document], shots: list[Document]) -> list[Question]:
        v = self.variant
        questions, table = [], demonstration_table(v, docs, shots)
        for doc in docs:
            options, gold = self._options(doc)
            perm = permutation(v.order, len(options), gold, v.order_seed, doc.id)
            shown, shown_gold = reorder(options, gold, perm)
            demos = []
            for shot in demonstrations(v, shots, doc, table):
                shot_options, shot_gold = self._options(shot)
                demos.append(self._prompt(shot, shot_options) + v.target_delimiter + self._answer(shot_options, shot_gold))
            context = with_shots(v, demos, self._prompt(doc, shown))
            choices = tuple(shown) if v.scoring == "sequence" else self._labels(len(shown))
            questions.append(Question(doc.id, context, tuple(choices), tuple(shown), shown_gold, tuple(perm),
                                      v.target_delimiter, fields_for_breakdown(v, doc)))
        return questions

    def requests(self, questions: list[Question]) -> list[Loglikelihood]:
        out = [Loglikelihood(q.context, q.delimiter + c) for q in questions for c in q.choices]
        if "acc_mutual_info" in self.variant.metrics:
            out += [Loglikelihood("", q.delimiter + c) for q in questions for c in q.choices]  # lm-eval keeps the delimiter
        return out

    def score(self, questions: list[Question], results: list[LoglikelihoodResult]) -> list[dict]:
        """Per-question records: every rule's prediction and correctness (what samples_<task>.jsonl stores)."""
        records, i = [], 0
        unconditional = len(results) // 2 if "acc_mutual_info" in self.variant.metrics else None
        for q in questions:
            k = len(q.choices)
            res = results[i: i + k]
            ll = np.array([r.logprob for r in res])
            chars = np.array([max(len(c), 1) for c in q.choices])
            nbytes = np.array([max(len(c.encode("utf-8")), 1) for c in q.choices])
            ntok = np.array([max(r.num_tokens, 1) for r in res])
            rules = {"acc": ll, "acc_norm": ll / chars, "acc_bytes": ll / nbytes, "acc_per_token": ll / ntok}
            record = {"id": q.id, "prompt_hash": q.prompt_hash, "fields": dict(q.fields), "gold": q.gold, "order": list(q.order),
                      "loglikelihoods": ll.tolist(), "num_tokens": ntok.tolist(), "is_greedy": [r.is_greedy for r in res]}
            if unconditional is not None:
                uncond = np.array([r.logprob for r in results[unconditional + i: unconditional + i + k]])
                rules["acc_mutual_info"] = ll - uncond
                record["unconditional"] = uncond.tolist()
            i += k
            prediction = int(np.argmax(ll))
            record.update(prediction=prediction, chosen=q.options[prediction], target=q.options[q.gold])
            for name in self.variant.metrics:
                record[name] = float(int(np.argmax(rules[name])) == q.gold)
            records.append(record)
        return records

    def aggregate(self, records: list[dict]) -> dict:
        return mean_metrics(records, self.variant.metrics)


class MultipleChoiceByGeneration(MultipleChoice):
    """The model writes its answer (greedy); a verbaliser maps it to an option: how closed
    models are run (ProverbEval's and MINERS' GPT-4o). acc counts "no answer" as wrong, and
    its share is reported beside."""

    def requests(self, questions: list[Question]) -> list[Generate]:
        g = self.variant.generation
        return [Generate(q.context, g.stop, g.max_new_tokens, g.max_new_chars) for q in questions]

    def score(self, questions: list[Question], results: list[GenerateResult]) -> list[dict]:
        records = []
        for q, r in zip(questions, results):
            prediction = verbalise(r.text, q.choices, q.options)
            records.append({"id": q.id, "prompt_hash": q.prompt_hash, "fields": dict(q.fields), "gold": q.gold,
                            "order": list(q.order), "generation": r.text, "stop_reason": r.stop_reason,
                            "prediction": -1 if prediction is None else prediction,
                            "chosen": None if prediction is None else q.options[prediction],
                            "target": q.options[q.gold], "no_answer": float(prediction is None),
                            "acc": float(prediction == q.gold)})
        return records

    def aggregate(self, records: list[dict]) -> dict:
        return mean_metrics(records, ("acc", "no_answer"))


def mean_metrics(records: list[dict], names) -> dict:
    """Mean of per-record 0/1 (or 0..100) scores with the standard error of the mean."""
    out = {}
    for name in names:
        out.update(mean_and_stderr(name, [r[name] for r in records]))
    out["n"] = len(records)
    return out
