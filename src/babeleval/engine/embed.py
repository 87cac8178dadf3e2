"""Sentence embeddings for batches of Embed requests, returned in request order.

Encoders (BERT, XLM-R) run with their special tokens and their own pooling (cls, mean
or pooler; L2 norm when the model's sentence-transformers config says so). Decoders
offer mean pooling of the final-normed last hidden state over the real tokens, encoder-decoders
(mT5, mT0, NLLB) the mean of their encoder's final-normed states, special tokens included. Texts
are sorted by length and padded to length buckets, batch size from a token budget."""
from __future__ import annotations

import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..models import EncoderDecoder, build_module
from ..models.config import EncoderConfig
from ..models.encoder import pool
from ..models.seq2seq import encoder_inputs
from .buckets import CompileCounter, length_batches, padded_rows
from .compile_cache import default_compilation_cache
from ..placement.devices import data_shards, shard_batch, using
from ..placement.sharding import place_model
from .forward import encoder_forward, padded_causal
from ..requests import Embed


@partial(jax.jit, static_argnames=("config", "dtype"))
def decoder_mean_pooled(params, tokens, attention_mask, config, dtype=jnp.float32):
    module = build_module(config, dtype)
    positions, mask = padded_causal(attention_mask)
    hidden, _ = module.apply({"params": params}, tokens, positions, mask)
    return pool(hidden, attention_mask.astype(bool), "mean", False)


@partial(jax.jit, static_argnames=("config", "dtype"))
def encoder_mean_pooled(params, tokens, attention_mask, config, dtype=jnp.float32):
    """An encoder-decoder's encoder states, mean-pooled over the real tokens."""
    valid = attention_mask.astype(bool)
    hidden = build_module(config, dtype).apply({"params": params}, tokens, *encoder_inputs(valid),
                                               method=EncoderDecoder.encode)
    return pool(hidden, valid, "mean", False)


class Embedder:
    def __init__(self, model, max_length: int = 512, token_budget: int = 8192, batch_size: int | None = None,
                 normalize: bool | None = None, mesh=None):
        self.model = model
        self.encoder = isinstance(model.config, EncoderConfig)
        self.max_length = min(max_length, model.config.max_positions)
        self.token_budget = token_budget
        self.batch_size = batch_size
        self.normalize = model.config.normalize if normalize is None and self.encoder else bool(normalize)
        default_compilation_cache()
        self.mesh, self.params, self.placement = place_model(model, mesh)
        self.compiles = CompileCounter()
        self.seconds = 0.0

    def tokens(self, texts: list[str]) -> list[list[int]]:
        """Token ids with the model's special tokens, truncated to max_length (an encoder keeps its
        final [SEP], an encoder-decoder its EOS)."""
        tok = self.model.tokenizer
        if self.encoder or self.model.config.kind == "seq2seq":
            rows = tok.encode_batch(texts, special_tokens=True)
            return [r if len(r) <= self.max_length else r[:self.max_length - 1] + r[-1:] for r in rows]
        return [(tok.prefix + r)[:self.max_length] for r in tok.encode_batch(texts)]

    def embed(self, requests: list[Embed], progress=None) -> np.ndarray:
        """One vector per request, in order; batches split along the mesh's data axis, the
        weights along its model axis (mesh: 'auto', 'data=D,model=M' or (D, M))."""
        with using(self.mesh):
            return self._embed(requests, progress)

    def _embed(self, requests: list[Embed], progress=None) -> np.ndarray:
        start = time.time()
        rows = self.tokens([r.prefix + r.text for r in requests])
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
        out = None
        for length, first, stop in length_batches([len(rows[j]) for j in order], self.token_budget, data_shards(),
                                                  batch_size=self.batch_size, minimum=8):
            batch = order[first:stop]
            vectors = self._run([rows[j] for j in batch], length)
            if out is None:
                out = np.zeros((len(rows), vectors.shape[1]), np.float32)
            out[batch] = vectors[:len(batch)]
            if progress:
                progress(len(batch))
        self.seconds += time.time() - start
        return out if out is not None else np.zeros((0, self.model.config.hidden_size), np.float32)

    def _run(self, rows: list[list[int]], length: int) -> np.ndarray:
        n = padded_rows(len(rows), data_shards())
        tokens = np.zeros((n, length), np.int32)
        mask = np.zeros((n, length), np.int32)
        for b, row in enumerate(rows):
            tokens[b, :len(row)], mask[b, :len(row)] = row, 1
        mask[len(rows):, 0] = 1  # padding rows: one token, so the mean is defined
        self.compiles.see("embed", n, length)
        tokens, mask = shard_batch(tokens, mask)
        cfg, dtype = self.model.config, self.model.dtype
        if self.encoder:
            pooled = np.asarray(encoder_forward(self.params, tokens, mask, cfg, dtype)[1], np.float32)
        elif cfg.kind == "seq2seq":
            pooled = np.asarray(encoder_mean_pooled(self.params, tokens, mask, cfg, dtype), np.float32)
        else:
            pooled = np.asarray(decoder_mean_pooled(self.params, tokens, mask, cfg, dtype), np.float32)
        if self.normalize:
            pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)
        return pooled
