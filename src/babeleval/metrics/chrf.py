"""chrF and chrF++ with sacreBLEU 2.x's numbers and signature, computed by the numba
kernel. BLEU and TER are sacreBLEU's own (bleu(), ter()): not re-implemented."""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from ..kernels.chrf import f_score, segment_statistics
from ..kernels.encoding import ascii_punct_table, encode, encode_streams, space_table


@dataclass(frozen=True)
class CHRF:
    char_order: int = 6
    word_order: int = 0
    beta: int = 2
    lowercase: bool = False
    whitespace: bool = False
    eps_smoothing: bool = False

    @property
    def order(self) -> int:
        return self.char_order + self.word_order

    @property
    def name(self) -> str:
        return f"chrF{self.beta}{'+' * self.word_order}"

    def signature(self, nrefs: int = 1) -> str:
        """sacreBLEU's signature string: every setting that changes the number."""
        return (f"nrefs:{nrefs}|case:{'lc' if self.lowercase else 'mixed'}"
                f"|eff:{'no' if self.eps_smoothing else 'yes'}|nc:{self.char_order}|nw:{self.word_order}"
                f"|space:{'yes' if self.whitespace else 'no'}|version:2.6.0")

    def statistics(self, hypotheses: list[str], references: list[list[str]]) -> np.ndarray:
        """references: one list per reference stream, each as long as hypotheses (sacreBLEU's layout)."""
        h_codes, h_off = encode(hypotheses, self.lowercase)
        r_codes, r_off = encode_streams(references, len(hypotheses), self.lowercase)
        return segment_statistics(h_codes, h_off, r_codes, r_off, self.char_order, self.word_order, self.beta,
                                  self.whitespace, self.eps_smoothing, space_table(), ascii_punct_table(),
                                  numba.get_num_threads())

    def corpus_score(self, hypotheses: list[str], references: list[list[str]]) -> float:
        stats = self.statistics(hypotheses, references).sum(axis=0)
        return float(f_score(stats, self.order, self.beta, self.eps_smoothing))

    def sentence_scores(self, hypotheses: list[str], references: list[list[str]]) -> list[float]:
        stats = self.statistics(hypotheses, references)
        return [float(f_score(row, self.order, self.beta, self.eps_smoothing)) for row in stats]


def bleu(hypotheses: list[str], references: list[list[str]]):
    import sacrebleu

    return sacrebleu.corpus_bleu(hypotheses, references)


def ter(hypotheses: list[str], references: list[list[str]]):
    import sacrebleu

    return sacrebleu.corpus_ter(hypotheses, references)
