"""Log-likelihood scoring of answer options in packed, shared-context rows.

A question's options share one row: context tokens once, then every option, each
option attending to the context and to itself only (a block mask; positions restart
after the context). The context is therefore computed once per question, and the
vocabulary projection + log-softmax run only at the positions that predict an option
token. Rows are sorted longest first and padded to power-of-two buckets.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..models import Decoder, build_module
from .buckets import CompileCounter, batch_size_for, length_bucket, next_pow2
from .devices import num_devices, replicate, shard_batch, split_for_process, sum_over_processes
from .requests import Loglikelihood, LoglikelihoodResult
from .tokenize import split_pairs


@partial(jax.jit, static_argnames=("config", "dtype"))
def score_rows(params, tokens, positions, segments, pred_idx, targets, config, dtype=jnp.float32):
    """Per scored position: log-prob of the target token and whether it was the arg-max."""
    module = build_module(config, dtype)
    idx = jnp.arange(tokens.shape[1])
    valid = segments >= 0
    same_block = (segments[:, None, :] == 0) | (segments[:, None, :] == segments[:, :, None])
    mask = (idx[:, None] >= idx[None, :])[None] & same_block & valid[:, None, :] & valid[:, :, None]
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
    rows: int = 0
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
        rows.sort(key=lambda r: -r.length)
        logprob = np.zeros(len(requests), np.float64)
        not_greedy = np.zeros(len(requests), np.int64)
        i = 0
        while i < len(rows):
            length = length_bucket(rows[i].length)
            size = self.batch_size or batch_size_for(length, self.token_budget, num_devices())
            batch = rows[i: i + size]
            self._run(batch, length, logprob, not_greedy)
            i += len(batch)
            if progress:
                progress(sum(len(r.options) for r in batch))
        logprob, not_greedy = sum_over_processes(logprob), sum_over_processes(not_greedy)
        self.stats.requests += len(requests)
        self.stats.seconds += time.time() - start
        return [LoglikelihoodResult(float(lp), bool(ng == 0), len(cont))
                for lp, ng, (_, cont) in zip(logprob, not_greedy, pairs)]

    def _run(self, batch: list[Row], length: int, logprob: np.ndarray, not_greedy: np.ndarray) -> None:
        arrays = [_row_arrays(r) for r in batch]
        devices = num_devices()
        rows = -(-next_pow2(len(batch)) // devices) * devices  # a multiple of the device count
        scored = next_pow2(max(len(a[3]) for a in arrays), 8)
        tokens = np.zeros((rows, length), np.int32)
        positions = np.zeros((rows, length), np.int32)
        segments = np.full((rows, length), -1, np.int32)
        pred = np.zeros((rows, scored), np.int32)
        targets = np.zeros((rows, scored), np.int32)
        for b, (tok, pos, seg, prd, tgt, _) in enumerate(arrays):
            tokens[b, :len(tok)], positions[b, :len(pos)], segments[b, :len(seg)] = tok, pos, seg
            pred[b, :len(prd)], targets[b, :len(tgt)] = prd, tgt
        self.stats.compiles.see("score", rows, length, scored)
        self.stats.rows += len(batch)
        self.stats.tokens_computed += sum(r.length for r in batch)
        self.stats.tokens_padded += rows * length
        token_logp, greedy = score_rows(self.params, *shard_batch(tokens, positions, segments, pred, targets),
                                        config=self.model.config, dtype=self.model.dtype)
        token_logp, greedy = np.asarray(token_logp), np.asarray(greedy)
        for b, (*_, owners) in enumerate(arrays):
            n = len(owners)
            np.add.at(logprob, owners, token_logp[b, :n])
            np.add.at(not_greedy, owners, ~greedy[b, :n])
