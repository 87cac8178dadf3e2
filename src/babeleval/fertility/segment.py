"""Word segmentation for fertility, one stated rule per writing system:

- every script: a word is a maximal run of characters that are neither whitespace nor
  Unicode punctuation (category P*). Punctuation is not a word. This splits Ethiopic at
  its wordspace U+1361 "፡" (a P* character), which whitespace alone would not.
- Thai, Lao, Khmer, Myanmar, kana and Han (written without spaces): such runs are split
  further at ICU's dictionary-based word boundaries (PyICU, the ICU version it bundles).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..kernels.encoding import encode, space_table, unicode_tables
from ..kernels.fertility import distinct_ids, utf8_lengths, word_spans
from ..kernels.multiset import span_keys
from ..scripts import no_space_table

RULE = ("words = maximal runs of non-whitespace, non-punctuation (Unicode P*) characters; runs in Thai, Lao, "
        "Khmer, Myanmar, kana or Han split at ICU dictionary word boundaries")


@functools.lru_cache(maxsize=1)
def _word_breaker():
    import icu

    return icu.BreakIterator.createWordInstance(icu.Locale.getRoot())


def dictionary_bounds(run: str) -> list[int]:
    """ICU word boundaries inside a run with no spaces or punctuation, as code point indices."""
    breaker = _word_breaker()
    breaker.setText(run)
    if max(run) <= "\uffff":
        return [0] + list(breaker)
    # ICU indexes UTF-16 code units; map them back to code points.
    units = np.cumsum([0] + [2 if ord(ch) > 0xFFFF else 1 for ch in run])
    index = {int(u): i for i, u in enumerate(units)}
    return [0] + [index[b] for b in breaker]


def dictionary_words(run: str) -> list[str]:
    bounds = dictionary_bounds(run)
    return [run[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def _lengths(bounds: list[int]) -> list[int]:
    return [b - a for a, b in zip(bounds, bounds[1:]) if b > a]


@dataclass
class Words:
    """Word spans over the texts' code points, in order; text[i] is the text word i is from."""
    codes: np.ndarray
    offsets: np.ndarray
    joined: str
    starts: np.ndarray
    ends: np.ndarray
    text: np.ndarray

    def __len__(self):
        return len(self.starts)

    def utf8_bytes_per_text(self) -> np.ndarray:
        """UTF-8 length of each segmented text, from its code points."""
        return utf8_lengths(self.codes, self.offsets)

    def strings(self, index=None) -> list[str]:
        starts, ends = (self.starts, self.ends) if index is None else (self.starts[index], self.ends[index])
        return [self.joined[a:b] for a, b in zip(starts.tolist(), ends.tolist())]

    def distinct(self) -> tuple[list[str], np.ndarray]:
        """The distinct words (by a 64-bit key of their code points) and, per word, its index among them."""
        first, ids = distinct_ids(span_keys(self.codes, self.starts, self.ends))
        return self.strings(first), ids


def segment(texts: list[str]) -> Words:
    codes, offsets = encode(texts)
    punct, _ = unicode_tables()
    starts, ends, text, needs_dictionary = word_spans(codes, offsets, space_table(), punct, no_space_table())
    joined = "".join(texts)
    if needs_dictionary.any():
        flagged = np.flatnonzero(needs_dictionary)
        pieces = [_lengths(dictionary_bounds(joined[starts[i]:ends[i]])) for i in flagged.tolist()]
        counts = np.fromiter(map(len, pieces), np.int64, len(pieces))
        lengths = np.fromiter((n for p in pieces for n in p), np.int64, int(counts.sum()))
        per_word = np.ones(len(starts), np.int64)
        per_word[flagged] = counts
        origin = np.repeat(np.arange(len(starts)), per_word)
        new_starts, new_ends = starts[origin], ends[origin]
        # the pieces of flagged word f fill slots first[f] ... first[f] + counts[f] - 1
        group_start = np.repeat(np.cumsum(counts) - counts, counts)
        within = np.arange(len(lengths)) - group_start
        slots = np.repeat((np.cumsum(per_word) - per_word)[flagged], counts) + within
        ends_within = np.cumsum(lengths) - np.repeat(np.cumsum(lengths)[np.cumsum(counts) - counts]
                                                     - lengths[np.cumsum(counts) - counts], counts)
        new_ends[slots] = new_starts[slots] + ends_within
        new_starts[slots] = new_ends[slots] - lengths
        starts, ends, text = new_starts, new_ends, text[origin]
    return Words(codes, offsets, joined, starts, ends, text)
