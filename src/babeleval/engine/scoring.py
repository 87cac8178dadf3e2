"""Log-likelihood scoring of answer options in packed, shared-context rows.

A question's options share one row: context tokens once, then every option, each
option attending to the context and to itself only (a block mask; positions restart
after the context). The context is therefore computed once per question, and the
vocabulary projection + log-softmax run only at the positions that predict an option
token (engine/head.py). Rows are then packed, longest first, several to a line
(a question attends only to its own tokens). A line is as short as its longest row
allows (128, 192, 256, 384, 512, 640, ... tokens): attention cost grows with the line, so short
questions are not put in long lines, and the few line lengths are the compiled shapes.
"""
from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..models import build_module
from ..runlog import warn_once
from .buckets import CompileCounter, batch_size_for, length_bucket, padded_rows
from .compile_cache import default_compilation_cache
from .devices import data_shards, per_device, shard_batch, split_for_process, sum_over_processes, using
from .head import HEAD_CHUNK, score_positions
from .sharding import kv_bytes_per_token, place_model
from .prefix import attention_inputs, computed_prefixes, prefix_groups, prefix_slots
from ..requests import Loglikelihood, LoglikelihoodResult
from .tokenize import split_pairs


MIN_LINE = 128  # shortest line: shorter questions are packed several to a line


def question_mask(groups, segments):
    """[B, T, T]: causal, within one question of the line (groups; -1 is padding), and an
    option (segment k > 0) sees the context (segment 0) and itself, not the other options."""
    idx = jnp.arange(groups.shape[1])
    valid = groups >= 0
    same_question = groups[:, None, :] == groups[:, :, None]
    same_block = (segments[:, None, :] == 0) | (segments[:, None, :] == segments[:, :, None])
    mask = (idx[:, None] >= idx[None, :])[None] & same_question & same_block & valid[:, None, :] & valid[:, :, None]
    return mask | jnp.eye(groups.shape[1], dtype=bool)[None]


def _score_on_device(params, prefix, tokens, positions, groups, segments, where, targets, count, config, dtype):
    """One device's lines, standing alone (prefix None) or continuing a cached prefix."""
    module = build_module(config, dtype)
    inputs = attention_inputs(prefix, positions, question_mask(groups, segments), groups >= 0)
    hidden, _ = module.apply({"params": params}, tokens, **inputs)
    logprob, greedy = score_positions(module, params, hidden.reshape(-1, hidden.shape[-1]), where[0], targets[0], count[0])
    return logprob[None], greedy[None]


@partial(jax.jit, static_argnames=("config", "dtype"))
def score_lines(params, tokens, positions, groups, segments, where, targets, count, config, dtype=jnp.float32):
    """tokens, positions, groups, segments: [R, L], split by rows over the devices;
    where, targets: [devices, C]: scored positions in the device's flattened lines and the
    token each should predict; count: [devices] real entries. Returns (log-prob, greedy), [devices, C]."""
    local = partial(_score_on_device, config=config, dtype=dtype)
    return per_device(lambda params, *lines: local(params, None, *lines))(params, tokens, positions, groups, segments,
                                                                            where, targets, count)


@partial(jax.jit, static_argnames=("config", "dtype"))
def score_lines_after_prefix(params, prefix, tokens, positions, groups, segments, where, targets, count, config,
                             dtype=jnp.float32):
    """score_lines for lines that continue one cached prefix (per layer k, v [1, Hkv, P, D])."""
    local = partial(_score_on_device, config=config, dtype=dtype)
    return per_device(local, replicated=2)(params, prefix, tokens, positions, groups, segments, where, targets, count)


@dataclass
class Row:
    """One packed row: a context and the continuations that share it."""

    context: list[int]
    options: list[tuple[int, list[int]]] = field(default_factory=list)

    @property
    def length(self) -> int:
        return len(self.context) + sum(len(o) for _, o in self.options)


