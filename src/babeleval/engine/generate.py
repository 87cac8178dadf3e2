"""Greedy generation with a KV cache, in two jitted programs: a prefill that runs a batch
of prompts, and a lax.while_loop of single-token decode steps.

Prompts that share no prefix are prefilled packed in lines (engine/packed_prefill.py) and
copied into their decode groups' caches; what follows is the path of prompts that continue a
shared prefix. Prompts are left-padded (every row's last prompt token sits at the same index). Prefill
batches are sized by a token budget; their caches are then joined into one larger decode
batch (a decode step reads every weight once whatever the batch, so more rows cost little:
with 1,400-token prompts four rows fit the prefill budget, sixteen decode together). A row is
done at EOS, at a token whose text contains a stop string, or after max_new_tokens; the loop
ends when every row is done. Stop strings are then cut on the host exactly (a stop spanning
two tokens is found there).

Prompts that share a long prefix (engine/prefix.py: a paragraph for its questions, few-shot
demonstrations) decode in one group, and a group's distinct prefixes are computed once into a
table; every prefill row then attends its own prefix's keys (gathered from the table to the
group's widest prefix slots), so a group's prefill batches all have one shape (rows, suffix
bucket, prefix slots) whatever paragraphs they mix: XQuAD-hi's 1,190 questions over 240
paragraphs compiled 64 programs (cold), not a few per paragraph.
"""
from __future__ import annotations

import functools
import itertools
import time
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..models import build_module
from ..models.decoder import empty_cache
from ..models.stack import cache_slots
from ..runlog import warn_once
from .head import greedy_tokens
from .prefix import attention_inputs, prefix_bucket, prefix_groups, prefix_rows, prefix_table
from .buckets import CompileCounter, batch_size_for, length_batches, length_bucket, next_pow2, padded_rows
from .packed_prefill import empty_buffer, group_row, prefill_lines, take_group, window_calls, window_rows, windows
from ..placement.devices import constrain_kv, data_shards, per_device, shard_batch, split_for_process, texts_from_all_processes, using
from .placed import PlacedEngine
from ..requests import Generate, GenerateResult, cut_at_stop


def _positions(valid):
    """Token positions of left-padded rows (padding at 0) and each row's length."""
    return jnp.maximum(jnp.cumsum(valid, axis=1) - 1, 0), valid.sum(axis=1)


def _prefill_on_device(params, prefix, tokens, valid, config, dtype):
    module = build_module(config, dtype)
    b, p = tokens.shape
    positions, _ = _positions(valid)
    mask = jnp.tril(jnp.ones((p, p), bool))[None] & valid[:, None, :] | jnp.eye(p, dtype=bool)[None]
    inputs = attention_inputs(prefix, positions, mask, valid, empty_cache(config, b, p, dtype))
    hidden, cache = module.apply({"params": params}, tokens, **inputs, outputs=jnp.full((b, 1), p - 1))
    return greedy_tokens(module, params, hidden[:, 0]), cache


@partial(jax.jit, static_argnames=("config", "dtype"))
def prefill(params, tokens, valid, config, dtype):
    """tokens, valid: [B, P] left-padded prompts, split over the devices. Returns every row's
    first new token and the prompt's KV cache (per layer k, v: [B, Hkv, P, D])."""
    local = partial(_prefill_on_device, config=config, dtype=dtype)
    return per_device(lambda params, *rows: local(params, None, *rows))(params, tokens, valid)


@partial(jax.jit, static_argnames=("config", "dtype"))
def prefill_after_prefix(params, prefix, tokens, valid, config, dtype):
    """prefill for prompts that continue cached prefixes, each row its own: prefix = (per layer
    k, v [B, Hkv, Q, D], lengths [B]; a row without one has length 0); tokens, valid [B, P] are
    what follows. The cache returned holds the prefix's Q slots, then P."""
    local = partial(_prefill_on_device, config=config, dtype=dtype)
    return per_device(local)(params, prefix, tokens, valid)


