"""Tokenizer fertility counts: word spans of encoded text, and per-group sums of per-word
token counts (Rust et al. 2021: fertility = subwords per word; continued words = words
split into 2+ subwords)."""
from __future__ import annotations

import numpy as np
from numba import njit

from .encoding import in_table


@njit(cache=True)
def word_spans(codes, offsets, space, punct, no_space):
    """Words = maximal runs of code points that are neither whitespace nor punctuation (P*,
    which includes the Ethiopic wordspace U+1361). Returns (starts, ends, text index,
    needs_dictionary): the last flags words holding a character of a script written
    without spaces, which a dictionary segmenter must split further."""
    n = len(codes)
    starts = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    text = np.empty(n, np.int64)
    dictionary = np.zeros(n, np.bool_)
    count = 0
    for t in range(len(offsets) - 1):
        start = -1
        for i in range(offsets[t], offsets[t + 1] + 1):
            inside = i < offsets[t + 1] and not (in_table(space, codes[i]) or in_table(punct, codes[i]))
            if inside:
                if start < 0:
                    start = i
                if in_table(no_space, codes[i]):
                    dictionary[count] = True
            elif start >= 0:
                starts[count], ends[count], text[count] = start, i, t
                count += 1
                start = -1
    return starts[:count], ends[:count], text[:count], dictionary[:count]


@njit(cache=True)
def group_counts(word_tokens, word_unks, group, groups):
    """[groups, 4]: words, subword tokens, continued words (2+ tokens), UNK tokens."""
    out = np.zeros((groups, 4), np.int64)
    for w in range(len(word_tokens)):
        g = group[w]
        out[g, 0] += 1
        out[g, 1] += word_tokens[w]
        out[g, 2] += word_tokens[w] >= 2
        out[g, 3] += word_unks[w]
    return out


@njit(cache=True)
def distinct_ids(keys):
    """(index of each distinct key's first occurrence, per key the id of its distinct key),
    in first-occurrence order; open addressing, linear time."""
    size = 1
    while size < 2 * len(keys) + 2:
        size *= 2
    mask = np.uint64(size - 1)
    slot_key = np.zeros(size, np.uint64)
    slot_id = np.full(size, -1, np.int64)
    first = np.empty(len(keys), np.int64)
    ids = np.empty(len(keys), np.int64)
    count = 0
    for i in range(len(keys)):
        slot = np.int64((keys[i] * np.uint64(0x9E3779B97F4A7C15) >> np.uint64(17)) & mask)
        while slot_id[slot] >= 0 and slot_key[slot] != keys[i]:
            slot = np.int64((np.uint64(slot) + np.uint64(1)) & mask)
        if slot_id[slot] < 0:
            slot_key[slot] = keys[i]
            slot_id[slot] = count
            first[count] = i
            count += 1
        ids[i] = slot_id[slot]
    return first[:count], ids


@njit(cache=True)
def utf8_lengths(codes, offsets):
    """UTF-8 bytes of each text codes[offsets[i]:offsets[i+1]]."""
    out = np.zeros(len(offsets) - 1, np.int64)
    for t in range(len(offsets) - 1):
        n = 0
        for i in range(offsets[t], offsets[t + 1]):
            c = codes[i]
            n += 1 if c < 0x80 else 2 if c < 0x800 else 3 if c < 0x10000 else 4
        out[t] = n
    return out
