"""chrF / chrF++ statistics as sacreBLEU 2.x defines them, over encoded arrays.

For each order, n-grams of the hypothesis and of the reference are turned into exact
integer keys (code points re-ranked within the pair and bit-packed; word n-grams by
a 64-bit hash of their code points) and counted in a hash table: the number of matches
is the sum of min(count_hyp, count_ref) over shared n-grams. Per order the statistics are
[hyp count (0 when the reference has none), ref count, matches], as in sacreBLEU.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .encoding import longest_text
from .multiset import FNV_PRIME, FNV_START, overlap_table, span_keys, table_overlap


@njit(cache=True)
def _strip_spaces(codes, space):
    out = np.empty(len(codes), np.uint32)
    n = 0
    for c in codes:
        if c < len(space) and space[c]:
            continue
        out[n] = c
        n += 1
    return out[:n]


@njit(cache=True)
def _words(codes, space, punct):
    """sacreBLEU's chrF++ tokenisation: split on whitespace, then split one ASCII punctuation
    mark off the end (else the start) of each word longer than one character.
    Returns (starts, ends) of the word spans in `codes`."""
    starts = np.empty(len(codes) * 2 + 1, np.int64)
    ends = np.empty(len(codes) * 2 + 1, np.int64)
    n = 0
    i = 0
    while i < len(codes):
        if codes[i] < len(space) and space[codes[i]]:
            i += 1
            continue
        j = i
        while j < len(codes) and not (codes[j] < len(space) and space[codes[j]]):
            j += 1
        if j - i > 1 and codes[j - 1] < 128 and punct[codes[j - 1]]:
            starts[n], ends[n] = i, j - 1
            starts[n + 1], ends[n + 1] = j - 1, j
            n += 2
        elif j - i > 1 and codes[i] < 128 and punct[codes[i]]:
            starts[n], ends[n] = i, i + 1
            starts[n + 1], ends[n + 1] = i + 1, j
            n += 2
        else:
            starts[n], ends[n] = i, j
            n += 1
        i = j
    return starts[:n], ends[:n]


@njit(cache=True)
def _ngram_keys(symbols, n, bits):
    """Keys of all n-grams of a symbol sequence: exact bit-packing when n * bits <= 63, else FNV hashing."""
    count = len(symbols) - n + 1
    if count <= 0:
        return np.empty(0, np.uint64)
    keys = np.empty(count, np.uint64)
    exact = n * bits <= 63
    for i in range(count):
        if exact:
            k = np.uint64(0)
            for j in range(n):
                k = (k << np.uint64(bits)) | np.uint64(symbols[i + j])
        else:
            k = FNV_START
            for j in range(n):
                k = (k ^ np.uint64(symbols[i + j])) * FNV_PRIME
        keys[i] = k
    return keys


@njit(cache=True)
def _rank_pair(h, r):
    """Re-number the code points of a hypothesis/reference pair densely (exact keys, few bits)."""
    alphabet = np.unique(np.concatenate((h, r)))
    bits = 1
    while (1 << bits) <= len(alphabet):
        bits += 1
    return np.searchsorted(alphabet, h).astype(np.uint64) + 1, np.searchsorted(alphabet, r).astype(np.uint64) + 1, bits


@njit(cache=True)
def pair_statistics(h, r, char_order, word_order, whitespace, space, punct, table):
    """[hyp, ref, match] for each char order then each word order, for one pair."""
    stats = np.zeros(3 * (char_order + word_order), np.int64)
    hc = h if whitespace else _strip_spaces(h, space)
    rc = r if whitespace else _strip_spaces(r, space)
    hs, rs, bits = _rank_pair(hc, rc)
    for n in range(1, char_order + 1):
        hk, rk = _ngram_keys(hs, n, bits), _ngram_keys(rs, n, bits)
        base = 3 * (n - 1)
        stats[base] = len(hk) if len(rk) > 0 else 0
        stats[base + 1] = len(rk)
        stats[base + 2] = table_overlap(hk, rk, *table)
    if word_order > 0:
        hw0, hw1 = _words(h, space, punct)
        rw0, rw1 = _words(r, space, punct)
        hw, rw = span_keys(h, hw0, hw1), span_keys(r, rw0, rw1)
        for n in range(1, word_order + 1):
            hk, rk = _ngram_keys(hw, n, 64), _ngram_keys(rw, n, 64)
            base = 3 * (char_order + n - 1)
            stats[base] = len(hk) if len(rk) > 0 else 0
            stats[base + 1] = len(rk)
            stats[base + 2] = table_overlap(hk, rk, *table)
    return stats


@njit(cache=True)
def f_score(stats, order, beta, eps_smoothing):
    """sacreBLEU's chrF from summed statistics: effective-order averaging, or chrF++.py's eps smoothing."""
    eps = 1e-16
    factor = beta ** 2
    score = 0.0
    avg_prec = 0.0
    avg_rec = 0.0
    effective = 0
    for i in range(order):
        n_hyp, n_ref, n_match = stats[3 * i], stats[3 * i + 1], stats[3 * i + 2]
        prec = n_match / n_hyp if n_hyp > 0 else eps
        rec = n_match / n_ref if n_ref > 0 else eps
        denom = factor * prec + rec
        score += ((1 + factor) * prec * rec / denom) if denom > 0 else eps
        if n_hyp > 0 and n_ref > 0:
            avg_prec += prec
            avg_rec += rec
            effective += 1
    if eps_smoothing:
        return 100 * score / order
    if effective == 0:
        return 0.0
    avg_prec /= effective
    avg_rec /= effective
    if avg_prec + avg_rec:
        score = (1 + factor) * avg_prec * avg_rec
        score /= factor * avg_prec + avg_rec  # sacreBLEU's operation order: ties between references break alike
        return 100 * score
    return 0.0


@njit(cache=True, parallel=True)
def segment_statistics(h_codes, h_off, r_codes, r_off, char_order, word_order, beta, whitespace, eps_smoothing,
                       space, punct, chunks):
    """Best-reference statistics per segment: [segments, 3 * order]. r_off is [refs, segments + 1].
    Segments are split into `chunks` contiguous runs (one per thread), each with its own table."""
    order = char_order + word_order
    segments = len(h_off) - 1
    out = np.zeros((segments, 3 * order), np.int64)
    longest = longest_text(h_off, r_off)
    for chunk in prange(chunks):
        table = overlap_table(longest)
        for s in range(chunk * segments // chunks, (chunk + 1) * segments // chunks):
            h = h_codes[h_off[s]:h_off[s + 1]]
            best = -1.0
            for k in range(r_off.shape[0]):
                r = r_codes[r_off[k, s]:r_off[k, s + 1]]
                stats = pair_statistics(h, r, char_order, word_order, whitespace, space, punct, table)
                f = f_score(stats, order, beta, eps_smoothing)
                if f > best:
                    best = f
                    for j in range(3 * order):  # not out[s] = stats: numba compiles a shape-error message for that
                        out[s, j] = stats[j]
    return out
