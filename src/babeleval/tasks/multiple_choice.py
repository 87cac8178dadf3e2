"""Multiple choice by log-likelihood (the lm-evaluation-harness semantics).

One request per option: context = the prompt, continuation = delimiter + option.
acc takes the arg-max log-likelihood; acc_norm divides by the option's length in
characters; acc_bytes by its UTF-8 bytes (fair across scripts); acc_per_token by its
token count (the MINERS rule).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.requests import Loglikelihood, LoglikelihoodResult


@dataclass(frozen=True)
class Question:
    id: str
    context: str
    options: tuple[str, ...]
    gold: int
    delimiter: str = " "


def requests_for(questions: list[Question]) -> list[Loglikelihood]:
    return [Loglikelihood(q.context, q.delimiter + o) for q in questions for o in q.options]


def score_questions(questions: list[Question], results: list[LoglikelihoodResult]) -> list[dict]:
    """Per-question record: every rule's prediction and correctness (what samples.jsonl stores)."""
    records, i = [], 0
    for q in questions:
        res = results[i: i + len(q.options)]
        i += len(q.options)
        ll = np.array([r.logprob for r in res])
        chars = np.array([max(len(q.delimiter + o), 1) for o in q.options])
        nbytes = np.array([max(len((q.delimiter + o).encode("utf-8")), 1) for o in q.options])
        ntok = np.array([max(r.num_tokens, 1) for r in res])
        preds = {"acc": ll, "acc_norm": ll / chars, "acc_bytes": ll / nbytes, "acc_per_token": ll / ntok}
        record = {"id": q.id, "gold": q.gold, "loglikelihoods": ll.tolist(),
                  "is_greedy": [r.is_greedy for r in res]}
        for name, values in preds.items():
            record[name] = float(int(np.argmax(values)) == q.gold)
        record["prediction"] = int(np.argmax(ll))
        records.append(record)
    return records


def aggregate(records: list[dict]) -> dict:
    names = ("acc", "acc_norm", "acc_bytes", "acc_per_token")
    out = {name: float(np.mean([r[name] for r in records])) if records else float("nan") for name in names}
    out["n"] = len(records)
    return out