@dataclass
class ScoringStats:
    requests: int = 0
    questions: int = 0  # packed rows: one context and the options that share it
    lines: int = 0  # model rows run, each holding one or more questions
    tokens_computed: int = 0  # real (unpadded) tokens run through the model
    tokens_padded: int = 0  # tokens in the padded batches
    truncated: int = 0  # requests longer than max_length: context cut from the left
    duplicates: int = 0  # requests identical at token level to an earlier one of the call: not computed again
    prefixes: int = 0  # shared prefixes computed once (engine/prefix.py)
    prefix_tokens: int = 0  # their tokens (counted in tokens_computed once each)
    prefix_tokens_reused: int = 0  # prefix tokens rows did not compute again: what a no-cache engine adds
    seconds: float = 0.0
    compiles: CompileCounter = field(default_factory=CompileCounter)


def fit(context: list[int], continuation: list[int], max_length: int) -> tuple[list[int], list[int]]:
    """A request cut to max_length tokens from the left (the context first; at least one of its tokens stays)."""
    continuation = continuation[-max_length:]
    return context[-max(1, max_length - len(continuation)):], continuation


def unique_pairs(pairs: list[tuple[list[int], list[int]]]):
    """Requests identical at token level are computed once: the unique pairs, and for every
    request the index of its unique pair (mutual-information requests repeat each option's
    unconditional form for every question; tasks built elsewhere repeat whole requests)."""
    index: dict[tuple, int] = {}
    first = np.array([index.setdefault((tuple(c), tuple(k)), len(index)) for c, k in pairs], np.int64)
    return [(list(c), list(k)) for c, k in index], first


def pack_rows(pairs: list[tuple[list[int], list[int]]], max_length: int, owners: list[int] | None = None) -> list[Row]:
    """Group requests by identical context tokens; split a group when its row would exceed
    max_length. owners: the request index of each pair (default: its position)."""
    by_context: dict[tuple, list[Row]] = {}
    for k, (context, continuation) in enumerate(pairs):
        index = k if owners is None else owners[k]
        if not continuation:
            continue
        context, continuation = fit(context, continuation, max_length)
        rows = by_context.setdefault(tuple(context), [Row(list(context))])
        if rows[-1].options and rows[-1].length + len(continuation) > max_length:
            rows.append(Row(list(context)))
        rows[-1].options.append((index, continuation))
    return [row for rows in by_context.values() for row in rows]


def fill_lines(rows: list[Row], max_length: int) -> list[tuple[int, list[Row]]]:
    """First-fit decreasing into lines of (length, rows): a row that fits nowhere opens a line
    of the next length bucket >= its length (128, 192, 256, 384, 512, then multiples of 128;
    at most max_length: a third of a line padded at worst, not half as with powers of two);
    shorter rows fill the room left in open lines before opening lines of their own."""
    lines: list[tuple[int, list[Row]]] = []
    free: list[int] = []
    for row in sorted(rows, key=lambda r: -r.length):
        for i, room in enumerate(free):
            if row.length <= room:
                lines[i][1].append(row)
                free[i] -= row.length
                break
        else:
            length = min(length_bucket(row.length, MIN_LINE), max_length)
            lines.append((length, [row]))
            free.append(length - row.length)
    return lines


@dataclass
class LineArrays:
    """What one line (or one row) puts into the batch: its tokens with their positions,
    question (group) and block (segment: 0 = context, k = option k) ids, and for every
    scored position the token it predicts and the request that owns it."""

    tokens: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)
    segments: list[int] = field(default_factory=list)
    pred: list[int] = field(default_factory=list)  # positions whose next-token distribution is scored
    targets: list[int] = field(default_factory=list)
    owners: list[int] = field(default_factory=list)


def _line_arrays(line: list[Row]) -> LineArrays:
    """The rows of a line back to back."""
    out = LineArrays()
    for group, row in enumerate(line):
        arrays = _row_arrays(row)
        offset = len(out.tokens)
        out.tokens += arrays.tokens
        out.positions += arrays.positions
        out.groups += [group] * len(arrays.tokens)
        out.segments += arrays.segments
        out.pred += [p + offset for p in arrays.pred]
        out.targets += arrays.targets
        out.owners += arrays.owners
    return out


