"""Log-likelihood scoring of answer options in packed rows that share token prefixes.

Requests sharing a token prefix share one row (engine/radix.py): a question's options its
context, xnli-style options their premise, each token attending to its own prefix only (a
tree mask; positions restart after the shared part). Shared tokens are therefore computed once,
and the vocabulary projection + log-softmax run only at the positions that predict a
continuation token (engine/head.py). Rows are then packed, longest first, several to a line
(a row attends only to its own tokens). A line is as short as its longest row
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
from ..placement.devices import data_shards, per_device, shard_batch, split_for_process, sum_over_processes, using
from .head import HEAD_CHUNK, score_positions
from .placed import PlacedEngine
from .radix import LineArrays, Row, radix_rows
from .prefix import attention_inputs, computed_prefixes, prefix_groups, prefix_slots
from ..requests import Loglikelihood, LoglikelihoodResult
from .tokenize import split_pairs


MIN_LINE = 128  # shortest line: shorter questions are packed several to a line


def tree_mask(ends):
    """[B, T, T]: query j sees key i iff i <= j < ends[i] (i is j or an ancestor in its row's trie,
    engine/radix.py); padding (ends 0) sees only itself."""
    idx = jnp.arange(ends.shape[1])
    mask = (idx[:, None] >= idx[None, :])[None] & (idx[None, :, None] < ends[:, None, :])
    return mask | jnp.eye(ends.shape[1], dtype=bool)[None]


def _score_on_device(params, prefix, tokens, positions, ends, where, targets, count, config, dtype):
    """One device's lines, standing alone (prefix None) or continuing a cached prefix."""
    module = build_module(config, dtype)
    inputs = attention_inputs(prefix, positions, tree_mask(ends), ends > 0)
    hidden, _ = module.apply({"params": params}, tokens, **inputs)
    logprob, greedy = score_positions(module, params, hidden.reshape(-1, hidden.shape[-1]), where[0], targets[0], count[0])
    return logprob[None], greedy[None]


@partial(jax.jit, static_argnames=("config", "dtype"))
def score_lines(params, tokens, positions, ends, where, targets, count, config, dtype=jnp.float32):
    """tokens, positions, ends: [R, L], split by rows over the devices;
    where, targets: [devices, C]: scored positions in the device's flattened lines and the
    token each should predict; count: [devices] real entries. Returns (log-prob, greedy), [devices, C]."""
    local = partial(_score_on_device, config=config, dtype=dtype)
    return per_device(lambda params, *lines: local(params, None, *lines))(params, tokens, positions, ends, where,
                                                                            targets, count)


@partial(jax.jit, static_argnames=("config", "dtype"))
def score_lines_after_prefix(params, prefix, tokens, positions, ends, where, targets, count, config,
                             dtype=jnp.float32):
    """score_lines for lines that continue one cached prefix (per layer k, v [1, Hkv, P, D])."""
    local = partial(_score_on_device, config=config, dtype=dtype)
    return per_device(local, replicated=2)(params, prefix, tokens, positions, ends, where, targets, count)


@dataclass
class ScoringStats:
    requests: int = 0
    questions: int = 0  # packed rows: requests sharing token prefixes (engine/radix.py)
    lines: int = 0  # model rows run, each holding one or more questions
    tokens_alone: int = 0  # what a no-sharing engine computes: every distinct request's inputs on their own
    tokens_computed: int = 0  # real (unpadded) tokens run through the model
    tokens_shared: int = 0  # request tokens a row did not compute again (an earlier member of the row had them)
    tokens_padded: int = 0  # tokens in the padded batches
    truncated: int = 0  # requests longer than max_length: context cut from the left
    contexts_encoded: int = 0  # encoder-decoders: contexts run through the encoder (once each, engine/seq2seq_scoring.py)
    duplicates: int = 0  # requests identical at token level to an earlier one of the call: not computed again
    prefixes: int = 0  # shared prefixes computed once (engine/prefix.py)
    prefix_tokens: int = 0  # their tokens (counted in tokens_computed once each)
    prefix_tokens_reused: int = 0  # prefix tokens requests did not compute again
    # tokens_alone == tokens_computed - prefix_tokens + prefix_tokens_reused + tokens_shared
    seconds: float = 0.0
    compiles: CompileCounter = field(default_factory=CompileCounter)


