"""Multiple choice by log-likelihood (the lm-evaluation-harness semantics).

One request per option: context = the prompt (after any few-shot block), continuation =
target delimiter + the option text (sequence-based scoring) or + its label (label-based:
the letter, or a native label such as ሀ ለ ሐ መ). acc takes the arg-max log-likelihood;
acc_norm divides by the choice's length in characters and acc_bytes by its UTF-8 bytes,
both WITHOUT the delimiter (lm-eval's rule); acc_per_token by its token count (the MINERS
rule); acc_mutual_info subtracts log P(choice) with an empty context. Rows with duplicate or
empty options or a target that names no option follow the task's bad_rows policy
(tasks/bad_rows.py): kept ones are scored as lm-eval scores them (an unknown gold is never
right, an empty option's acc_norm is its log-likelihood over 0 characters).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import BabelevalError
from ..metrics.means import mean_and_stderr
from ..requests import Generate, GenerateResult, Loglikelihood, LoglikelihoodResult
from .bad_rows import BadRowLog, option_problems
from .config import LETTERS, Variant
from .documents import Document, context_of, demonstrations, fields_for_breakdown
from .prompts import prompt_context
from .nearest import demonstration_table
from .order import permutation
from ..provenance import text_hash
from .templates import evaluate, render
from .verbalise import verbalise


@dataclass(frozen=True)
class Question:
    id: str
    context: str
    choices: tuple[str, ...]  # what each continuation says: option texts, or labels
    options: tuple[str, ...]  # the option texts in the order shown
    gold: int | None  # None: the target names no option (a kept bad row)
    order: tuple[int, ...]  # the original index of each shown option
    delimiter: str = " "
    fields: tuple[tuple[str, str], ...] = ()  # values of the task's breakdown fields
    problems: tuple[str, ...] = ()  # the bad-row problems of a kept row

    @property
    def prompt_hash(self) -> str:
        return text_hash(self.context)


def gold_index(value, options: list[str], labels: tuple[str, ...], origin: str) -> int:
    """find_gold, or an error naming the row."""
    index = find_gold(value, options, labels)
    if index is None:
        n = len(options)
        raise BabelevalError(f"{origin}: target {value!r} is not an option: expected an index 0..{n - 1}, a label "
                             f"({', '.join(labels)}), option1..option{n}, or an option's text")
    return index


def find_gold(value, options: list[str], labels: tuple[str, ...]) -> int | None:
    """A target as an index (0-based), a label (B, or a native label), "optionN" (1-based,
    as MILU writes it), a digit string, or the literal option text; None if it names no option."""
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
    return index if index is not None and 0 <= index < n else None


class MultipleChoice:
    chunked = True  # documents are independent: scored and saved in chunks

    def __init__(self, variant: Variant):
        self.variant = variant
        self.bad_rows = BadRowLog()  # filled by prepare

    def _options(self, doc: Document) -> tuple[list[str], int | None, list[tuple[str, str]]]:
        """The row's options, its gold index (None: the target names no option) and its problems."""
        ctx = context_of(self.variant, doc.fields)
        options = evaluate(self.variant.choices, ctx, "choices", doc.origin)
        if not isinstance(options, (list, tuple)) or not options:
            raise BabelevalError(f"{doc.origin}: choices gave {options!r}, expected a non-empty list")
        options = [str(o) for o in options]
        target = evaluate(self.variant.target, ctx, "target", doc.origin)
        gold = find_gold(target, options, self._labels(len(options)))
        return options, gold, option_problems(options, gold, target)

    def _scorable(self, options: list[str], gold: int | None) -> bool:
        """An empty option with no delimiter is an empty continuation; gold-first/last need a gold."""
        empty = self.variant.scoring == "sequence" and any(not (self.variant.target_delimiter + o) for o in options)
        return not empty and (gold is not None or self.variant.order not in ("gold-first", "gold-last"))

    def _demonstration(self, shot: Document) -> tuple[str, str]:
        options, gold, problems = self._options(shot)
        if gold is None:
            raise BabelevalError(f"{shot.origin}: a demonstration's {problems[-1][1]}")
        return self._prompt(shot, options), self._answer(options, gold)

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
            options, gold, problems = self._options(doc)
            if problems and not self.bad_rows.decide(v.bad_rows, problems, doc.origin, self._scorable(options, gold)):
                continue
            perm = permutation(v.order, len(options), gold, v.order_seed, doc.id)
            shown = [options[i] for i in perm]
            shown_gold = None if gold is None else perm.index(gold)
            demos = [self._demonstration(shot) for shot in demonstrations(v, shots, doc, table)]
            context = prompt_context(v, demos, self._prompt(doc, shown))
            choices = tuple(shown) if v.scoring == "sequence" else self._labels(len(shown))
            questions.append(Question(doc.id, context, tuple(choices), tuple(shown), shown_gold, tuple(perm),
                                      v.target_delimiter, fields_for_breakdown(v, doc), tuple(p for p, _ in problems)))
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
            chars = np.array([len(c) for c in q.choices], dtype=float)  # 0 for an empty option, as in lm-eval
            nbytes = np.array([len(c.encode("utf-8")) for c in q.choices], dtype=float)
            ntok = np.array([max(r.num_tokens, 1) for r in res])
            with np.errstate(divide="ignore", invalid="ignore"):
                rules = {"acc": ll, "acc_norm": ll / chars, "acc_bytes": ll / nbytes, "acc_per_token": ll / ntok}
            record = {"id": q.id, "prompt_hash": q.prompt_hash, "fields": dict(q.fields), "gold": q.gold, "order": list(q.order),
                      "loglikelihoods": ll.tolist(), "num_tokens": ntok.tolist(), "is_greedy": [r.is_greedy for r in res]}
            if unconditional is not None:
                uncond = np.array([r.logprob for r in results[unconditional + i: unconditional + i + k]])
                rules["acc_mutual_info"] = ll - uncond
                record["unconditional"] = uncond.tolist()
            i += k
            prediction = int(np.argmax(ll))
            record.update(prediction=prediction, chosen=q.options[prediction], target=_target(q))
            for name in self.variant.metrics:
                record[name] = float(int(np.argmax(rules[name])) == q.gold)
            records.append(_flagged(record, q))
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
            records.append(_flagged({"id": q.id, "prompt_hash": q.prompt_hash, "fields": dict(q.fields), "gold": q.gold,
                                     "order": list(q.order), "generation": r.text, "stop_reason": r.stop_reason,
                                     "prediction": -1 if prediction is None else prediction,
                                     "chosen": None if prediction is None else q.options[prediction],
                                     "target": _target(q), "no_answer": float(prediction is None),
                                     "acc": float(prediction is not None and prediction == q.gold)}, q))
        return records

    def aggregate(self, records: list[dict]) -> dict:
        return mean_metrics(records, ("acc", "no_answer"))


def _target(q: Question) -> str | None:
    return None if q.gold is None else q.options[q.gold]


def _flagged(record: dict, q: Question) -> dict:
    """A kept bad row's record names its problems (clean rows' records are unchanged)."""
    return {**record, "bad_row": list(q.problems)} if q.problems else record


def mean_metrics(records: list[dict], names) -> dict:
    """Mean of per-record 0/1 (or 0..100) scores with the standard error of the mean."""
    out = {}
    for name in names:
        out.update(mean_and_stderr(name, [r[name] for r in records]))
    out["n"] = len(records)
    return out
