"""Log-likelihood scoring of answer options in packed rows that share token prefixes.

Requests sharing a token prefix share one row (engine/radix.py): a question's options its
context, xnli-style options their premise, each token attending to its own prefix only (a
tree mask; positions restart after the shared part). Shared tokens are therefore computed once,
and the vocabulary projection + log-softmax run only at the positions that predict a
continuation token (engine/head.py). Rows are then packed, longest first, several to a line
(a row attends only to its own tokens), every line of a call one length: 512 tokens, or the
longest row's multiple of 128 (line_length). Attention skips the keys of a line's other rows
(models/attention.py), so a short question costs the same in a long line, and a call compiles
one program for its full batches (xnli-style options compiled 5 shapes of 128-512 tokens, ~2 s
each on CPU; an accelerator compiles slower still), which Scorer.compile_ahead can compile
before the requests are known.
"""
from __future__ import annotations

import threading
import time
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


LINE = 512  # the shortest line length: shorter rows are packed several to a line


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


def line_length(rows: list[Row], max_length: int) -> int:
    """One line length for all of a call's rows: LINE, or the longest row's multiple of 128
    above it, at most max_length. Calls of short rows share one compiled shape."""
    longest = max((r.length for r in rows), default=1)
    return min(max(LINE, -(-longest // 128) * 128), max_length)


def fill_lines(rows: list[Row], max_length: int, shortest: int = 128) -> list[tuple[int, list[Row]]]:
    """First-fit decreasing into lines of (length, rows): a row that fits nowhere opens a line
    of the next length bucket >= its length and shortest (128, 192, 256, 384, 512, then
    multiples of 128; at most max_length: a third of a line padded at worst, not half as with
    powers of two); shorter rows fill the room left in open lines before opening lines of
    their own. shortest = max_length: every line that length."""
    lines: list[tuple[int, list[Row]]] = []
    free: list[int] = []
    for row in sorted(rows, key=lambda r: -r.length):
        for i, room in enumerate(free):
            if row.length <= room:
                lines[i][1].append(row)
                free[i] -= row.length
                break
        else:
            length = min(length_bucket(row.length, shortest), max_length)
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
        self._ahead: threading.Thread | None = None

    def compile_ahead(self) -> None:
        """Compile, in a background thread, the program of a call's full batches of LINE-token
        lines (every call whose rows are no longer: line_length), while the caller still builds
        its requests (lm-eval's tasks and prompts): XLA's compiler releases the GIL and takes
        the core that single-threaded Python leaves idle. The call waits for it before its
        first batch, so the program is never compiled twice; a call of longer rows compiles
        its own as before."""
        self._ahead = threading.Thread(target=self._compile, args=(min(LINE, self.max_length),), daemon=True,
                                       name="compile-ahead")
        self._ahead.start()

    def _compile(self, length: int) -> None:
        """score_lines compiled for a full batch of `length`-token lines, on zeros of _run's shapes."""
        try:
            with using(self.mesh):
                devices = data_shards()
                rows = padded_rows(self._batch_size(length), devices)
                lines = [np.zeros((rows, length), np.int32)] * 3
                heads = [np.zeros((devices, head_capacity(rows // devices, length)), np.int32)] * 2
                score_lines.lower(self.params, *shard_batch(*lines, *heads, np.zeros(devices, np.int32)),
                                  config=self.model.config, dtype=self.model.dtype).compile()
        except Exception:  # noqa: BLE001  (the call compiles the program itself and raises what it raises)
            pass

    def _batch_size(self, length: int) -> int:
        """Lines of `length` tokens in a full batch: the batch size given, else as many as the token budget allows."""
        return self.batch_size or batch_size_for(length, self.token_budget, data_shards())

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
            length = line_length(rows, room)
            for batch in self._batches([line for _, line in fill_lines(rows, length, length)], length):
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

    def _batches(self, lines: list[list[Row]], length: int):
        """Batches of lines of one length, as many rows as the token budget allows; the last
        runs as a few power-of-two batches (_split_tail)."""
        size = self._batch_size(length)
        full = len(lines) - len(lines) % size
        yield from (lines[start: start + size] for start in range(0, full, size))
        yield from _split_tail(lines[full:], data_shards())

    def _run(self, batch: list[list[Row]], length: int, logprob: np.ndarray, not_greedy: np.ndarray, prefix=None) -> None:
        if self._ahead is not None:
            self._ahead.join()
            self._ahead = None
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
    capacity = head_capacity(rows_per_device, length)
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


def head_capacity(rows_per_device: int, length: int) -> int:
    """Scored positions a device's head holds room for at first (head_entries): twice its tokens,
    in whole HEAD_CHUNKs."""
    return 2 * -(-rows_per_device * length // HEAD_CHUNK) * HEAD_CHUNK


def add_entries(token_logp, greedy, entries, logprob: np.ndarray, not_greedy: np.ndarray) -> None:
    """Each scored entry's log-prob (and greedy miss) added to its request's sums."""
    token_logp, greedy = np.asarray(token_logp), np.asarray(greedy)
    entry_of, owner_of = entries
    for d in range(len(entry_of)):
        np.add.at(logprob, owner_of[d], token_logp[d, entry_of[d]])
        np.add.at(not_greedy, owner_of[d], ~greedy[d, entry_of[d]])