def fit(context: list[int], continuation: list[int], max_length: int) -> tuple[list[int], list[int]]:
    """A request cut to max_length + 1 tokens from the left (the model reads max_length: the last
    token is only a target; the context goes first and at least one of its tokens stays)."""
    continuation = continuation[-max_length:]
    return context[-max(1, max_length + 1 - len(continuation)):], continuation


def unique_pairs(pairs: list[tuple[list[int], list[int]]]):
    """Requests identical at token level are computed once: the unique pairs, and for every
    request the index of its unique pair (mutual-information requests repeat each option's
    unconditional form for every question; tasks built elsewhere repeat whole requests)."""
    index: dict[tuple, int] = {}
    first = np.array([index.setdefault((tuple(c), tuple(k)), len(index)) for c, k in pairs], np.int64)
    return [(list(c), list(k)) for c, k in index], first


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


class Scorer(PlacedEngine):
    def __init__(self, model, max_length: int | None = None, token_budget: int = 4096, batch_size: int | None = None,
                 share_prefixes: bool = True, mesh=None):
        """max_length: the model's own limit by default (as lm-eval's HF backend); share_prefixes:
        compute long prefixes that many contexts share once (engine/prefix.py); mesh: 'auto',
        'data=D,model=M' or (D, M) (placement/devices.py, placement/sharding.py)."""
        super().__init__(model, max_length, token_budget, batch_size, mesh, cache_tokens=token_budget)
        self.share_prefixes = share_prefixes
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
        cut = sum(1 for c, k in pairs if k and len(c) + len(k) > self.max_length + 1)
        if cut:
            self.stats.truncated += cut
            warn_once(self, "truncated", f"{cut} of {len(pairs)} scoring requests are longer than {self.max_length} tokens "
                      "(the model's limit) and a target: their contexts are cut from the left; results.json counts them "
                      "(engine.scoring.truncated, and per task)")
        unique, first = unique_pairs([fit(c, k, self.max_length) for c, k in pairs])
        logprob = np.zeros(len(unique), np.float64)
        not_greedy = np.zeros(len(unique), np.int64)
        groups = prefix_groups([c for c, _ in unique], self.share_prefixes)
        for prefix, members, cache in computed_prefixes(self.params, groups, self.model, self.stats):
            self.stats.tokens_computed += len(prefix)
            suffixes = [(unique[i][0][len(prefix):], unique[i][1]) for i in members]
            room = self.max_length - len(prefix)
            rows = radix_rows(suffixes, room, members)
            rows = [rows[i] for i in split_for_process(len(rows))]
            for length, batch in self._batches(fill_lines(rows, room)):
                requests = [m for line in batch for row in line for m in row.members]
                self.stats.prefix_tokens_reused += len(prefix) * len(requests)
                self.stats.tokens_alone += sum(len(prefix) + len(m.inputs) for m in requests)
                self.stats.tokens_shared += sum(m.shared for m in requests)
                self._run(batch, length, logprob, not_greedy, cache)
                if progress:
                    progress(len(requests))
        logprob, not_greedy = sum_over_processes(logprob)[first], sum_over_processes(not_greedy)[first]
        self.stats.requests += len(pairs)
        self.stats.duplicates += len(pairs) - len(unique)
        self.stats.seconds += time.time() - start
        return [LoglikelihoodResult(float(lp), bool(ng == 0), len(cont))
                for lp, ng, (_, cont) in zip(logprob, not_greedy, pairs)]

    def _batches(self, lines: list[tuple[int, list[Row]]]):
        """(length, lines) batches, longest lines first (an out-of-memory shows at once). A
        length's last batch is filled with shorter lines (they fit) up to the rows of its full
        batches, so it runs the program they compiled: a 4-row batch of 384-token lines compiled
        a program of its own (~3 s on CPU, tracing included) where 4 lines of 256 tokens padded
        to 384 cost ~0.6 s. When no shorter lines are left, the tail runs as a few power-of-two
        batches (_split_tail)."""
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
                empty = max(size, padded_rows(len(batch), data_shards())) - len(batch)
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
        ends = np.zeros((rows, length), np.int32)
        lines = [LineArrays.of(line) for line in batch]
        rows_of = arrange([len(a.pred) for a in lines], devices, rows_per_device)
        for b, arrays in zip(rows_of, lines):
            n = len(arrays.tokens)
            tokens[b, :n], positions[b, :n], ends[b, :n] = arrays.tokens, arrays.positions, arrays.ends
        where, targets, count, entries = head_entries(lines, rows_of, length, devices, rows_per_device)
        self.stats.lines += len(batch)
        self.stats.questions += sum(map(len, batch))
        self.stats.tokens_computed += sum(r.length for line in batch for r in line)
        self.stats.tokens_padded += rows * length
        arrays = shard_batch(tokens, positions, ends, where, targets, count)
        if prefix is None:
            self.stats.compiles.see("score", rows, length, where.shape[1])
            token_logp, greedy = score_lines(self.params, *arrays, config=self.model.config, dtype=self.model.dtype)
        else:
            self.stats.compiles.see("score-after-prefix", rows, length, where.shape[1], prefix_slots(prefix))
            token_logp, greedy = score_lines_after_prefix(self.params, prefix, *arrays, config=self.model.config,
                                                          dtype=self.model.dtype)
        add_entries(token_logp, greedy, entries, logprob, not_greedy)


