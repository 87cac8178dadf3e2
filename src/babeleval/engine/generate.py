"""Greedy generation with a KV cache: one jitted program per (batch, prompt bucket,
new-token bucket) runs the prefill and a lax.while_loop of single-token decode steps.

Prompts are left-padded (every row's last prompt token sits at the same index), the cache
holds prompt + new tokens, and a row is done at EOS, at a token whose text contains a stop
string, or after max_new_tokens; the loop ends when every row is done. Stop strings are
then cut on the host exactly (a stop spanning two tokens is found there).
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..models import Decoder, build_module
from ..models.decoder import empty_cache
from .buckets import CompileCounter, batch_size_for, length_bucket, next_pow2, padded_rows
from .devices import num_devices, replicate, shard_batch
from .requests import Generate


@partial(jax.jit, static_argnames=("config", "dtype", "max_new"))
def greedy_decode(params, tokens, valid, stop_ids, limit, config, dtype, max_new):
    """tokens, valid: [B, P] left-padded prompts. Returns [B, max_new] new tokens, -1 after a row
    stopped; at most `limit` (<= max_new, the cache size) are generated."""
    module = build_module(config, dtype)
    apply = lambda *a, **k: module.apply({"params": params}, *a, **k)
    b, p = tokens.shape
    s = p + max_new
    positions = jnp.maximum(jnp.cumsum(valid, axis=1) - 1, 0)
    lengths = valid.sum(axis=1)
    kv_positions = jnp.concatenate([positions, lengths[:, None] + jnp.arange(max_new)[None]], axis=1)
    slots = jnp.concatenate([valid, jnp.zeros((b, max_new), bool)], axis=1)
    causal = jnp.arange(p)[:, None] >= jnp.arange(s)[None, :]
    diagonal = jnp.arange(p)[:, None] == jnp.arange(s)[None, :]  # padding rows attend to themselves
    mask = causal[None] & slots[:, None, :] | diagonal[None]
    hidden, cache = apply(tokens, positions, mask, cache=empty_cache(config, b, s, dtype), cache_index=0,
                          kv_positions=kv_positions)
    first = jnp.argmax(apply(hidden[:, -1:], method=Decoder.logits)[:, 0], axis=-1).astype(jnp.int32)

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
        token = jnp.argmax(apply(hidden, method=Decoder.logits)[:, 0], axis=-1).astype(jnp.int32)
        return step + 1, token, cache, slots, done, out

    state = (jnp.int32(0), first, cache, slots, jnp.zeros(b, bool), jnp.full((b, max_new), -1, jnp.int32))
    return jax.lax.while_loop(cond, body, state)[-1]


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


def cut_at_stop(text: str, stops) -> str:
    ends = [text.find(s) for s in stops if s and s in text]
    return text[:min(ends)] if ends else text


@dataclass
class GenerationStats:
    requests: int = 0
    new_tokens: int = 0
    prompt_tokens: int = 0
    seconds: float = 0.0
    compiles: CompileCounter = None

    def __post_init__(self):
        self.compiles = self.compiles or CompileCounter()


class Generator:
    def __init__(self, model, max_length: int | None = None, token_budget: int = 8192, batch_size: int | None = None):
        self.model = model
        self.max_length = min(max_length or 2048, model.config.max_positions)
        self.token_budget = token_budget
        self.batch_size = batch_size
        self.params = replicate(model.params)
        self.stats = GenerationStats()

    def prompt_tokens(self, context: str, max_new: int) -> list[int]:
        """Prefix (BOS) + the context's tokens, left-truncated to leave room for max_new tokens."""
        tok = self.model.tokenizer
        ids = tok.encode(context)
        keep = self.max_length - max_new - len(tok.prefix)
        return tok.prefix + ids[max(0, len(ids) - keep):]

    def generate(self, requests: list[Generate], progress=None) -> list[str]:
        """Greedy continuations, in request order (requests with different stops/max_new_tokens batch apart)."""
        start = time.time()
        out = [""] * len(requests)
        groups: dict[tuple, list[int]] = {}
        for i in range(len(requests)):
            groups.setdefault((requests[i].stop, requests[i].max_new_tokens), []).append(i)
        for (stops, max_new), members in groups.items():
            self._generate_group(requests, members, stops, max_new, out, progress)
        self.stats.requests += len(requests)
        self.stats.seconds += time.time() - start
        return out

    def _generate_group(self, requests, members, stops, max_new, out, progress):
        tok = self.model.tokenizer
        prompts = {i: self.prompt_tokens(requests[i].context, max_new) for i in members}
        order = sorted(members, key=lambda i: -len(prompts[i]))
        new_bucket = next_pow2(max_new, 8)
        stop_ids = np.asarray(stop_token_ids(tok, tuple(stops)) or (-1,), np.int32)
        stop_ids = np.pad(stop_ids, (0, next_pow2(len(stop_ids)) - len(stop_ids)), constant_values=-1)
        i = 0
        while i < len(order):
            length = length_bucket(len(prompts[order[i]]))
            size = self.batch_size or batch_size_for(length + new_bucket, self.token_budget, num_devices())
            batch = order[i:i + size]
            rows = padded_rows(len(batch), num_devices())
            tokens = np.zeros((rows, length), np.int32)
            valid = np.zeros((rows, length), bool)
            for r, j in enumerate(batch):
                tokens[r, length - len(prompts[j]):] = prompts[j]
                valid[r, length - len(prompts[j]):] = True
            self.stats.compiles.see("generate", rows, length, new_bucket, len(stop_ids))
            new = np.asarray(greedy_decode(self.params, *shard_batch(tokens, valid), jnp.asarray(stop_ids), max_new,
                                           config=self.model.config, dtype=self.model.dtype, max_new=new_bucket))
            for r, j in enumerate(batch):
                ids = [t for t in new[r, :max_new].tolist() if t >= 0]
                if tok.eos_id in ids:
                    ids = ids[:ids.index(tok.eos_id)]
                out[j] = cut_at_stop(tok.decode(ids), stops)
                self.stats.new_tokens += len(ids)
                self.stats.prompt_tokens += len(prompts[j])
            i += len(batch)
            if progress:
                progress(len(batch))
