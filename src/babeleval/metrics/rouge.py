"""ROUGE-L F-measure (LCS of tokens; best reference per segment; corpus = mean x 100),
computed by the numba kernel in babeleval.kernels.rouge.

Tokenisation works for every script, unlike rouge_score's default (which keeps only
[a-z0-9] and so scores Hindi or Amharic summaries as empty): lowercase, split on
whitespace and Unicode punctuation, and make every character of the scripts written
without spaces (Thai, Lao, Khmer, Myanmar, kana, Han) a token of its own. No stemming.
"""
from __future__ import annotations

import numba
import numpy as np

from ..kernels.encoding import encode, encode_streams, space_table, unicode_tables
from ..kernels.rouge import rouge_l
from ..scripts import no_space_table

SIGNATURE = "rougeL|tok:space+unicode-punct+nospace-chars|case:lc|stem:no|refs:best-f|agg:mean"


def rouge_l_scores(hypotheses: list[str], references: list[list[str]]) -> np.ndarray:
    """[segments, 3]: precision, recall, F1 (0..1) against the best-F reference.
    references: one list per reference stream, each as long as hypotheses."""
    h_codes, h_off = encode(hypotheses, lower=True)
    r_codes, r_off = encode_streams(references, len(hypotheses), lower=True)
    punct, _ = unicode_tables()
    return rouge_l(h_codes, h_off, r_codes, r_off, space_table(), punct, no_space_table(), numba.get_num_threads())


def rouge_l_corpus(hypotheses: list[str], references: list[list[str]]) -> float:
    scores = rouge_l_scores(hypotheses, references)
    return 100.0 * float(scores[:, 2].mean()) if len(scores) else 0.0
