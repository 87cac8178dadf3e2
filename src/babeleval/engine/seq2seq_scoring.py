"""Log-likelihood scoring for encoder-decoder models (T5, mT5, mT0, umT5, NLLB), by
lm-evaluation-harness's seq2seq rules, with each distinct context encoded once.

lm-eval's HF backend (backend="seq2seq") gives the encoder the context (with the tokenizer's
special tokens: T5's closing </s>, cut on the left to max_length) and scores the continuation
(without special tokens) in the decoder after decoder_start_token_id, once per request: a
question's options each pay for its context again. Here a question is its context plus its
options laid out as decoder rows (engine/radix.py: a trie after the start token, so options
that share their first tokens compute them once). Questions are packed several to a line,
longest context first: an encoder line holds their contexts back to back (each attends to its
own only, positions restarting), the decoder line their option rows, each of which
cross-attends to its own context's segment only. The encoder runs once per line: once per
distinct context.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..models import EncoderDecoder, build_module
from ..placement.devices import data_shards, per_device, shard_batch, split_for_process, sum_over_processes, using
from ..requests import Loglikelihood, LoglikelihoodResult
from ..runlog import warn_once
from .buckets import batch_size_for, length_bucket, padded_rows
from .head import score_positions
from .placed import PlacedEngine
from .radix import LineArrays, Row, radix_rows
from .scoring import ScoringStats, add_entries, arrange, fill_lines, head_entries, tree_mask, unique_pairs
from .tokenize import seq2seq_pairs


@dataclass
class Question:
    """One distinct context and its options as decoder rows (start token, then each continuation)."""

    context: list[int]
    rows: list[Row]

    @property
    def length(self) -> int:  # what fill_lines packs by: the encoder's tokens
        return len(self.context)

    @property
    def decoder_length(self) -> int:
        return sum(row.length for row in self.rows)


def questions(pairs: list[tuple[list[int], list[int]]], start: int, max_length: int) -> list[Question]:
    """The requests (unique at token level, contexts and continuations within max_length)
    grouped by context, in first-seen order; requests without a continuation score nothing."""
    by_context: dict[tuple, list[int]] = {}
    for i, (context, continuation) in enumerate(pairs):
        if continuation:
            by_context.setdefault(tuple(context), []).append(i)
    return [Question(list(context), radix_rows([([start], pairs[i][1]) for i in members], max_length, members))
            for context, members in by_context.items()]


def _score_on_device(params, enc_tokens, enc_positions, enc_segments, tokens, positions, ends, segments, where,
                     targets, count, config, dtype):
    module = build_module(config, dtype)
    apply = lambda *args, method: module.apply({"params": params}, *args, method=method)
    own_context = enc_segments[:, :, None] == enc_segments[:, None, :]
    encoded = apply(enc_tokens, enc_positions, own_context, method=EncoderDecoder.encode)
    cross = apply(encoded, method=EncoderDecoder.cross_keys_values)
    cross_mask = (segments[:, :, None] == enc_segments[:, None, :]) & (segments >= 0)[:, :, None]
    hidden, _ = apply(tokens, positions, tree_mask(ends), cross, cross_mask, method=EncoderDecoder.decode)
    logprob, greedy = score_positions(module, params, hidden.reshape(-1, hidden.shape[-1]), where[0], targets[0],
                                      count[0])
    return logprob[None], greedy[None]


@partial(jax.jit, static_argnames=("config", "dtype"))
def score_seq2seq_lines(params, enc_tokens, enc_positions, enc_segments, tokens, positions, ends, segments, where,
                        targets, count, config, dtype=jnp.float32):
    """Encoder lines [R, S] (tokens, positions, the question each token belongs to: -1 for
    padding) and their decoder lines [R, T] (tokens, positions, subtree ends, question), split
    by rows over the devices; where, targets: [devices, C] as engine/scoring.score_lines."""
    local = partial(_score_on_device, config=config, dtype=dtype)
    return per_device(local)(params, enc_tokens, enc_positions, enc_segments, tokens, positions, ends, segments, where,
                             targets, count)


class Seq2SeqScorer(PlacedEngine):
    def __init__(self, model, max_length: int | None = None, token_budget: int = 4096, batch_size: int | None = None,
                 mesh=None, **unused):
        """max_length: the longest context the encoder reads (and continuation the decoder
        scores), the model's own limit by default, as lm-eval's HF backend."""
        super().__init__(model, max_length, token_budget, batch_size, mesh, cache_tokens=token_budget)
        self.stats = ScoringStats()

    def loglikelihood(self, requests: list[Loglikelihood], progress=None) -> list[LoglikelihoodResult]:
        start = time.time()
        pairs = seq2seq_pairs(self.model.tokenizer, [(r.context, r.continuation) for r in requests])
        self.stats.seconds += time.time() - start
        return self.loglikelihood_tokens(pairs, progress)

    def loglikelihood_tokens(self, pairs: list[tuple[list[int], list[int]]], progress=None) -> list[LoglikelihoodResult]:
        """(encoder tokens, continuation tokens) per request, each cut to its last max_length tokens."""
        with using(self.mesh):
            return self._loglikelihood_tokens(pairs, progress)

    def _loglikelihood_tokens(self, pairs, progress=None) -> list[LoglikelihoodResult]:
        start = time.time()
        cut = sum(1 for c, k in pairs if len(c) > self.max_length or len(k) > self.max_length)
        if cut:
            self.stats.truncated += cut
            warn_once(self, "truncated", f"{cut} of {len(pairs)} scoring requests have a context longer than "
                      f"{self.max_length} tokens (the model's limit): cut from the left; results.json counts them")
        unique, first = unique_pairs([(c[-self.max_length:], k[-self.max_length:]) for c, k in pairs])
        logprob = np.zeros(len(unique), np.float64)
        not_greedy = np.zeros(len(unique), np.int64)
        asked = questions(unique, self.model.config.decoder_start_token_id, self.max_length)
        asked = [asked[i] for i in split_for_process(len(asked))]
        for enc_length, dec_length, batch in self._batches(fill_lines(asked, self.max_length)):
            self._run(batch, enc_length, dec_length, logprob, not_greedy)
            requests = [m for line in batch for q in line for row in q.rows for m in row.members]
            self.stats.tokens_alone += sum(len(unique[m.owner][0]) + len(m.inputs) for m in requests)
            if progress:
                progress(len(requests))
        logprob, not_greedy = sum_over_processes(logprob)[first], sum_over_processes(not_greedy)[first]
        self.stats.tokens_shared = self.stats.tokens_alone - self.stats.tokens_computed
        self.stats.requests += len(pairs)
        self.stats.duplicates += len(pairs) - len(unique)
        self.stats.seconds += time.time() - start
        return [LoglikelihoodResult(float(lp), bool(ng == 0), len(cont))
                for lp, ng, (_, cont) in zip(logprob, not_greedy, pairs)]

    def _batches(self, lines: list[tuple[int, list[Question]]]):
        """(encoder length, decoder length, lines): lines of one encoder length, most decoder
        tokens first, as many as the token budget allows at both lengths."""
        by_length: dict[int, list[list[Question]]] = {}
        for length, line in lines:
            by_length.setdefault(length, []).append(line)
        for enc_length in sorted(by_length, reverse=True):
            group = sorted(by_length[enc_length], key=lambda line: -sum(q.decoder_length for q in line))
            while group:
                dec_length = length_bucket(sum(q.decoder_length for q in group[0]), 16)
                size = self.batch_size or batch_size_for(enc_length + dec_length, self.token_budget, data_shards())
                yield enc_length, dec_length, group[:size]
                group = group[size:]

    def _run(self, batch: list[list[Question]], enc_length: int, dec_length: int, logprob, not_greedy) -> None:
        devices = data_shards()
        rows = padded_rows(len(batch), devices)
        enc = np.zeros((3, rows, enc_length), np.int32)  # tokens, positions, question (-1: padding)
        dec = np.zeros((4, rows, dec_length), np.int32)  # tokens, positions, subtree ends, question
        enc[2], dec[3] = -1, -1
        lines, spans = [], []  # per line: its decoder arrays, and each question's span of them
        for line in batch:
            arrays, span = LineArrays(), []
            for question in line:
                before = len(arrays.tokens)
                for row in question.rows:
                    arrays.add_row(row)
                span.append((before, len(arrays.tokens)))
            lines.append(arrays)
            spans.append(span)
        rows_of = arrange([len(a.pred) for a in lines], devices, rows // devices)
        for b, line, arrays, span in zip(rows_of, batch, lines, spans):
            at = 0
            for q, (question, (start, end)) in enumerate(zip(line, span)):
                n = len(question.context)
                enc[0, b, at: at + n], enc[1, b, at: at + n], enc[2, b, at: at + n] = question.context, np.arange(n), q
                dec[3, b, start: end] = q
                at += n
            n = len(arrays.tokens)
            dec[0, b, :n], dec[1, b, :n], dec[2, b, :n] = arrays.tokens, arrays.positions, arrays.ends
        where, targets, count, entries = head_entries(lines, rows_of, dec_length, devices, rows // devices)
        self.stats.lines += len(batch)
        self.stats.questions += sum(map(len, batch))
        self.stats.contexts_encoded += sum(map(len, batch))
        self.stats.tokens_computed += sum(q.length + q.decoder_length for line in batch for q in line)
        self.stats.tokens_padded += rows * (enc_length + dec_length)
        self.stats.compiles.see("score-seq2seq", rows, enc_length, dec_length, where.shape[1])
        token_logp, greedy = score_seq2seq_lines(self.params, *shard_batch(*enc, *dec, where, targets, count),
                                                 config=self.model.config, dtype=self.model.dtype)
        add_entries(token_logp, greedy, entries, logprob, not_greedy)
