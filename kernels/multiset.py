"""Tokens as 64-bit FNV-1a keys of their code points, and the multiset overlap of two
sorted key arrays (sum over keys of min(count in a, count in b)): the shared core of
chrF's n-gram matches, SQuAD's token F1 and ROUGE's token equality."""
from __future__ import annotations

import numpy as np
from numba import njit

FNV_PRIME = np.uint64(1099511628211)
FNV_START = np.uint64(14695981039346656037)


@njit(cache=True)
def span_key(codes, start, end):
    """Key of codes[start:end]; the length is mixed in last so prefixes do not collide by construction."""
    h = FNV_START
    for k in range(start, end):
        h = (h ^ np.uint64(codes[k])) * FNV_PRIME
    return (h ^ np.uint64(end - start)) * FNV_PRIME


@njit(cache=True)
def span_keys(codes, starts, ends):
    """span_key of each span."""
    out = np.empty(len(starts), np.uint64)
    for i in range(len(starts)):
        out[i] = span_key(codes, starts[i], ends[i])
    return out


@njit(cache=True)
def overlap(a, b):
    """Sum over keys of min(count in a, count in b); a and b sorted."""
    i = j = m = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            m += 1
            i += 1
            j += 1
        elif a[i] < b[j]:
            i += 1
        else:
            j += 1
    return m


GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True)
def overlap_table(longest):
    """Scratch for table_overlap and fertility's distinct_ids: open addressing with at least
    twice `longest` slots. (keys, counts or ids, stamps, [current stamp])."""
    size = 1
    while size < 2 * longest + 2:
        size *= 2
    return np.zeros(size, np.uint64), np.zeros(size, np.int64), np.zeros(size, np.int64), np.zeros(1, np.int64)


@njit(cache=True)
def table_slot(table_keys, stamps, stamp, key):
    """Slot holding key, or the empty slot where it would go (linear probing)."""
    mask = np.uint64(len(table_keys) - 1)
    slot = np.int64((key * GOLDEN >> np.uint64(17)) & mask)
    while stamps[slot] == stamp and table_keys[slot] != key:
        slot = np.int64((np.uint64(slot) + np.uint64(1)) & mask)
    return slot


@njit(cache=True)
def table_overlap(a, b, table_keys, counts, stamps, current):
    """overlap() for unsorted keys in linear time: count a's keys in a hash table, then take
    b's keys out of it. A new stamp per call empties the table without clearing it."""
    current[0] += 1
    stamp = current[0]
    for key in a:
        slot = table_slot(table_keys, stamps, stamp, key)
        if stamps[slot] != stamp:
            stamps[slot] = stamp
            table_keys[slot] = key
            counts[slot] = 0
        counts[slot] += 1
    matches = 0
    for key in b:
        slot = table_slot(table_keys, stamps, stamp, key)
        if stamps[slot] == stamp and counts[slot] > 0:
            counts[slot] -= 1
            matches += 1
    return matches
