"""SQuAD EM/F1 from the numba kernel equal a plain Python transcription of the official
v1.1 rules (and of MLQA's multilingual variant) on real XQuAD-hi answers and on generated
strings."""
import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import squad_reference as ref
from babeleval.metrics.squad import SQuAD


def xquad_predictions(root, seed=0):
    """Realistic predictions: the gold answer, the answer with neighbouring context words,
    the answer plus the danda, another question's answer, a context window."""
    data = json.loads((root / "xquad" / "xquad.hi.json").read_text(encoding="utf-8"))
    rng = random.Random(seed)
    predictions, answers = [], []
    for article in data["data"]:
        for para in article["paragraphs"]:
            context = para["context"]
            for qa in para["qas"]:
                golds = [a["text"] for a in qa["answers"]]
                start = qa["answers"][0]["answer_start"]
                kind = rng.randrange(5)
                if kind == 0:
                    pred = golds[0]
                elif kind == 1:
                    pred = context[max(0, start - rng.randrange(30)):start + len(golds[0]) + rng.randrange(30)]
                elif kind == 2:
                    pred = golds[0] + "।"
                elif kind == 3:
                    pred = answers[-1][0] if answers else ""
                else:
                    pred = context[start:start + rng.randrange(1, 80)]
                predictions.append(pred)
                answers.append(golds + ["The " + golds[0] + ", " + golds[0]])
    return predictions, answers


@pytest.mark.parametrize("mode", ["official", "multilingual"])
def test_equal_python_reference_on_xquad_hi(data_slices, mode):
    """The slice in tests/data: XQuAD-hi's first two articles."""
    check_against_reference(*xquad_predictions(data_slices), 97, mode)


@pytest.mark.full
@pytest.mark.parametrize("mode", ["official", "multilingual"])
def test_equal_python_reference_on_all_of_xquad_hi(shared_data, mode):
    check_against_reference(*xquad_predictions(shared_data), 1190, mode)


def check_against_reference(predictions, answers, n, mode):
    assert len(predictions) == n
    lang = "hi" if mode == "multilingual" else "en"
    ours = SQuAD(mode, lang).corpus_score(predictions, answers)
    expected = ref.corpus(predictions, answers, mode=mode, lang=lang)
    assert ours == pytest.approx(expected, abs=1e-9)
    em, f1 = SQuAD(mode, lang).scores(predictions, answers)
    per_f1 = [max(ref.f1(p, g, mode=mode, lang=lang) for g in golds) for p, golds in zip(predictions, answers)]
    np.testing.assert_allclose(f1, per_f1, atol=1e-12)
    assert 0 < ours["exact_match"] < ours["f1"] < 100


def test_danda_is_kept_by_the_official_rules_and_stripped_by_the_multilingual_ones():
    prediction, gold = ["नई दिल्ली।"], [["नई दिल्ली"]]
    assert SQuAD("official").corpus_score(prediction, gold) == {"exact_match": 0.0, "f1": 50.0}
    assert SQuAD("multilingual", "hi").corpus_score(prediction, gold) == {"exact_match": 100.0, "f1": 100.0}
    assert ref.exact(prediction[0], gold[0][0]) == 0.0
    assert ref.exact(prediction[0], gold[0][0], mode="multilingual", lang="hi") == 1.0


def test_articles_are_whole_words_only():
    metric = SQuAD()
    assert metric.corpus_score(["The theory, an answer"], [["theory answer"]])["exact_match"] == 100.0
    assert metric.corpus_score(["then another"], [["another"]])["exact_match"] == 0.0
    assert SQuAD("multilingual", "de").corpus_score(["Der Hund"], [["hund"]])["exact_match"] == 100.0
    assert SQuAD("multilingual", "zh").corpus_score(["北京市"], [["北京"]])["f1"] == pytest.approx(80.0)


def test_bad_mode_and_lengths_are_clear_errors():
    with pytest.raises(ValueError, match="mode"):
        SQuAD("mlqa")
    with pytest.raises(ValueError, match="2 predictions but 1"):
        SQuAD().scores(["a", "b"], [["a"]])


ALPHABET = st.sampled_from(list("aAnNtThHeE  \t\n.,!?-'\"()") + ["the", "an", " a ", "।", "॥", "—", "«", "»", "é",
                                                                 "के", "नई", "दिल्ली", "北", "京", "市", "_", "١",
                                                                 "Der", "las", "của", "\u0301", "İ", "ß"])
TEXT = st.lists(ALPHABET, max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(TEXT, st.lists(TEXT, min_size=1, max_size=3)), min_size=1, max_size=6),
       st.sampled_from([("official", "en"), ("multilingual", "en"), ("multilingual", "hi"), ("multilingual", "zh"),
                        ("multilingual", "de"), ("multilingual", "vi"), ("multilingual", "es")]))
def test_equal_python_reference_on_generated_strings(pairs, setting):
    mode, lang = setting
    predictions = [p for p, _ in pairs]
    answers = [golds for _, golds in pairs]
    em, f1 = SQuAD(mode, lang).scores(predictions, answers)
    for i, (p, golds) in enumerate(pairs):
        assert em[i] == max(ref.exact(p, g, mode=mode, lang=lang) for g in golds)
        assert f1[i] == pytest.approx(max(ref.f1(p, g, mode=mode, lang=lang) for g in golds), abs=1e-12)
