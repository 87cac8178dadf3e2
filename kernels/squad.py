"""SQuAD answer normalisation, exact match and token F1 over encoded (already lowercased)
strings. Normalisation = drop punctuation -> replace article words by a space -> split on
whitespace (-> split listed characters, e.g. CJK ideographs, into tokens of their own).
An article is removed only where it is a whole maximal run of word characters, which is
what re.sub(r"\\b(a|an|the)\\b", " ", s) does."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .encoding import in_table
from .multiset import overlap, span_key


@njit(cache=True)
def _is_article(buf, i, j, art_codes, art_off):
    for a in range(len(art_off) - 1):
        if art_off[a + 1] - art_off[a] != j - i:
            continue
        same = True
        for k in range(j - i):
            if buf[i + k] != art_codes[art_off[a] + k]:
                same = False
                break
        if same:
            return True
    return False


@njit(cache=True)
def normalized_tokens(codes, punct, word, space, art_codes, art_off, single, buf, keys):
    """Writes the keys of the normalised tokens of one string, in order, to keys; returns
    their number. buf and keys are scratch space at least as long as codes."""
    n = 0
    for c in codes:
        if not in_table(punct, c):
            buf[n] = c
            n += 1
    count = 0
    start = -1
    i = 0
    while i < n:
        c = buf[i]
        if in_table(space, c) or in_table(single, c):
            if start >= 0:
                keys[count] = span_key(buf, start, i)
                count += 1
                start = -1
            if in_table(single, c):
                keys[count] = span_key(buf, i, i + 1)
                count += 1
            i += 1
            continue
        if in_table(word, c) and (i == 0 or not in_table(word, buf[i - 1])):
            j = i + 1
            while j < n and in_table(word, buf[j]):
                j += 1
            if _is_article(buf, i, j, art_codes, art_off):  # the article becomes a space
                if start >= 0:
                    keys[count] = span_key(buf, start, i)
                    count += 1
                    start = -1
                i = j
                continue
        if start < 0:
            start = i
        i += 1
    if start >= 0:
        keys[count] = span_key(buf, start, n)
        count += 1
    return count


@njit(cache=True)
def _exact(a, b):
    if len(a) != len(b):
        return 0.0
    for i in range(len(a)):
        if a[i] != b[i]:
            return 0.0
    return 1.0


@njit(cache=True)
def _f1(sorted_pred, sorted_gold):
    same = overlap(sorted_pred, sorted_gold)
    if same == 0:
        return 0.0
    precision = same / len(sorted_pred)
    recall = same / len(sorted_gold)
    return 2 * precision * recall / (precision + recall)


@njit(cache=True)
def _longest(offsets):
    longest = 0
    for i in range(len(offsets) - 1):
        longest = max(longest, offsets[i + 1] - offsets[i])
    return longest


@njit(cache=True, parallel=True)
def exact_and_f1(p_codes, p_off, g_codes, g_off, g_group, punct, word, space, art_codes, art_off, single, chunks):
    """Per question: max over its gold answers g_group[q]:g_group[q+1] of EM and of F1 (0..1).
    Questions are split into `chunks` contiguous runs (one per thread), each with its own scratch."""
    questions = len(p_off) - 1
    em = np.zeros(questions)
    f1 = np.zeros(questions)
    size = max(_longest(p_off), _longest(g_off))
    for chunk in prange(chunks):
        buf = np.empty(size, np.uint32)
        pred = np.empty(size, np.uint64)
        sorted_pred = np.empty(size, np.uint64)
        gold = np.empty(size, np.uint64)
        for q in range(chunk * questions // chunks, (chunk + 1) * questions // chunks):
            n_pred = normalized_tokens(p_codes[p_off[q]:p_off[q + 1]], punct, word, space, art_codes, art_off, single,
                                       buf, pred)
            sorted_pred[:n_pred] = pred[:n_pred]
            sorted_pred[:n_pred].sort()
            for g in range(g_group[q], g_group[q + 1]):
                n_gold = normalized_tokens(g_codes[g_off[g]:g_off[g + 1]], punct, word, space, art_codes, art_off,
                                           single, buf, gold)
                em[q] = max(em[q], _exact(pred[:n_pred], gold[:n_gold]))
                gold[:n_gold].sort()
                f1[q] = max(f1[q], _f1(sorted_pred[:n_pred], gold[:n_gold]))
    return em, f1
