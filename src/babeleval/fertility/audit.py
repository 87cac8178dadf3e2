"""Fertility audit of one tokenizer over a corpus {language: {unit id: text}}.

Word level (each word tokenised on its own, no special tokens; words segmented as
babeleval.fertility.segment states): fertility, share of continued words, UNK share.
Text level (each unit tokenised whole): tokens per character, UTF-8 bytes per token, and
the token tax: tokens for the units a language shares with English / tokens for the
same units in English."""
from __future__ import annotations

import operator

import numpy as np

from ..kernels.fertility import group_counts
from ..loading.tokenizer import Tokenizer
from ..scripts import script_of
from .segment import Words, segment


def _token_counts(tokenizer: Tokenizer, texts: list[str], unks: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Tokens and (when asked) UNK tokens per text, no special tokens."""
    encoded = tokenizer.encode_batch(texts)
    counts = np.fromiter(map(len, encoded), np.int64, len(encoded))
    if tokenizer.unk_id is None or not unks:
        return counts, np.zeros_like(counts)
    return counts, np.fromiter(map(operator.methodcaller("count", tokenizer.unk_id), encoded), np.int64, len(encoded))


def word_counts(tokenizer: Tokenizer, words: Words) -> tuple[np.ndarray, np.ndarray]:
    """Tokens and UNKs per word; each distinct word is tokenised once."""
    distinct, index = words.distinct()
    counts, unks = _token_counts(tokenizer, distinct)
    return counts[index], unks[index]


def _ratios(words, tokens, continued, unk, chars, nbytes, text_tokens):
    safe = lambda a, b: float(a / b) if b else None
    return {"words": int(words), "word_tokens": int(tokens), "fertility": safe(tokens, words),
            "continued_words": safe(continued, words), "unk_share": safe(unk, tokens),
            "characters": int(chars), "text_tokens": int(text_tokens), "tokens_per_char": safe(text_tokens, chars),
            "bytes_per_token": safe(nbytes, text_tokens)}


def audit(tokenizer: Tokenizer, corpus: dict[str, dict[str, str]], english: str = "eng") -> dict:
    """{"languages": {lang: stats}, "scripts": {script: stats}} for one tokenizer."""
    languages = list(corpus)
    units = [(i, unit, text) for i, lang in enumerate(languages) for unit, text in corpus[lang].items()]
    texts = [text for _, _, text in units]
    text_lang = np.fromiter((i for i, _, _ in units), np.int64, len(units))
    words = segment(texts)
    word_tokens, word_unks = word_counts(tokenizer, words)
    per_word = group_counts(word_tokens, word_unks, text_lang[words.text], len(languages))
    text_tokens, _ = _token_counts(tokenizer, texts, unks=False)
    chars = np.fromiter(map(len, texts), np.int64, len(texts))
    nbytes = words.utf8_bytes_per_text()
    per_text = np.stack([np.bincount(text_lang, w, len(languages)) for w in (chars, nbytes, text_tokens)], 1)

    unit_tokens = {lang: {} for lang in languages}
    for (i, unit, _), n in zip(units, text_tokens.tolist()):
        unit_tokens[languages[i]][unit] = n
    out = {"languages": {}, "scripts": {}}
    scripts: dict[str, np.ndarray] = {}
    for i, lang in enumerate(languages):
        stats = _ratios(*per_word[i], *per_text[i])
        stats["script"] = script_of(" ".join(list(corpus[lang].values())[:20]))
        if english in unit_tokens and lang != english:
            shared = unit_tokens[lang].keys() & unit_tokens[english].keys()
            eng = sum(unit_tokens[english][u] for u in shared)
            stats["token_tax"] = sum(unit_tokens[lang][u] for u in shared) / eng if eng else None
        elif lang == english:
            stats["token_tax"] = 1.0
        out["languages"][lang] = stats
        scripts[stats["script"]] = scripts.get(stats["script"], 0) + np.concatenate([per_word[i], per_text[i]])
    out["scripts"] = {s: _ratios(*v) | {"languages": sum(st["script"] == s for st in out["languages"].values())}
                      for s, v in sorted(scripts.items())}
    return out
