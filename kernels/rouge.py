"""ROUGE-L (longest common subsequence of tokens) over encoded, lowercased strings.

Tokens: maximal runs of characters that are neither whitespace nor punctuation (both act
as separators and are dropped); every character of a script written without spaces
(the `single` table: Thai, Lao, Khmer, Myanmar, kana, CJK ideographs) is a token of its
own. Tokens are compared by 64-bit key."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .encoding import in_table, longest_text
from .multiset import span_key


@njit(cache=True)
def tokens(codes, space, punct, single, keys):
    """Writes the token keys of one string to keys (scratch as long as codes); returns their number."""
    count = 0
    start = -1
    for i in range(len(codes) + 1):
        c = codes[i] if i < len(codes) else np.uint32(32)
        separate = in_table(space, c) or in_table(punct, c) or in_table(single, c)
        if separate and start >= 0:
            keys[count] = span_key(codes, start, i)
            count += 1
            start = -1
        if i < len(codes) and in_table(single, c):
            keys[count] = span_key(codes, i, i + 1)
            count += 1
        elif not separate and start < 0:
            start = i
    return count


@njit(cache=True)
def lcs_length(a, b, row):
    """Length of the longest common subsequence of a and b; row: scratch of len(b) + 1."""
    row[:len(b) + 1] = 0
    for i in range(len(a)):
        diagonal = 0
        for j in range(len(b)):
            above = row[j + 1]
            if a[i] == b[j]:
                row[j + 1] = diagonal + 1
            elif row[j] > above:
                row[j + 1] = row[j]
            diagonal = above
    return row[len(b)]


@njit(cache=True, parallel=True)
def rouge_l(h_codes, h_off, r_codes, r_off, space, punct, single, chunks):
    """[segments, 3] precision, recall, F1 of the best-F reference. r_off is [refs, segments + 1]."""
    segments = len(h_off) - 1
    out = np.zeros((segments, 3))
    longest = longest_text(h_off, r_off)
    for chunk in prange(chunks):
        hyp = np.empty(longest, np.uint64)
        ref = np.empty(longest, np.uint64)
        row = np.empty(longest + 1, np.int64)
        for s in range(chunk * segments // chunks, (chunk + 1) * segments // chunks):
            n_hyp = tokens(h_codes[h_off[s]:h_off[s + 1]], space, punct, single, hyp)
            for k in range(r_off.shape[0]):
                n_ref = tokens(r_codes[r_off[k, s]:r_off[k, s + 1]], space, punct, single, ref)
                if n_hyp == 0 or n_ref == 0:
                    continue
                lcs = lcs_length(hyp[:n_hyp], ref[:n_ref], row)
                p, r = lcs / n_hyp, lcs / n_ref
                f = 2 * p * r / (p + r) if p + r > 0 else 0.0
                if f > out[s, 2]:
                    out[s, 0], out[s, 1], out[s, 2] = p, r, f
    return out