def _decode_on_device(params, stop_ids, limit, first, cache, valid, config, dtype):
    module = build_module(config, dtype)
    apply = lambda *a, **k: module.apply({"params": params}, *a, **k)
    (b, p), max_new = valid.shape, cache_slots(cache) - valid.shape[1]
    positions, lengths = _positions(valid)
    kv_positions = jnp.concatenate([positions, lengths[:, None] + jnp.arange(max_new)[None]], axis=1)
    slots = jnp.concatenate([valid, jnp.zeros((b, max_new), bool)], axis=1)

    def cond(state):
        step, _, _, _, done, _ = state
        return (step < limit) & ~done.all()

    def body(state):
        step, token, cache, slots, done, out = state
        out = out.at[:, step].set(jnp.where(done, -1, token))
        done = done | (token[:, None] == stop_ids[None, :]).any(axis=1)
        slots = slots.at[:, p + step].set(True)
        hidden, cache = apply(token[:, None], (lengths + step)[:, None], slots[:, None, :], cache=cache,
                              cache_index=p + step, kv_positions=kv_positions)
        token = greedy_tokens(module, params, hidden[:, 0])
        return step + 1, token, cache, slots, done, out

    state = (jnp.int32(0), first, cache, slots, ~valid.any(axis=1), jnp.full((b, max_new), -1, jnp.int32))  # padding rows: done
    return jax.lax.while_loop(cond, body, state)[-1]


@partial(jax.jit, static_argnames=("config", "dtype"))
def decode(params, stop_ids, limit, first, cache, valid, config, dtype):
    """first: [B] first new tokens; cache: per layer k, v [B, Hkv, P + N, D], the prompts' in the
    first P slots; valid: [B, P] prompt slots holding a token (these three split over the devices).
    Returns [B, N] new tokens (first included), -1 after a row stopped; at most `limit` (<= N).
    Every device runs its own loop until its own rows are done: no collective per step."""
    local = partial(_decode_on_device, config=config, dtype=dtype)
    return per_device(local, replicated=3)(params, stop_ids, limit, first, cache, valid)


@partial(jax.jit, static_argnames=("max_new",))
def join_batches(firsts, caches, max_new: int):
    """One decode batch from prefilled batches of one shape, without moving rows between
    devices: each device stacks its own rows of every batch in turn, with max_new empty cache
    slots after the prompts' (see decode_row_order for where each row ends up)."""
    def local(firsts, caches):
        pad = lambda a: jnp.pad(a, ((0, 0),) * (a.ndim - 2) + ((0, max_new), (0, 0)))
        return jnp.concatenate(firsts), jax.tree.map(lambda *parts: jnp.concatenate([pad(a) for a in parts]), *caches)

    first, cache = per_device(local, replicated=0)(firsts, caches)
    return first, constrain_kv(cache)  # the decode cache's KV heads along model


