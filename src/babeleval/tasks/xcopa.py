"""XCOPA (Ponti et al. 2020) as lm-evaluation-harness prompts it: the premise without
its final period, a language-specific 'because' / 'therefore', and the two choices
with a lower-cased first letter."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import BabelevalError
from .multiple_choice import Question

CONNECTORS = {
    "et": ("sest", "seetõttu"), "ht": ("poukisa", "donk sa"), "id": ("karena", "maka"),
    "it": ("perché", "quindi"), "qu": ("imataq", "chaymi"), "sw": ("kwa sababu", "kwa hiyo"),
    "ta": ("காரணமாக", "எனவே"), "th": ("เพราะ", "ดังนั้น"), "tr": ("çünkü", "bu yüzden"),
    "vi": ("bởi vì", "vì vậy"), "zh": ("因为", "所以"),
}


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def load_xcopa(path: Path, language: str) -> list[Question]:
    cause, effect = CONNECTORS[language]
    questions = []
    for line_no, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            connector = {"cause": cause, "effect": effect}[doc["question"]]
            context = doc["premise"].strip()[:-1] + f" {connector}"
            options = (_lower_first(doc["choice1"]), _lower_first(doc["choice2"]))
            questions.append(Question(f"{language}-{doc.get('idx', line_no)}", context, options, int(doc["label"])))
        except (json.JSONDecodeError, KeyError, ValueError) as exc:
            raise BabelevalError(f"{path}:{line_no}: bad XCOPA record ({type(exc).__name__}: {exc})") from None
    return questions
