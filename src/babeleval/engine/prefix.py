"""Shared prefixes: the long token prefixes many scoring contexts share (few-shot
demonstrations, an instruction header), found at token level among any list of requests,
so that their keys and values are computed once per (model, prefix) and every packed row
attends to them.

Contexts are sorted; a run of neighbours whose common prefix is at least MIN_PREFIX tokens
shares the shortest of their common prefixes, rounded down to a multiple of STEP and leaving
every context at least one token of its own (the token that predicts its first option token).
A prefix's length is an argument of the compiled programs, not a shape (prefix_bucket), so
the step can be fine."""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..models import build_module
from ..models.decoder import empty_cache
from ..models.stack import cache_slots
from .buckets import length_bucket, padded_rows
from ..placement.devices import data_shards, per_device, place_kv, replicate, shard_batch
from .radix import common_length

MIN_PREFIX = 32  # a 49-54 token instruction header (ProverbEval t1 on SIB-200 with SmolLM2's tokenizer) pays
STEP = 16


def shared_prefixes(contexts: list[list[int]], min_prefix: int = MIN_PREFIX, step: int = STEP) -> dict[int, int]:
    """{index of a context: its shared prefix length} for the contexts that have one. Identical
    contexts count once (a question's options share their whole context already: that is not a
    prefix to cache, and one group per question would cut the batches into single questions).
    In sorted order the prefix common to a run of distinct contexts is the one its first and its
    last member share."""
    copies: dict[tuple, list[int]] = {}
    for i, context in enumerate(contexts):
        copies.setdefault(tuple(context), []).append(i)
    distinct = sorted(copies)
    out: dict[int, int] = {}

    def close(run, shared):
        length = min(shared, min(len(c) for c in run) - 1) // step * step
        if len(run) > 1 and length >= min_prefix:
            out.update({i: length for c in run for i in copies[c]})

    run, shared = [], 0
    for context in distinct:
        common = common_length(run[0], context) if run else 0
        if run and common >= min_prefix:
            run.append(context)
            shared = common
        else:
            if run:
                close(run, shared)
            run, shared = [context], 0
    if run:
        close(run, shared)
    return out


def prefix_bucket(n: int) -> int:
    """Slots a prefix of n tokens is computed in: the next power of two or midpoint (32, 48,
    64, 96, ..., 1024, 1536, 2048, 3072, ...). Its length is an argument, not a shape, so a
    run with a prefix per paragraph (XQuAD: 240 lengths) compiles a few programs, not hundreds."""
    return length_bucket(n, minimum=MIN_PREFIX, step=1 << 30)


@partial(jax.jit, static_argnames=("config", "dtype"))
def prefix_caches(params, tokens, config, dtype=jnp.float32):
    """tokens: [R, S], prefixes then padding, split over the devices -> the KV cache (models/stack.py:
    per layer group k, v [R, repeats, Hkv, S, D]; causal: the padding after a prefix changes nothing in its slots)."""
    def local(params, tokens):
        module = build_module(config, dtype)
        r, p = tokens.shape
        positions = jnp.broadcast_to(jnp.arange(p, dtype=jnp.int32), (r, p))
        mask = jnp.broadcast_to(jnp.tril(jnp.ones((p, p), bool)), (r, p, p))
        _, cache = module.apply({"params": params}, tokens, positions, mask, cache=empty_cache(config, r, p, dtype),
                                cache_index=0, outputs=jnp.zeros((r, 1), jnp.int32))  # no output wanted: one query
        return cache

    return per_device(local)(params, tokens)


def with_prefix(cache, rows: int, length: int):
    """The prefix's cache repeated for `rows` rows, with `length` empty slots after it."""
    def grow(x):
        x = jnp.broadcast_to(x, (rows,) + x.shape[1:])
        return jnp.concatenate([x, jnp.zeros(x.shape[:-2] + (length,) + x.shape[-1:], x.dtype)], axis=-2)
    return jax.tree.map(grow, cache)


def attention_inputs(prefix, positions, mask, real, cache=None) -> dict:
    """module.apply's keyword inputs for rows [B, T] (positions, mask [B, T, T]) standing alone
    (prefix None: `cache` as given, written from slot 0) or continuing cached prefixes (kv: per
    layer k, v [1 or B, Hkv, S, D], of which the first `length` slots are the prefix; one prefix
    for all rows, or each row its own with length [B]): positions then start after it, the rows'
    keys and values go after its S slots, and every query of a real row (real: [B, T]) also sees
    its prefix's keys."""
    if prefix is None:
        return dict(positions=positions, mask=mask, cache=cache, cache_index=None if cache is None else 0)
    kv, length = prefix
    b, t = positions.shape
    s = cache_slots(kv)
    band = real[:, :, None] & (jnp.arange(s)[None, None, :] < jnp.reshape(length, (-1, 1, 1)))
    own = positions + jnp.reshape(length, (-1, 1))
    return dict(positions=own, mask=jnp.concatenate([band, mask], axis=2), cache=with_prefix(kv, b, t),
                cache_index=s, kv_positions=jnp.concatenate([jnp.broadcast_to(jnp.arange(s, dtype=own.dtype), (b, s)), own], 1))