def decode_row_order(batch_rows: list[int], devices: int) -> list[tuple[int, int]]:
    """(batch, row in batch) of every row of the joined decode batch: device by device, each
    device's share of every batch in turn."""
    return [(b, d * (rows // devices) + r) for d in range(devices)
            for b, rows in enumerate(batch_rows) for r in range(rows // devices)]


MIN_REUSED = 256  # prompt tokens a shared prefix must save to be prefilled apart (generation: it costs a
# prefix program, a prefill after it and a decode group of its own; two prompts sharing a 32-token
# opening do not pay for that)
WINDOW_GROUPS = 4  # a packed-prefill window's buffer holds up to 4 x decode_budget token slots of lines (the
# memory of 4 decode groups' caches): packing many prompts together wastes little of the lines (XQuAD-hi's
# 76 one-question prompts: 5.6% padding in one window, 21% packed one decode group at a time)


@functools.lru_cache(maxsize=16)
def stop_token_ids(tokenizer, stops: tuple[str, ...]) -> tuple[int, ...]:
    """EOS and every token whose text contains a stop string (generation can end there)."""
    ids = {tokenizer.eos_id} if tokenizer.eos_id is not None else set()
    if stops:
        for i in range(tokenizer.vocab_size):
            piece = tokenizer.decode([i])
            if any(stop in piece for stop in stops):
                ids.add(i)
    return tuple(sorted(ids))


def padded_stop_ids(tokenizer, stops) -> np.ndarray:
    """stop_token_ids as an array padded with -1 to a power of two (few compiled shapes)."""
    ids = np.asarray(stop_token_ids(tokenizer, tuple(stops)) or (-1,), np.int32)
    return np.pad(ids, (0, next_pow2(len(ids)) - len(ids)), constant_values=-1)


@dataclass
class GenerationStats:
    requests: int = 0
    new_tokens: int = 0
    prompt_tokens: int = 0
    truncated: int = 0  # prompts cut from the left to fit max_length with the new tokens
    prefixes: int = 0  # shared prompt prefixes computed once (engine/prefix.py)
    prefix_tokens: int = 0  # their tokens
    prefix_tokens_reused: int = 0  # prefix tokens prefills did not compute again: what a no-cache engine adds
    prefill_seconds: float = 0.0  # where the time goes: prompt prefills (shared prefixes included) ...
    decode_seconds: float = 0.0  # ... and decode loops (joined caches included)
    decode_row_steps: int = 0  # rows x steps the decode loops ran (padding rows and rows already done included)
    prefill_slots: int = 0  # token slots of the packed prefill lines (engine/packed_prefill.py), padding included
    seconds: float = 0.0
    compiles: CompileCounter = None

    def __post_init__(self):
        self.compiles = self.compiles or CompileCounter()


class Generating(PlacedEngine):
    """What both greedy generators (Generator here, Seq2SeqGenerator for encoder-decoders) share:
    requests grouped by stop strings and token limit, answered in request order, shared across
    processes, each row's tokens cut into a result. A subclass gives _generate_group."""

    def generate(self, requests: list[Generate], progress=None) -> list[str]:
        """Greedy continuations, in request order."""
        return [r.text for r in self.generate_results(requests, progress)]

    def generate_results(self, requests: list[Generate], progress=None) -> list[GenerateResult]:
        """Greedy continuations with why each stopped, in request order (requests with different
        stops/max_new_tokens batch apart). Across jax.distributed processes each answers its
        share, and all get all."""
        with using(self.mesh):
            return self._generate_results(requests, progress)

    def _generate_results(self, requests: list[Generate], progress=None) -> list[GenerateResult]:
        start = time.time()
        out = [GenerateResult("", "", 0)] * len(requests)
        groups: dict[tuple, list[int]] = {}
        for i in split_for_process(len(requests)):
            groups.setdefault((requests[i].stop, requests[i].max_new_tokens), []).append(i)
        for (stops, max_new), members in groups.items():
            self._generate_group(requests, members, stops, max_new, out, progress)
        self.stats.requests += len(requests)
        self.stats.seconds += time.time() - start
        return from_all_processes(out)

    def _result(self, ids: list[int], stops, max_chars: int | None) -> GenerateResult:
        result = finished(self.model.tokenizer, ids, stops, max_chars)
        self.stats.new_tokens += result.new_tokens
        return result


class Generator(Generating):
    def __init__(self, model, max_length: int | None = None, token_budget: int = 8192, batch_size: int | None = None,
                 decode_budget: int | None = None, share_prefixes: bool = True, mesh=None):
        """max_length: prompt + new tokens, the model's own limit by default (a 2,048 default cut
        XQuAD-hi's longest prompts, which transformers reads whole); token_budget: prompt slots
        per prefill batch; decode_budget: cache slots (prompt + new) decoded together,
        4 x token_budget by default (a cache token of SmolLM2-135M is 46 KB);
        share_prefixes: a long prompt prefix many prompts share is prefilled once; mesh: 'auto',
        'data=D,model=M' or (D, M) (placement/devices.py, placement/sharding.py)."""
        self.decode_budget = decode_budget or 4 * token_budget
        super().__init__(model, max_length, token_budget, batch_size, mesh, cache_tokens=self.decode_budget)
        self.share_prefixes = share_prefixes
        self.stats = GenerationStats()

    def prompt_room(self, max_new: int) -> int:
        """Prompt tokens a request keeps: the prompt and its new tokens share max_length."""
        return self.max_length - max_new

    def prompt_tokens(self, context: str, max_new: int) -> list[int]:
        """Prefix (BOS) + the context's tokens, left-truncated to leave room for max_new tokens
        (no second BOS where the context starts with one: a chat template's)."""
        tok = self.model.tokenizer
        ids = tok.encode(context)
        keep = self.max_length - max_new - len(tok.prefix)
        if len(ids) > keep:
            self.stats.truncated += 1
            warn_once(self, "truncated", f"a prompt of {len(ids)} tokens does not fit {self.max_length} tokens with "
                      f"{max_new} new ones: prompts are cut from the left; results.json counts them "
                      "(engine.generation.truncated, and per task)")
        return tok.with_prefix(ids[max(0, len(ids) - keep):])

    def _generate_group(self, requests, members, stops, max_new, out, progress):
        prompts = [self.prompt_tokens(requests[i].context, max_new) for i in members]
        new_bucket = next_pow2(max_new, 8)
        stop_ids = padded_stop_ids(self.model.tokenizer, stops)
        groups = prefix_groups(prompts, self.share_prefixes)
        worth = lambda prefix, group: prefix and (len(group) - 1) * len(prefix) >= MIN_REUSED
        alone = [j for prefix, group in groups if not worth(prefix, group) for j in group]
        shared = [(prefix, group) for prefix, group in groups if worth(prefix, group)]
        shared_groups = decode_groups(shared, prompts, self.decode_budget, new_bucket, self.batch_size)
        decoded = itertools.chain(self._decode_alone(prompts, alone, new_bucket, stop_ids, max_new),
                                  (([j for j, _ in rows], self._decode_group([prompts[j] for j, _ in rows],
                                                                             [prefix for _, prefix in rows],
                                                                             new_bucket, stop_ids, max_new))
                                   for rows in shared_groups))
        for rows, new in decoded:
            for j, ids in zip(rows, new):
                out[members[j]] = self._result(ids, stops, requests[members[j]].max_new_chars)
                self.stats.prompt_tokens += len(prompts[j])
            if progress:
                progress(len(rows))

    def _decode_alone(self, prompts: list[list[int]], which: list[int], new_bucket: int, stop_ids, max_new):
        """Prompts sharing no prefix (indices `which`), longest first, in windows of decode groups
        prefilled as packed lines (engine/packed_prefill.py: one program for the whole call), then
        decoded group by group. Yields (prompt indices, their new tokens) per decode group."""
        if not which:
            return
        devices, config, dtype = data_shards(), self.model.config, self.model.dtype
        which = sorted(which, key=lambda j: -len(prompts[j]))
        ordered = [prompts[j] for j in which]
        held = length_bucket(len(ordered[0]))  # the longest prompt's slots
        rows = self.batch_size or batch_size_for(held + new_bucket, self.decode_budget, devices)
        rows = padded_rows(min(rows, len(which)), devices)
        share = length_bucket(-(-sum(map(len, ordered)) // devices))  # a device's share of the tokens
        line = max(held, min(share, self.token_budget // devices // 2))  # a few short prompts: no 2,048-token lines
        max_lines = max(1, WINDOW_GROUPS * self.decode_budget // devices // line)
        packed = windows(list(map(len, ordered)), rows, devices, line, max_lines)
        lines = max(p.count() for p in packed)  # every window's buffer alike: one program
        size = rows * max(-(-len(p.members()) // rows) for p in packed)  # window rows
        buffer = None
        for window in packed:
            members = window.members()
            begin = time.perf_counter()
            slots = window_rows(len(members), rows, size // rows, devices)
            calls, line_of, end_of = window_calls(window, members[0], ordered, slots, size)
            first = shard_batch(np.zeros(size, np.int32))[0]
            if buffer is None:
                self.stats.compiles.see("buffer", lines, line)
                buffer = empty_buffer(first, lines, line, config=config, dtype=dtype)
            for c, call in enumerate(calls):
                self.stats.compiles.see("prefill-lines", devices, line, lines, size)
                self.stats.prefill_slots += call.tokens.size
                first, buffer = prefill_lines(self.params, jnp.int32(c), buffer, first, *shard_batch(
                    call.tokens, call.positions, call.ends, call.last), config=config, dtype=dtype)
            line_of, end_of = shard_batch(line_of, end_of)
            jax.block_until_ready(first)
            self.stats.prefill_seconds += time.perf_counter() - begin
            for g in range(-(-len(members) // rows)):
                group = members[g * rows: (g + 1) * rows]
                length = self._decode_length(len(ordered[group[0]]), rows, new_bucket, len(stop_ids), held)
                valid = np.zeros((rows, length), bool)
                at = [group_row(k, rows, devices) for k in range(len(group))]
                for k, j in enumerate(group):
                    valid[at[k], length - len(ordered[j]):] = True
                begin = time.perf_counter()
                self.stats.compiles.see("take-group", rows, length, new_bucket, lines, size)
                first_g, cache_g = take_group(jnp.int32(g), first, buffer, line_of, end_of, rows=rows // devices,
                                              length=length, new=new_bucket)
                new = self._decode(stop_ids, max_new, first_g, cache_g, valid, new_bucket)
                self.stats.decode_seconds += time.perf_counter() - begin
                yield [which[j] for j in group], [new[r] for r in at]

    def _decode_length(self, longest: int, rows: int, new_bucket: int, stops: int, held: int) -> int:
        """Prompt slots a decode group of prompts up to `longest` tokens reads: its bucket, or a
        decode program (and its take_group) already compiled for up to 2x that: a decode step's
        attention grows with the slots, but a program costs seconds to compile (SmolLM2-135M on
        2 CPU cores: ~4.5 s for the pair; a group of 16 rows x 32 steps decoding 640 prompt slots
        in 1,024 took ~0.4 s more)."""
        need = length_bucket(longest)
        compiled = [shape[2] for shape in self.stats.compiles.shapes
                    if shape[0] == "decode" and shape[1] == rows and shape[3:] == (new_bucket, stops)]
        return min([s for s in compiled if need <= s <= min(held, 2 * need)], default=need)

    def _decode_group(self, prompts: list[list[int]], prefixes: list[tuple], new_bucket: int, stop_ids,
                      max_new) -> list[list[int]]:
        """Prefill the prompts, each continuing its shared prefix (computed once, engine/prefix.py;
        () for none), in batches of one shape: the prefixes in the slots of the longest, the rest
        in the bucket of the longest rest; then decode them together. Returns every prompt's new
        tokens (-1 after it stopped)."""
        devices, config, dtype = data_shards(), self.model.config, self.model.dtype
        start_time = time.perf_counter()
        distinct = {p: k for k, p in enumerate(dict.fromkeys(p for p in prefixes if p))}  # prefix -> table row
        held = prefix_bucket(max(map(len, distinct))) if distinct else 0  # every row's prefix slots
        table = prefix_table(self.params, list(distinct), held, self.model, self.stats) if distinct else None
        which = np.asarray([distinct.get(p, 0) for p in prefixes], np.int32)
        lengths = np.asarray([len(p) for p in prefixes], np.int32)
        suffixes = [prompt[len(p):] for prompt, p in zip(prompts, prefixes)]
        length = length_bucket(max(map(len, suffixes)), minimum=64 if held else 16)  # one suffix shape per group
        rows = self.batch_size or batch_size_for(held + length + new_bucket, self.token_budget, devices)
        rows = padded_rows(min(rows, len(prompts)), devices)
        firsts, caches, valids = [], [], []
        for start in range(0, len(prompts), rows):
            part = slice(start, start + rows)
            tokens, valid = _left_padded(suffixes[part], length, rows)
            self.stats.compiles.see("prefill", rows, length, held)
            self.stats.prefix_tokens_reused += int(lengths[part].sum())
            if table is None:
                first, kv = prefill(self.params, *shard_batch(tokens, valid), config=config, dtype=dtype)
            else:
                which_rows, length_rows = (np.pad(a[part], (0, rows - len(a[part]))) for a in (which, lengths))
                self.stats.compiles.see("prefix-rows", jax.tree.leaves(table)[0].shape[0], rows, held)
                prefix = (prefix_rows(table, shard_batch(which_rows)[0]), shard_batch(length_rows)[0])
                first, kv = prefill_after_prefix(self.params, prefix, *shard_batch(tokens, valid), config=config,
                                                 dtype=dtype)
                valid = np.concatenate([np.arange(held)[None, :] < length_rows[:, None], valid], axis=1)
            firsts.append(first)
            caches.append(kv)
            valids.append(valid)
        jax.block_until_ready(firsts)
        decode_time = time.perf_counter()
        self.stats.prefill_seconds += decode_time - start_time
        first, cache = join_batches(tuple(firsts), tuple(caches), max_new=new_bucket)
        order = decode_row_order([rows] * len(firsts), devices)
        owner = [b * rows + r if b * rows + r < len(prompts) else None for b, r in order]  # None: a padding row
        valid = np.stack([valids[b][r] for b, r in order])
        new = self._decode(stop_ids, max_new, first, cache, valid, new_bucket)
        self.stats.decode_seconds += time.perf_counter() - decode_time
        out = [None] * len(prompts)
        for row, k in enumerate(owner):
            if k is not None:
                out[k] = new[row]
        return out

    def _decode(self, stop_ids, max_new: int, first, cache, valid: np.ndarray, new_bucket: int) -> list[list[int]]:
        """decode one group (valid [rows, prompt slots]); every row's new tokens, -1 after it stopped."""
        devices = data_shards()
        self.stats.compiles.see("decode", len(valid), valid.shape[1], new_bucket, len(stop_ids))
        new = np.asarray(decode(self.params, jnp.asarray(stop_ids), jnp.int32(max_new), first, cache, shard_batch(valid)[0],
                                config=self.model.config, dtype=self.model.dtype))
        steps = (new >= 0).sum(axis=1).reshape(devices, -1).max(axis=1)  # each device loops until its own rows are done
        self.stats.decode_row_steps += len(valid) // devices * int(steps.sum())
        return [row[:max_new].tolist() for row in new]

def from_all_processes(out: list[GenerateResult]) -> list[GenerateResult]:
    """Each jax.distributed process filled only its own results: every process gets them all."""
    texts = texts_from_all_processes([r.text for r in out])
    reasons = texts_from_all_processes([r.stop_reason for r in out])
    counts = texts_from_all_processes([str(r.new_tokens) if r.stop_reason else "" for r in out])  # "" where not ours
    return [GenerateResult(t, why, int(n or 0)) for t, why, n in zip(texts, reasons, counts)]


def finished(tok, ids: list[int], stops, max_chars: int | None) -> GenerateResult:
    """A row's new tokens (-1 after it stopped) as a result: cut at EOS, then at the first stop
    string, then at max_chars characters; a cut by the length limit never ends in a partial
    UTF-8 sequence (byte-fallback tokens)."""
    ids = [t for t in ids if t >= 0]
    reason = "length"
    if tok.eos_id in ids:
        ids, reason = ids[:ids.index(tok.eos_id)], "eos"
    text = tok.decode(ids)
    cut = cut_at_stop(text, stops)
    if cut != text:
        text, reason = cut, "stop"
    elif reason == "length":
        text = text.rstrip("\ufffd")
    if max_chars is not None and len(text) > max_chars:
        text, reason = text[:max_chars], "length"
    return GenerateResult(text, reason, len(ids))


def decode_groups(groups, prompts: list[list[int]], budget: int, new_bucket: int, batch_size: int | None = None):
    """Lists of (prompt index, its shared prefix) to decode together, for prefix_groups' groups:
    the prompts of one prefix stay in one decode group (the prefix is computed once per group)
    unless they alone fill one; prompts without a shared prefix decode apart, longest first.
    A group's rows: the most that fit `budget` cache slots at its first prompt's length."""
    devices = data_shards()

    def size(i):
        return batch_size or batch_size_for(length_bucket(len(prompts[i])) + new_bucket, budget, devices)

    current = []
    for prefix, members in groups:
        members = sorted(members, key=lambda i: -len(prompts[i]))
        if not prefix:
            if current:
                yield current
                current = []
            for _, start, stop in length_batches([len(prompts[i]) for i in members], budget, devices, new_bucket,
                                                 batch_size):
                yield [(i, ()) for i in members[start:stop]]
            continue
        rows = [(i, prefix) for i in members]
        if current and len(current) + len(rows) > size(current[0][0]):
            yield current
            current = []
        fill = size(rows[0][0])  # a prefix's prompts alone, longest first: the first sets the size
        while len(rows) > fill:
            yield rows[:fill]
            rows = rows[fill:]
        current += rows
    if current:
        yield current


def _left_padded(prompts: list[list[int]], length: int, rows: int):
    """Token ids and validity [rows, length], each prompt at the right end of its row (rows
    past the prompts are empty)."""
    tokens = np.zeros((rows, length), np.int32)
    valid = np.zeros((rows, length), bool)
    for r, prompt in enumerate(prompts):
        tokens[r, length - len(prompt):] = prompt
        valid[r, length - len(prompt):] = True
    return tokens, valid
