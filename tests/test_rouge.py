"""ROUGE-L from the numba kernel equals rouge_score's LCS scorer given the same
tokenisation (a plain Python transcription of ours), on real multilingual text and on
generated strings; rouge_score's default tokeniser is shown to erase Hindi."""
import re
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from babeleval.metrics.rouge import rouge_l_corpus, rouge_l_scores
from babeleval.scripts import NO_SPACE, SCRIPTS
from test_chrf import nusax_pairs, tatoeba_and_xquad

PUNCT = {chr(i) for i in range(sys.maxunicode + 1) if unicodedata.category(chr(i)).startswith("P")}
PUNCT |= set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
NO_SPACE_RANGES = [r for name in NO_SPACE for r in SCRIPTS[name]]


class ReferenceTokenizer:
    def tokenize(self, text):
        out = []
        for word in re.split(r"\s+", text.lower()):
            run = ""
            for ch in word:
                if ch in PUNCT or any(lo <= ord(ch) <= hi for lo, hi in NO_SPACE_RANGES):
                    out += [run] if run else []
                    run = ""
                    out += [] if ch in PUNCT else [ch]
                else:
                    run += ch
            out += [run] if run else []
        return out


SCORER = rouge_scorer.RougeScorer(["rougeL"], tokenizer=ReferenceTokenizer())


def reference(hyps, refs):
    return [SCORER.score_multi([r[i] for r in refs], h)["rougeL"] for i, h in enumerate(hyps)]


def check(hyps, refs):
    ours = rouge_l_scores(hyps, refs)
    for row, expected in zip(ours, reference(hyps, refs)):
        assert row[2] == pytest.approx(expected.fmeasure, abs=1e-12)
        if expected.fmeasure > 0:
            assert tuple(row[:2]) == pytest.approx((expected.precision, expected.recall), abs=1e-12)


def test_equal_rouge_score_on_real_text(data_slices):
    hyps, ref1, ref2 = nusax_pairs(data_slices, limit=600)
    check(hyps, [ref1])
    check(hyps, [ref1, ref2])
    src, tgt = tatoeba_and_xquad(data_slices)
    check(src, [tgt])
    thai = (data_slices / "tatoeba" / "tatoeba.tha-eng.tha").read_text(encoding="utf-8").splitlines()[:200]
    check(thai, [thai[1:] + thai[:1]])
    assert 0 < rouge_l_corpus(hyps, [ref1]) < 100


def test_rouge_score_default_tokenizer_erases_hindi_ours_does_not():
    hyp, ref = "भारत की राजधानी नई दिल्ली है", "नई दिल्ली भारत की राजधानी है"
    assert rouge_scorer.RougeScorer(["rougeL"]).score(ref, hyp)["rougeL"].fmeasure == 0.0
    assert rouge_l_scores([hyp], [[ref]])[0, 2] == pytest.approx(4 / 6)


TEXT = st.lists(st.sampled_from(list("ab AB.,-\t") + ["नई", "दिल्ली", "।", "北", "京", "ภาษา", "ไทย", "ß", "İ", "😀",
                                                      "\u0301", "ሰላም", "፡", "  "]), max_size=14).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(TEXT, TEXT, TEXT), min_size=1, max_size=6))
def test_equal_rouge_score_on_generated_strings(rows):
    check([h for h, _, _ in rows], [[r for _, r, _ in rows], [r for _, _, r in rows]])