def prefix_groups(contexts: list[list[int]], share: bool = True) -> list[tuple[tuple, list[int]]]:
    """(prefix tokens, indices of the contexts that continue it): one group per shared prefix,
    longest first, then () for the rest (every context there when share is False)."""
    shared = shared_prefixes(contexts) if share else {}
    groups: dict[tuple, list[int]] = {}
    for i, context in enumerate(contexts):
        groups.setdefault(tuple(context[:shared[i]]) if i in shared else (), []).append(i)
    return sorted(groups.items(), key=lambda g: -len(g[0]))


def computed_prefixes(params, groups, model, stats):
    """(prefix, members, cache) for every group of prefix_groups: cache = the prefix's KV in
    prefix_bucket slots and its length, on every device (None for no prefix). Prefixes are
    computed a data shard's worth at a time, one per shard in parallel (a prefix per XQuAD
    paragraph: 240), then copied to all (KV heads split along model where they divide it); counted in stats (prefixes, prefix_tokens, compiles)."""
    devices = data_shards()
    for start in range(0, len(groups), devices):
        chunk = groups[start: start + devices]
        prefixes = [prefix for prefix, _ in chunk if prefix]
        caches = iter(_compute(params, prefixes, model, stats) if prefixes else ())
        for prefix, members in chunk:
            yield prefix, members, next(caches) if prefix else None


def _compute(params, prefixes: list[tuple], model, stats) -> list:
    kv = _computed(params, prefixes, prefix_bucket(max(map(len, prefixes))), model, stats)
    return [(place_kv(jax.tree.map(lambda x: x[r: r + 1], kv)), replicate(jnp.int32(len(prefix))))
            for r, prefix in enumerate(prefixes)]


def _computed(params, prefixes: list[tuple], slots: int, model, stats):
    """The prefixes' keys and values in `slots` slots, one row each (padding rows after them
    to fill every device), split over the devices; counted in stats."""
    rows = padded_rows(len(prefixes), data_shards())
    tokens = np.zeros((rows, slots), np.int32)
    for r, prefix in enumerate(prefixes):
        tokens[r, :len(prefix)] = prefix
    stats.prefixes += len(prefixes)
    stats.prefix_tokens += sum(map(len, prefixes))
    stats.compiles.see("prefix", rows, slots)
    return prefix_caches(params, shard_batch(tokens)[0], config=model.config, dtype=model.dtype)


def prefix_table(params, prefixes: list[tuple], slots: int, model, stats):
    """Every prefix's keys and values in `slots` slots, stacked (per layer k, v [K, Hkv, slots, D],
    row k prefix k) on every device: computed one prefix per device at a time,
    each device's worth in its own prefix_bucket (a 900-token prefix is not computed in the
    1,536 slots of the group's longest), so the program is keyed by that bucket alone."""
    devices = data_shards()
    chunks = []
    for start in range(0, len(prefixes), devices):
        chunk = prefixes[start: start + devices]
        chunks.append(_computed(params, chunk, prefix_bucket(max(map(len, chunk))), model, stats))
    return place_kv(_stacked(tuple(chunks), slots, len(prefixes)))


@partial(jax.jit, static_argnames=("slots", "rows"))
def _stacked(chunks, slots: int, rows: int):
    """The chunks' first `rows` rows (the prefixes, not the padding rows that filled the last
    chunk's devices: the table goes whole to every device) in one table, each padded with empty
    slots to `slots`."""
    pad = lambda a: jnp.pad(a, ((0, 0),) * (a.ndim - 2) + ((0, slots - a.shape[-2]), (0, 0)))
    return jax.tree.map(lambda *parts: jnp.concatenate([pad(a) for a in parts])[:rows], *chunks)


@jax.jit
def prefix_rows(table, which):
    """Row r's prefix cache is the table's row which[r]: per layer k, v [R, Hkv, S, D], split over
    the devices as `which` is."""
    return per_device(lambda table, which: jax.tree.map(lambda x: x[which], table))(table, which)


def prefix_slots(prefix) -> int:
    """The slots a computed prefix (computed_prefixes) occupies in every row's cache (0 for None)."""
    return 0 if prefix is None else cache_slots(prefix[0])
