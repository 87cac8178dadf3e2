"""Log-likelihood scoring of answer options in packed, shared-context rows.

A question's options share one row: context tokens once, then every option, each
option attending to the context and to itself only (a block mask; positions restart
after the context). The context is therefore computed once per question, and the
vocabulary projection + log-softmax run only at the positions that predict an option
token. Rows are then packed, longest first, several to a line of one bucket length
(a question attends only to its own tokens), so short questions cost little padding.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..models import Decoder, build_module
from .buckets import CompileCounter, batch_size_for, length_bucket, padded_rows
from .devices import num_devices, replicate, shard_batch, split_for_process, sum_over_processes
from .requests import Loglikelihood, LoglikelihoodResult
from .tokenize import split_pairs


MIN_LINE = 128  # shortest line: short questions are packed several to a line


@partial(jax.jit, static_argnames=("config", "dtype"))
def score_rows(params, tokens, positions, groups, segments, pred_idx, targets, config, dtype=jnp.float32):
    """Per scored position: log-prob of the target token and whether it was the arg-max.
    groups: which question of the line a token belongs to (-1: padding); segments: 0 for
    the question's context, k for its k-th option."""
    module = build_module(config, dtype)
    idx = jnp.arange(tokens.shape[1])
    valid = groups >= 0
    same_question = groups[:, None, :] == groups[:, :, None]
    same_block = (segments[:, None, :] == 0) | (segments[:, None, :] == segments[:, :, None])
    mask = (idx[:, None] >= idx[None, :])[None] & same_question & same_block & valid[:, None, :] & valid[:, :, None]
    mask = mask | jnp.eye(tokens.shape[1], dtype=bool)[None]
    hidden, _ = module.apply({"params": params}, tokens, positions, mask)
    picked = jnp.take_along_axis(hidden, pred_idx[..., None], axis=1)
    logits = module.apply({"params": params}, picked, method=Decoder.logits)
    logp = jax.nn.log_softmax(logits, axis=-1)
    token_logp = jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    return token_logp, jnp.argmax(logits, axis=-1) == targets


@dataclass
class Row:
    """One packed row: a context and the continuations that share it."""

    context: list[int]
    options: list[tuple[int, list[int]]] = field(default_factory=list)

    @property
    def length(self) -> int:
        return len(self.context) + sum(len(o) for _, o in self.options)

    @property
    def scored(self) -> int:
        return sum(len(o) for _, o in self.options)


@dataclass
class ScoringStats:
    requests: int = 0
    questions: int = 0  # packed rows: one context and the options that share it
    lines: int = 0  # model rows run, each holding one or more questions
    tokens_computed: int = 0  # real (unpadded) tokens run through the model
    tokens_padded: int = 0  # tokens in the padded batches
    seconds: float = 0.0
    compiles: CompileCounter = field(default_factory=CompileCounter)


def pack_rows(pairs: list[tuple[list[int], list[int]]], max_length: int) -> list[Row]:
    """Group requests by identical context tokens; split a group when its row would exceed max_length."""
    by_context: dict[tuple, list[Row]] = {}
    for index, (context, continuation) in enumerate(pairs):
        if not continuation:
            continue
        continuation = continuation[-max_length:]
        context = context[-max(1, max_length - len(continuation)):]
        rows = by_context.setdefault(tuple(context), [Row(list(context))])
        if rows[-1].options and rows[-1].length + len(continuation) > max_length:
            rows.append(Row(list(context)))
        rows[-1].options.append((index, continuation))
    return [row for rows in by_context.values() for row in rows]


def fill_lines(rows: list[Row], length: int) -> list[list[Row]]:
    """First-fit decreasing: several questions share one line of `length` tokens (each
    attends only to itself), so short questions do not each pay a padded row."""
    lines: list[list[Row]] = []
    free: list[int] = []
    for row in sorted(rows, key=lambda r: -r.length):
        for i, room in enumerate(free):
            if row.length <= room:
                lines[i].append(row)
                free[i] -= row.length
                break
        else:
            lines.append([row])
            free.append(length - row.length)
    return lines


