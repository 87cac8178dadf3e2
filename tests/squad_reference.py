"""A plain Python transcription of the SQuAD v1.1 evaluation rules and of MLQA's
multilingual variant: the reference the numba kernel is checked against."""
import collections
import re
import string
import sys
import unicodedata

ALL_PUNCT = {chr(i) for i in range(sys.maxunicode + 1) if unicodedata.category(chr(i)).startswith("P")}
ALL_PUNCT |= set(string.punctuation)
ARTICLE_RE = {
    "en": r"\b(a|an|the)\b",
    "es": r"\b(un|una|unos|unas|el|la|los|las)\b",
    "de": r"\b(ein|eine|einen|einem|eines|einer|der|die|das|den|dem|des)\b",
    "vi": r"\b(của|là|cái|chiếc|những)\b",
}


def normalize(s, mode="official", lang="en"):
    s = s.lower()
    punct = set(string.punctuation) if mode == "official" else ALL_PUNCT
    s = "".join(ch for ch in s if ch not in punct)
    pattern = ARTICLE_RE["en"] if mode == "official" else ARTICLE_RE.get(lang)
    if pattern:
        s = re.sub(pattern, " ", s)
    if mode == "multilingual" and lang == "zh":
        tokens, run = [], ""
        for ch in s:
            if re.search(r"[\u4e00-\u9fa5]", ch):
                tokens.extend(run.split())
                run = ""
                tokens.append(ch)
            else:
                run += ch
        tokens.extend(run.split())
        return " ".join(tokens)
    return " ".join(s.split())


def f1(prediction, truth, **kw):
    pred, gold = normalize(prediction, **kw).split(), normalize(truth, **kw).split()
    same = sum((collections.Counter(pred) & collections.Counter(gold)).values())
    if same == 0:
        return 0.0
    p, r = same / len(pred), same / len(gold)
    return 2 * p * r / (p + r)


def exact(prediction, truth, **kw):
    return float(normalize(prediction, **kw) == normalize(truth, **kw))


def corpus(predictions, answers, **kw):
    em = [max(exact(p, g, **kw) for g in golds) for p, golds in zip(predictions, answers)]
    f = [max(f1(p, g, **kw) for g in golds) for p, golds in zip(predictions, answers)]
    return {"exact_match": 100.0 * sum(em) / len(em), "f1": 100.0 * sum(f) / len(f)}