def _row_arrays(row: Row) -> LineArrays:
    out = LineArrays(list(row.context), list(range(len(row.context))), [], [0] * len(row.context))
    for block, (owner, option) in enumerate(row.options, start=1):
        start = len(out.tokens)
        out.tokens += option
        out.positions += range(len(row.context), len(row.context) + len(option))
        out.segments += [block] * len(option)
        out.pred += [len(row.context) - 1] + list(range(start, start + len(option) - 1))
        out.targets += option
        out.owners += [owner] * len(option)
    return out


def _split_tail(batch: list, devices: int) -> list[list]:
    """A last batch in power-of-two pieces (19 lines: 16 + 3 padded to 4, not 19 padded to 32)
    until padding what is left wastes at most a quarter of its rows: a few more compiled
    shapes (each cached for the rest of the run) instead of computing empty rows."""
    parts = []
    while batch:
        rows = padded_rows(len(batch), devices)
        take = 1 << (len(batch).bit_length() - 1)
        if rows - len(batch) <= rows // 4 or take % devices:
            take = len(batch)
        parts.append(batch[:take])
        batch = batch[take:]
    return parts


class Scorer:
    def __init__(self, model, max_length: int | None = None, token_budget: int = 4096, batch_size: int | None = None,
                 share_prefixes: bool = True, mesh=None):
        """max_length: the model's own limit by default (as lm-eval's HF backend); share_prefixes:
        compute long prefixes that many contexts share once (engine/prefix.py); mesh: 'auto',
        'data=D,model=M' or (D, M) (engine/devices.py, engine/sharding.py)."""
        self.model = model
        self.share_prefixes = share_prefixes
        self.max_length = min(max_length or model.config.max_positions, model.config.max_positions)
        self.token_budget = token_budget
        self.batch_size = batch_size
        default_compilation_cache()
        kv_bytes = kv_bytes_per_token(model.config, model.dtype) * token_budget
        self.mesh, self.params, self.placement = place_model(model, mesh, kv_bytes)
        self.stats = ScoringStats()

    def loglikelihood(self, requests: list[Loglikelihood], progress=None) -> list[LoglikelihoodResult]:
        with using(self.mesh):
            return self._loglikelihood(requests, progress)

    def _loglikelihood(self, requests: list[Loglikelihood], progress=None) -> list[LoglikelihoodResult]:
        start = time.time()
        pairs = split_pairs(self.model.tokenizer, [(r.context, r.continuation) for r in requests])
        self.stats.seconds += time.time() - start
        return self.loglikelihood_tokens(pairs, progress)

    def loglikelihood_tokens(self, pairs: list[tuple[list[int], list[int]]], progress=None) -> list[LoglikelihoodResult]:
        """Requests already split into (context, continuation) token ids: for callers that draw
        the boundary themselves (lm-eval's backend, rolling perplexity windows)."""
        start = time.time()
        cut = sum(1 for context, continuation in pairs if continuation and len(context) + len(continuation) > self.max_length)
        if cut:
            self.stats.truncated += cut
            warn_once(self, "truncated", f"{cut} of {len(pairs)} scoring requests are longer than {self.max_length} tokens "
                      "(the model's limit): their contexts are cut from the left; results.json counts them "
                      "(engine.scoring.truncated, and per task)")
        unique, first = unique_pairs([fit(c, k, self.max_length) for c, k in pairs])
        logprob = np.zeros(len(unique), np.float64)
        not_greedy = np.zeros(len(unique), np.int64)
        groups = prefix_groups([c for c, _ in unique], self.share_prefixes)
        for prefix, members, cache in computed_prefixes(self.params, groups, self.model, self.stats):
            self.stats.tokens_computed += len(prefix)
            suffixes = [(unique[i][0][len(prefix):], unique[i][1]) for i in members]
            room = self.max_length - len(prefix)
            rows = pack_rows(suffixes, room, members)
            rows = [rows[i] for i in split_for_process(len(rows))]
            for length, batch in self._batches(fill_lines(rows, room)):
                self.stats.prefix_tokens_reused += len(prefix) * sum(map(len, batch))
                self._run(batch, length, logprob, not_greedy, cache)
                if progress:
                    progress(sum(len(r.options) for line in batch for r in line))
        logprob, not_greedy = sum_over_processes(logprob)[first], sum_over_processes(not_greedy)[first]
        self.stats.requests += len(pairs)
        self.stats.duplicates += len(pairs) - len(unique)
        self.stats.seconds += time.time() - start
        return [LoglikelihoodResult(float(lp), bool(ng == 0), len(cont))
                for lp, ng, (_, cont) in zip(logprob, not_greedy, pairs)]

    def _batches(self, lines: list[tuple[int, list[Row]]]):
        """(length, lines) batches, longest lines first (an out-of-memory shows at once). The
        rows a length's last batch is padded to are filled with shorter lines, which fit;
        when none are left, the tail runs as a few power-of-two batches (_split_tail)."""
        by_length = defaultdict(list)
        for length, line in lines:
            by_length[length].append(line)
        lengths = sorted(by_length, reverse=True)
        for i, length in enumerate(lengths):
            group = by_length[length]
            size = self.batch_size or batch_size_for(length, self.token_budget, data_shards())
            for start in range(0, len(group), size):
                batch = group[start: start + size]
                if start + size < len(group):
                    yield length, batch
                    continue
                empty = padded_rows(len(batch), data_shards()) - len(batch)
                for shorter in lengths[i + 1:]:
                    while empty and by_length[shorter]:
                        batch.append(by_length[shorter].pop())
                        empty -= 1
                for part in _split_tail(batch, data_shards()):
                    yield length, part

    def _run(self, batch: list[list[Row]], length: int, logprob: np.ndarray, not_greedy: np.ndarray, prefix=None) -> None:
        devices = data_shards()
        rows = padded_rows(len(batch), devices)
        rows_per_device = rows // devices
        tokens = np.zeros((rows, length), np.int32)
        positions = np.zeros((rows, length), np.int32)
        groups = np.full((rows, length), -1, np.int32)
        segments = np.zeros((rows, length), np.int32)
        capacity = -(-rows_per_device * length // HEAD_CHUNK) * HEAD_CHUNK  # the head takes HEAD_CHUNK at a time
        where = np.zeros((devices, capacity), np.int32)
        targets = np.zeros((devices, capacity), np.int32)
        count = np.zeros(devices, np.int32)
        owners = [[] for _ in range(devices)]
        for b, line in enumerate(batch):
            arrays = _line_arrays(line)
            n = len(arrays.tokens)
            tokens[b, :n], positions[b, :n] = arrays.tokens, arrays.positions
            groups[b, :n], segments[b, :n] = arrays.groups, arrays.segments
            d, local = divmod(b, rows_per_device)
            k, m = count[d], len(arrays.pred)
            where[d, k: k + m] = np.asarray(arrays.pred) + local * length  # position in the device's flattened lines
            targets[d, k: k + m] = arrays.targets
            owners[d] += arrays.owners
            count[d] += m
        self.stats.lines += len(batch)
        self.stats.questions += sum(map(len, batch))
        self.stats.tokens_computed += sum(r.length for line in batch for r in line)
        self.stats.tokens_padded += rows * length
        arrays = shard_batch(tokens, positions, groups, segments, where, targets, count)
        if prefix is None:
            self.stats.compiles.see("score", rows, length)
            token_logp, greedy = score_lines(self.params, *arrays, config=self.model.config, dtype=self.model.dtype)
        else:
            self.stats.compiles.see("score-after-prefix", rows, length, prefix_slots(prefix))
            token_logp, greedy = score_lines_after_prefix(self.params, prefix, *arrays, config=self.model.config,
                                                          dtype=self.model.dtype)
        token_logp, greedy = np.asarray(token_logp), np.asarray(greedy)
        for d in range(devices):
            np.add.at(logprob, owners[d], token_logp[d, :count[d]])
            np.add.at(not_greedy, owners[d], ~greedy[d, :count[d]])
