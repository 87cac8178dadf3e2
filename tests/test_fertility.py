"""Fertility audit: counts equal a plain Python reference (segment by the stated rule,
tokenise each word alone, count) on real UDHR text for 3 real tokenizers x 10 languages in
7 scripts; segmentation rules per script; CLI outputs."""
import json
import unicodedata

import pytest
from click.testing import CliRunner

from babeleval.cli.main import cli
from babeleval.fertility import audit, load_audit_tokenizer
from babeleval.fertility.corpora import udhr
from babeleval.fertility.segment import dictionary_words, segment
from babeleval.scripts import NO_SPACE, SCRIPTS

LANGUAGES = ["eng", "swh", "ind", "hin", "amh", "arb", "rus", "tam", "tha", "cmn_hans"]


def reference_words(text):
    """The stated rule, char by char: non-space, non-P* runs; no-space-script runs through ICU."""
    words, run = [], ""
    for ch in text + " ":
        if ch.isspace() or unicodedata.category(ch).startswith("P") or ch in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~":
            if run:
                no_space = any(lo <= ord(c) <= hi for c in run for s in NO_SPACE for lo, hi in SCRIPTS[s])
                words += dictionary_words(run) if no_space else [run]
            run = ""
        else:
            run += ch
    return words


def reference_counts(tokenizer, corpus):
    out = {}
    for lang, units in corpus.items():
        words = [w for text in units.values() for w in reference_words(text)]
        tokens = [tokenizer.encode(w) for w in words]  # one word at a time
        unk = sum(t.count(tokenizer.unk_id) for t in tokens) if tokenizer.unk_id is not None else 0
        out[lang] = (len(words), sum(map(len, tokens)), sum(len(t) >= 2 for t in tokens), unk)
    return out


@pytest.fixture(scope="module")
def corpus():
    return udhr(LANGUAGES)


@pytest.mark.parametrize("name", ["gemma3", "mistral-sp", "bytes"])
def test_counts_equal_plain_python_reference(corpus, name):
    tokenizer = load_audit_tokenizer(name)
    result = audit(tokenizer, corpus)
    expected = reference_counts(tokenizer, corpus)
    for lang in LANGUAGES:
        stats = result["languages"][lang]
        assert (stats["words"], stats["word_tokens"], round(stats["continued_words"] * stats["words"]),
                round(stats["unk_share"] * stats["word_tokens"])) == expected[lang], lang
        assert stats["fertility"] >= 1.0
    assert {result["languages"][lang]["script"] for lang in LANGUAGES} == {
        "Latin", "Devanagari", "Ethiopic", "Arabic", "Cyrillic", "Tamil", "Thai", "Han"}
    assert result["languages"]["eng"]["token_tax"] == 1.0


def test_bytes_tokenizer_counts_utf8_bytes(corpus):
    stats = audit(load_audit_tokenizer("bytes"), {"hin": corpus["hin"], "eng": corpus["eng"]})["languages"]["hin"]
    text = "".join(corpus["hin"].values())
    assert stats["bytes_per_token"] == 1.0
    assert stats["text_tokens"] == len(text.encode("utf-8"))
    assert stats["tokens_per_char"] == pytest.approx(len(text.encode("utf-8")) / len(text))


def test_segmentation_rules_per_script():
    found = segment(["ሰላም፡ለዓለም። ok", "ภาษาไทยเป็นภาษาที่สวยงาม", "人人生而自由，在尊严", "नमस्ते, दुनिया।"])
    words, text = found.strings(), found.text
    assert words[:3] == ["ሰላም", "ለዓለም", "ok"]  # Ethiopic wordspace separates words
    thai = [w for w, t in zip(words, text) if t == 1]
    assert len(thai) >= 4 and "".join(thai) == "ภาษาไทยเป็นภาษาที่สวยงาม"  # not one sentence-long word
    assert [w for w, t in zip(words, text) if t == 3] == ["नमस्ते", "दुनिया"]
    assert len([w for w, t in zip(words, text) if t == 2]) >= 4


def test_cli_writes_json_markdown_and_charts(tmp_path):
    result = CliRunner().invoke(cli, ["fertility", "-t", "bytes", "-t", "mistral-sp", "--languages", "eng,amh,hin",
                                      "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "fertility.json").read_text())
    amh = data["tokenizers"]["mistral-sp"]["languages"]["amh"]
    assert amh["token_tax"] > 2 and amh["fertility"] > data["tokenizers"]["mistral-sp"]["languages"]["eng"]["fertility"]
    assert "| amh | Ethiopic |" in (tmp_path / "fertility.md").read_text()
    assert (tmp_path / "fertility.png").stat().st_size > 10_000
    assert (tmp_path / "fertility.svg").read_text().startswith("<?xml")


def test_bad_tokenizer_and_language_are_clear_errors(tmp_path):
    result = CliRunner().invoke(cli, ["fertility", "-t", "nope", "--languages", "eng", "--output", str(tmp_path)])
    assert result.exit_code == 2 and "tokenizer 'nope'" in result.output
    result = CliRunner().invoke(cli, ["fertility", "-t", "bytes", "--languages", "xxx", "--output", str(tmp_path)])
    assert result.exit_code == 2 and "no translation 'xxx'" in result.output


def test_tekken_batch_encode_equals_mistral_common(corpus):
    tokenizer = load_audit_tokenizer("mistral-tekken")
    texts = [text for lang in LANGUAGES for text in list(corpus[lang].values())[:3]]
    assert tokenizer.encode_batch(texts) == [tokenizer.tekken.encode(t, bos=False, eos=False) for t in texts]
