"""chrF / chrF++ equal sacreBLEU 2.6 (sentence and corpus, 1 and 2 references) on real
multilingual text and on generated Unicode strings."""
import csv

import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st

from babeleval.metrics.chrf import CHRF

SETTINGS = [dict(), dict(word_order=2), dict(lowercase=True), dict(whitespace=True), dict(eps_smoothing=True),
            dict(word_order=2, eps_smoothing=True)]


def nusax_pairs(root, limit=1500):
    rows = list(csv.DictReader(open(root / "nusax" / "mt" / "valid.csv", encoding="utf-8")))[:limit]
    langs = [k for k in rows[0] if k]
    # cross-pair all 12 languages: hypothesis in language i, references in languages i+1, i+2
    hyps, ref1, ref2 = [], [], []
    for i, lang in enumerate(langs):
        for r in rows[: limit // len(langs)]:
            hyps.append(r[lang])
            ref1.append(r[langs[(i + 1) % len(langs)]])
            ref2.append(r[langs[(i + 2) % len(langs)]])
    return hyps, ref1, ref2


def tatoeba_and_xquad(root):
    import json

    src = (root / "tatoeba" / "tatoeba.cmn-eng.cmn").read_text(encoding="utf-8").splitlines()[:300]
    tgt = (root / "tatoeba" / "tatoeba.hin-eng.hin").read_text(encoding="utf-8").splitlines()[:300]
    squad = json.loads((root / "xquad" / "xquad.hi.json").read_text(encoding="utf-8"))
    answers = [qa["answers"][0]["text"] for art in squad["data"] for p in art["paragraphs"] for qa in p["qas"]][:300]
    return src + answers, tgt[: len(src)] + list(reversed(answers))


@pytest.mark.parametrize("kwargs", SETTINGS)
def test_corpus_and_sentence_chrf_equal_sacrebleu_on_nusax(data_slices, kwargs):
    hyps, ref1, ref2 = nusax_pairs(data_slices)
    for refs in ([ref1], [ref1, ref2]):
        ours = CHRF(**kwargs)
        ref_metric = sacrebleu.CHRF(**kwargs)
        assert abs(ours.corpus_score(hyps, refs) - ref_metric.corpus_score(hyps, refs).score) <= 1e-9
        assert ours.signature(len(refs)) == ref_metric.get_signature().format(short=True) or \
            ours.signature(len(refs)) == str(ref_metric.get_signature())
        got = ours.sentence_scores(hyps[:300], [r[:300] for r in refs])
        want = [ref_metric.sentence_score(h, [r[i] for r in refs]).score for i, h in enumerate(hyps[:300])]
        assert max(abs(a - b) for a, b in zip(got, want)) <= 1e-9


def test_chrf_on_chinese_devanagari_and_xquad_answers(data_slices):
    hyps, refs = tatoeba_and_xquad(data_slices)
    for order in (0, 2):
        assert abs(CHRF(word_order=order).corpus_score(hyps, [refs]) -
                   sacrebleu.corpus_chrf(hyps, [refs], word_order=order).score) <= 1e-9


TEXT = st.text(alphabet=st.sampled_from(list("ab ,.!(\t\u00a0\u3000é\u0301ሰላምनमस्ते😀🙂-'\"")), max_size=30)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(TEXT, TEXT, TEXT), min_size=1, max_size=5), st.sampled_from(SETTINGS))
def test_chrf_equals_sacrebleu_on_generated_unicode(triples, kwargs):
    hyps = [t[0] for t in triples]
    refs = [[t[1] for t in triples], [t[2] for t in triples]]
    ours, ref_metric = CHRF(**kwargs), sacrebleu.CHRF(**kwargs)
    assert abs(ours.corpus_score(hyps, refs) - ref_metric.corpus_score(hyps, refs).score) <= 1e-9
    assert abs(ours.corpus_score(hyps, refs[:1]) - ref_metric.corpus_score(hyps, refs[:1]).score) <= 1e-9
    for i, h in enumerate(hyps):
        assert abs(ours.sentence_scores([h], [[refs[0][i]]])[0] - ref_metric.sentence_score(h, [refs[0][i]]).score) <= 1e-9


def test_tied_references_break_like_sacrebleu():
    # both references score 4.1666...; one ulp decides which one's statistics the corpus sums
    hyps, refs = ["", "---b"], [["a", "aaa-a"], ["", ".aab"]]
    assert CHRF(word_order=2).corpus_score(hyps, refs) == sacrebleu.corpus_chrf(hyps, refs, word_order=2).score
