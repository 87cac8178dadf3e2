"""SQuAD exact match and token F1 (max over gold answers, mean x 100), computed by the numba
kernel in babeleval.kernels.squad.

Two normalisations:
- "official": the SQuAD v1.1 evaluation script: lowercase, drop ASCII punctuation only
  (the Devanagari danda and other Unicode punctuation stay), remove a/an/the, split on
  whitespace.
- "multilingual": MLQA's evaluator: drop all Unicode punctuation (category P*), the
  article words of the answer's language, whitespace tokens; for zh every CJK ideograph
  (U+4E00-U+9FA5) is a token of its own. MLQA's Arabic rule (strip every "ال" substring)
  is not a word rule and is not applied.
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from ..kernels.encoding import ascii_punct_table, code_point_table, encode, space_table, unicode_tables
from ..kernels.squad import exact_and_f1

ARTICLES = {
    "en": ("a", "an", "the"),
    "es": ("un", "una", "unos", "unas", "el", "la", "los", "las"),
    "de": ("ein", "eine", "einen", "einem", "eines", "einer", "der", "die", "das", "den", "dem", "des"),
    "vi": ("của", "là", "cái", "chiếc", "những"),
}
SPLIT_EACH_CHARACTER = {"zh": ((0x4E00, 0x9FA5),)}
MODES = ("official", "multilingual")


@dataclass(frozen=True)
class SQuAD:
    mode: str = "official"
    language: str = "en"

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"SQuAD mode {self.mode!r}: expected one of {', '.join(MODES)}")

    @property
    def signature(self) -> str:
        if self.mode == "official":
            return "squad|norm:v1.1|punct:ascii|articles:en|tok:whitespace"
        articles = "+".join(ARTICLES.get(self.language, ())) or "none"
        tok = "whitespace+cjk-chars" if self.language in SPLIT_EACH_CHARACTER else "whitespace"
        return f"squad|norm:mlqa|lang:{self.language}|punct:unicode-P|articles:{articles}|tok:{tok}"

    def _tables(self):
        punct, word = unicode_tables()
        if self.mode == "official":
            return ascii_punct_table(), word, ARTICLES["en"], ()
        return punct, word, ARTICLES.get(self.language, ()), SPLIT_EACH_CHARACTER.get(self.language, ())

    def scores(self, predictions: list[str], answers: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
        """Per question (exact match, F1) in 0..1, each the max over that question's gold answers."""
        if len(predictions) != len(answers):
            raise ValueError(f"{len(predictions)} predictions but {len(answers)} answer lists")
        punct, word, articles, single = self._tables()
        p_codes, p_off = encode(predictions, lower=True)
        g_codes, g_off = encode([a for golds in answers for a in golds], lower=True)
        g_group = np.zeros(len(answers) + 1, np.int64)
        np.cumsum([len(golds) for golds in answers], out=g_group[1:])
        a_codes, a_off = encode(list(articles))
        return exact_and_f1(p_codes, p_off, g_codes, g_off, g_group, punct, word, space_table(), a_codes, a_off,
                            code_point_table(tuple(single)), numba.get_num_threads())

    def corpus_score(self, predictions: list[str], answers: list[list[str]]) -> dict[str, float]:
        em, f1 = self.scores(predictions, answers)
        n = max(len(em), 1)
        return {"exact_match": 100.0 * em.sum() / n, "f1": 100.0 * f1.sum() / n}