def _line_arrays(line: list[Row]):
    """The rows of a line back to back: tokens, positions, groups, segments, pred, targets, owners."""
    out = [[] for _ in range(7)]
    for group, row in enumerate(line):
        tokens, positions, segments, pred, targets, owners = _row_arrays(row)
        offset = len(out[0])
        for column, values in zip(out, (tokens, positions, [group] * len(tokens), segments,
                                         [p + offset for p in pred], targets, owners)):
            column += values
    return out


def _row_arrays(row: Row):
    tokens, positions, segments = list(row.context), list(range(len(row.context))), [0] * len(row.context)
    pred, targets, owners = [], [], []
    for block, (owner, option) in enumerate(row.options, start=1):
        start = len(tokens)
        tokens += option
        positions += range(len(row.context), len(row.context) + len(option))
        segments += [block] * len(option)
        pred += [len(row.context) - 1] + list(range(start, start + len(option) - 1))
        targets += option
        owners += [owner] * len(option)
    return tokens, positions, segments, pred, targets, owners


class Scorer:
    def __init__(self, model, max_length: int | None = None, token_budget: int = 4096, batch_size: int | None = None):
        self.model = model
        self.max_length = min(max_length or 2048, model.config.max_positions)
        self.token_budget = token_budget
        self.batch_size = batch_size
        self.params = replicate(model.params)
        self.stats = ScoringStats()

    def loglikelihood(self, requests: list[Loglikelihood], progress=None) -> list[LoglikelihoodResult]:
        start = time.time()
        pairs = split_pairs(self.model.tokenizer, [(r.context, r.continuation) for r in requests])
        rows = pack_rows(pairs, self.max_length)
        rows = [rows[i] for i in split_for_process(len(rows))]
        logprob = np.zeros(len(requests), np.float64)
        not_greedy = np.zeros(len(requests), np.int64)
        if rows:
            length = min(max(length_bucket(max(r.length for r in rows)), MIN_LINE), self.max_length)
            lines = fill_lines(rows, length)
            size = self.batch_size or batch_size_for(length, self.token_budget, num_devices())
            for i in range(0, len(lines), size):
                batch = lines[i: i + size]
                self._run(batch, length, logprob, not_greedy)
                if progress:
                    progress(sum(len(r.options) for line in batch for r in line))
        logprob, not_greedy = sum_over_processes(logprob), sum_over_processes(not_greedy)
        self.stats.requests += len(requests)
        self.stats.seconds += time.time() - start
        return [LoglikelihoodResult(float(lp), bool(ng == 0), len(cont))
                for lp, ng, (_, cont) in zip(logprob, not_greedy, pairs)]

    def _run(self, batch: list[list[Row]], length: int, logprob: np.ndarray, not_greedy: np.ndarray) -> None:
        arrays = [_line_arrays(line) for line in batch]
        rows = padded_rows(len(batch), num_devices())
        scored = length_bucket(max(len(a[4]) for a in arrays), 8)
        tokens = np.zeros((rows, length), np.int32)
        positions = np.zeros((rows, length), np.int32)
        groups = np.full((rows, length), -1, np.int32)
        segments = np.zeros((rows, length), np.int32)
        pred = np.zeros((rows, scored), np.int32)
        targets = np.zeros((rows, scored), np.int32)
        for b, (tok, pos, grp, seg, prd, tgt, _) in enumerate(arrays):
            n = len(tok)
            tokens[b, :n], positions[b, :n], groups[b, :n], segments[b, :n] = tok, pos, grp, seg
            pred[b, :len(prd)], targets[b, :len(tgt)] = prd, tgt
        self.stats.compiles.see("score", rows, length, scored)
        self.stats.lines += len(batch)
        self.stats.questions += sum(map(len, batch))
        self.stats.tokens_computed += sum(r.length for line in batch for r in line)
        self.stats.tokens_padded += rows * length
        token_logp, greedy = score_rows(self.params, *shard_batch(tokens, positions, groups, segments, pred, targets),
                                        config=self.model.config, dtype=self.model.dtype)
        token_logp, greedy = np.asarray(token_logp), np.asarray(greedy)
        for b, (*_, owners) in enumerate(arrays):
            n = len(owners)
            np.add.at(logprob, owners, token_logp[b, :n])
            np.add.at(not_greedy, owners, ~greedy[b, :n])
