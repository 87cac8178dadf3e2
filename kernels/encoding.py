"""Strings -> one contiguous uint32 array of code points + int64 offsets, and the
character-class tables (Python's str.isspace / \\w / punctuation) the kernels look up."""
from __future__ import annotations

import functools
import string
import unicodedata

import numpy as np


def encode(texts: list[str], lower: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Code points of all texts back to back; text i is codes[offsets[i]:offsets[i+1]].
    lower: str.lower() each text first (Python's full Unicode lowercasing)."""
    joined = "".join(texts)
    if lower:
        lowered = joined.lower()
        # Lowercasing the joined text equals lowercasing each text unless a mapping changed
        # the length (e.g. U+0130) or a capital sigma met its context-dependent final form.
        if len(lowered) == len(joined) and "\u03a3" not in joined:
            joined = lowered
        else:
            texts = [t.lower() for t in texts]
            joined = "".join(texts)
    codes = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), np.int64, len(texts)), out=offsets[1:])
    return codes, offsets


@functools.lru_cache(maxsize=None)
def space_table() -> np.ndarray:
    """True where str.isspace() (what str.split() splits on); every such code point is < 0x3001."""
    return np.array([chr(c).isspace() for c in range(0x3001)], dtype=np.bool_)


@functools.lru_cache(maxsize=None)
def ascii_punct_table() -> np.ndarray:
    table = np.zeros(128, dtype=np.bool_)
    table[[ord(c) for c in string.punctuation]] = True
    return table


# Planes 4-16 hold no punctuation and no word characters (unassigned, tags, private use),
# so the tables stop at U+3FFFF and the kernels read code points past the end as False.
TABLE_SIZE = 0x40000


@functools.lru_cache(maxsize=None)
def unicode_tables() -> tuple[np.ndarray, np.ndarray]:
    """(is_punctuation: category P* or ASCII punctuation, is_word: what re's \\w matches)."""
    punct = np.zeros(TABLE_SIZE, dtype=np.bool_)
    word = np.zeros(TABLE_SIZE, dtype=np.bool_)
    for c in range(TABLE_SIZE):
        ch = chr(c)
        punct[c] = unicodedata.category(ch)[0] == "P"
        word[c] = ch.isalnum() or ch == "_"
    punct[[ord(c) for c in string.punctuation]] = True
    return punct, word


@functools.lru_cache(maxsize=None)
def code_point_table(ranges: tuple[tuple[int, int], ...]) -> np.ndarray:
    """True on the inclusive code point ranges given."""
    table = np.zeros(max((hi for _, hi in ranges), default=-1) + 1, dtype=np.bool_)
    for lo, hi in ranges:
        table[lo:hi + 1] = True
    return table
