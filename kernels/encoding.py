"""Strings -> one contiguous uint32 array of code points + int64 offsets, and the
character-class tables (Python's str.isspace / \\w / punctuation) the kernels look up."""
from __future__ import annotations

import functools
import string
import sys
import unicodedata

import numpy as np


def encode(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Code points of all texts back to back; text i is codes[offsets[i]:offsets[i+1]]."""
    joined = "".join(texts)
    codes = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in texts], out=offsets[1:])
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


@functools.lru_cache(maxsize=None)
def unicode_tables() -> tuple[np.ndarray, np.ndarray]:
    """(is_punctuation: category P* or ASCII punctuation, is_word: what re's \\w matches), all code points."""
    size = sys.maxunicode + 1
    punct = np.zeros(size, dtype=np.bool_)
    word = np.zeros(size, dtype=np.bool_)
    for c in range(size):
        ch = chr(c)
        punct[c] = unicodedata.category(ch).startswith("P")
        word[c] = ch.isalnum() or ch == "_"
    punct[[ord(c) for c in string.punctuation]] = True
    return punct, word
