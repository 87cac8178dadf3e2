"""Strings -> one contiguous uint32 array of code points + int64 offsets, and the
character-class tables (Python's str.isspace / \\w / punctuation) the kernels look up."""
from __future__ import annotations

import functools
import string
import unicodedata

import numpy as np
from numba import njit


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


@njit(cache=True)
def in_table(table, c):
    """table[c], False past the end of the table."""
    return c < len(table) and table[c]


@njit(cache=True)
def longest_text(h_off, r_off):
    """Longest text of a hypothesis stream (offsets) and its reference streams ([refs, n + 1]); at least 1."""
    longest = 1
    for s in range(len(h_off) - 1):
        longest = max(longest, h_off[s + 1] - h_off[s])
        for k in range(r_off.shape[0]):
            longest = max(longest, r_off[k, s + 1] - r_off[k, s])
    return longest


def encode_streams(streams: list[list[str]], segments: int, lower: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Reference streams (sacreBLEU's layout: one list per reference, each `segments` long,
    as long as the hypotheses) -> codes and [streams, segments + 1] offsets into them."""
    for stream in streams:
        if len(stream) != segments:
            raise ValueError(f"a reference stream has {len(stream)} segments, the hypotheses {segments}")
    encoded = [encode(stream, lower) for stream in streams]
    codes = np.concatenate([c for c, _ in encoded]) if encoded else np.zeros(0, np.uint32)
    shifts = np.cumsum([0] + [len(c) for c, _ in encoded[:-1]])
    return codes, np.stack([off + shift for (_, off), shift in zip(encoded, shifts)])