def arrange(scored: list[int], devices: int, rows_per_device: int) -> list[int]:
    """The batch row of each line: lines dealt to the devices, most scored positions first, each
    to the device with the fewest so far that has a row free. Every device loops over its own
    head chunks and the slowest sets the batch's time: a last batch of 9 XCOPA lines in 2 x 8 rows
    ran 977 scored positions on one device and 41 on the other, 8 chunks against 1."""
    load, free, rows = [0] * devices, [rows_per_device] * devices, [0] * len(scored)
    for i in sorted(range(len(scored)), key=lambda i: -scored[i]):
        d = min((d for d in range(devices) if free[d]), key=lambda d: load[d])
        rows[i] = (d + 1) * rows_per_device - free[d]
        free[d] -= 1
        load[d] += scored[i]
    return rows


def head_entries(lines: list[LineArrays], rows_of: list[int], length: int, devices: int, rows_per_device: int):
    """What the head reads for a batch of lines (line k in batch row rows_of[k]): per device, the scored positions in its
    flattened lines and their targets ([devices, capacity]), how many are real, and (entry,
    owner) lists that add each entry to its request (add_entries). The head takes HEAD_CHUNK
    positions at a time; a branching token predicts one target per branch, so a line may score
    more positions than it has tokens: the room starts at twice the tokens, so that batches of
    one shape with and without branching share one program (xnli-style options over a shared
    premise compiled (8, 512) with room 2,048 and again with 4,096); the head runs only the
    chunks that hold positions, so unused room costs no compute."""
    count = np.zeros(devices, np.int32)
    for b, arrays in zip(rows_of, lines):
        count[b // rows_per_device] += len(arrays.pred)
    capacity = 2 * -(-rows_per_device * length // HEAD_CHUNK) * HEAD_CHUNK
    while capacity < count.max():
        capacity *= 2
    where = np.zeros((devices, capacity), np.int32)
    targets = np.zeros((devices, capacity), np.int32)
    entry_of, owner_of = [[] for _ in range(devices)], [[] for _ in range(devices)]
    filled = np.zeros(devices, np.int32)
    for b, arrays in zip(rows_of, lines):
        d, local = divmod(b, rows_per_device)
        k, m = filled[d], len(arrays.pred)
        where[d, k: k + m] = np.asarray(arrays.pred) + local * length  # position in the device's flattened lines
        targets[d, k: k + m] = arrays.targets
        entry_of[d] += [k + e for e in arrays.entry_of]
        owner_of[d] += arrays.owner_of
        filled[d] += m
    return where, targets, count, (entry_of, owner_of)


def add_entries(token_logp, greedy, entries, logprob: np.ndarray, not_greedy: np.ndarray) -> None:
    """Each scored entry's log-prob (and greedy miss) added to its request's sums."""
    token_logp, greedy = np.asarray(token_logp), np.asarray(greedy)
    entry_of, owner_of = entries
    for d in range(len(entry_of)):
        np.add.at(logprob, owner_of[d], token_logp[d, entry_of[d]])
        np.add.at(not_greedy, owner_of[d], ~greedy[d, entry_of[d]])
