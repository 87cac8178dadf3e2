"""Tokenizer fertility counts: word spans of encoded text, and per-group sums of per-word
token counts (Rust et al. 2021: fertility = subwords per word; continued words = words
split into 2+ subwords)."""
from __future__ import annotations

import numpy as np
from numba import njit

from .encoding import in_table
from .multiset import overlap_table, table_slot


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
    in first-occurrence order; multiset's open-addressing table, linear time."""
    table_keys, slot_id, stamps, _ = overlap_table(len(keys))
    first = np.empty(len(keys), np.int64)
    ids = np.empty(len(keys), np.int64)
    count = 0
    for i in range(len(keys)):
        slot = table_slot(table_keys, stamps, 1, keys[i])
        if stamps[slot] != 1:
            stamps[slot] = 1
            table_keys[slot] = keys[i]
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
