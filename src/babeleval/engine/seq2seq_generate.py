"""Greedy generation for encoder-decoder models, in one jitted program per batch shape: the
encoder runs once over a batch of prompts, every decoder layer's cross-attention keys and
values are computed once from its output, then a lax.while_loop of single-token decode steps
grows the decoder's self-attention KV cache from decoder_start_token_id.

Prompts are the context with the tokenizer's special tokens (T5's closing </s>), cut on the
left to max_length (the encoder's whole limit: the new tokens live in the decoder). A
translation model (NLLB, M2M100, MADLAD-400: engine/translation.py) reads a translation
request's source sentence with its language token or tag instead, and its first new token may
be forced (the target language's, as transformers' forced_bos_token_id): that token counts
against max_new_tokens, as there, and is not part of the text. A row is
done at EOS, at a token whose text contains a stop string, or at its own token limit; the loop
ends when every row is done. Results are cut on the host exactly as the decoder Generator's
(engine/generate.py: finished)."""
from __future__ import annotations

import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..models import EncoderDecoder, build_module
from ..models.seq2seq import empty_cache, encoder_inputs
from ..placement.devices import data_shards, per_device, shard_batch
from ..runlog import warn_once
from .buckets import batch_size_for, length_bucket, next_pow2, padded_rows
from .generate import GenerationStats, Generating, padded_stop_ids
from .translation import refuse_untranslatable, translation_conventions


def _generate_on_device(params, stop_ids, tokens, valid, limits, forced, config, dtype, slots):
    module = build_module(config, dtype)
    apply = lambda *args, method, **kw: module.apply({"params": params}, *args, method=method, **kw)
    b = tokens.shape[0]
    encoded = apply(tokens, *encoder_inputs(valid), method=EncoderDecoder.encode)
    cross = apply(encoded, method=EncoderDecoder.cross_keys_values)  # once per prompt, read by every step
    cross_mask = valid[:, None, :]
    kv_positions = jnp.broadcast_to(jnp.arange(slots), (b, slots))

    def cond(state):
        step, _, _, done, _ = state
        return (step < slots) & ~done.all()

    def body(state):
        step, token, cache, done, out = state
        hidden, cache = apply(token[:, None], jnp.full((b, 1), step), (kv_positions <= step)[:, None, :], cross,
                              cross_mask, cache=cache, cache_index=step, kv_positions=kv_positions,
                              method=EncoderDecoder.decode)
        token = jnp.argmax(apply(hidden[:, 0], method=EncoderDecoder.logits), axis=-1).astype(jnp.int32)
        token = jnp.where((step == 0) & (forced >= 0), forced, token)
        out = out.at[:, step].set(jnp.where(done, -1, token))
        done = done | (token[:, None] == stop_ids[None, :]).any(axis=1) | (step + 1 >= limits)
        return step + 1, token, cache, done, out

    start = jnp.full((b,), config.decoder_start_token_id, jnp.int32)
    cache = empty_cache(config, b, slots, dtype)
    state = (jnp.int32(0), start, cache, ~valid.any(axis=1), jnp.full((b, slots), -1, jnp.int32))  # padding rows: done
    return jax.lax.while_loop(cond, body, state)[-1]


@partial(jax.jit, static_argnames=("config", "dtype", "slots"))
def generate_seq2seq(params, stop_ids, tokens, valid, limits, forced, config, dtype=jnp.float32, slots: int = 32):
    """tokens, valid: [B, S] prompts (any padding); limits: [B] new tokens each row may make
    (<= slots); forced: [B] each row's first new token, -1 for none. Returns [B, slots] new
    tokens, -1 after a row stopped (its stop token kept). Every device runs its own loop until
    its own rows are done."""
    local = partial(_generate_on_device, config=config, dtype=dtype, slots=slots)
    return per_device(local, replicated=2)(params, stop_ids, tokens, valid, limits, forced)


class Seq2SeqGenerator(Generating):
    follows_conventions = True  # a translation model translates as it is meant to (lm-eval's rules: not)

    def __init__(self, model, max_length: int | None = None, token_budget: int = 8192, batch_size: int | None = None,
                 mesh=None, conventions: bool | None = None, **unused):
        """max_length: the longest prompt the encoder reads, the model's own limit by default;
        token_budget: prompt + new-token slots per batch; conventions: False prompts a translation
        model as any other (the class's follows_conventions by default)."""
        super().__init__(model, max_length, token_budget, batch_size, mesh, cache_tokens=token_budget)
        self.stats = GenerationStats()
        follows = self.follows_conventions if conventions is None else conventions
        self.conventions = translation_conventions(model) if follows else None

    def prompt_room(self, max_new: int) -> int:
        """Prompt tokens a request keeps: the encoder's whole limit (new tokens are the decoder's)."""
        return self.max_length

    def prompt_tokens(self, context: str, max_new: int) -> list[int]:
        return self._cut(self.model.tokenizer.encode_batch([context], special_tokens=True)[0])

    def request_tokens(self, request, max_new: int) -> tuple[list[int], int]:
        """The encoder's tokens for a request and its forced first new token (-1: none): a
        translation model's own reading of the source sentence, else the prompt."""
        if self.conventions is None:
            return self.prompt_tokens(request.context, max_new), -1
        if request.translation is None:
            raise refuse_untranslatable(self.model, self.conventions)
        forced = self.conventions.forced(request.translation)
        ids = self.conventions.encoder_ids(request.translation)
        return ids[:1] + self._cut(ids[1:], self.max_length - 1), -1 if forced is None else forced  # its language first

    def _cut(self, ids: list[int], room: int | None = None) -> list[int]:
        room = room or self.max_length
        if len(ids) > room:
            self.stats.truncated += 1
            warn_once(self, "truncated", f"a prompt of {len(ids)} tokens is longer than {room} (the model's "
                      "limit): prompts are cut from the left; results.json counts them")
        return ids[-room:]

    def new_token_limit(self, prompt: list[int], max_new: int) -> int:
        return max_new

    def _generate_group(self, requests, members, stops, max_new, out, progress) -> None:
        """One (stop strings, max_new_tokens) group, longest prompt first, in batches of one prompt
        bucket and the token budget's rows; each row stops at its own limit (new_token_limit), and a
        batch's cache holds its largest (rounded up to a power of two)."""
        read = {i: self.request_tokens(requests[i], max_new) for i in members}
        prompts, forced = {i: r[0] for i, r in read.items()}, {i: r[1] for i, r in read.items()}
        limits = {i: self.new_token_limit(prompts[i], max_new) for i in members}
        stop_ids = padded_stop_ids(self.model.tokenizer, stops)
        order = sorted(members, key=lambda i: (-len(prompts[i]), -limits[i]))
        while order:
            length = length_bucket(len(prompts[order[0]]), 8)
            size = self.batch_size or batch_size_for(length + next_pow2(limits[order[0]], 8), self.token_budget,
                                                     data_shards())
            batch, order = order[:size], order[size:]
            slots = next_pow2(max(limits[i] for i in batch), 8)
            new = self._run([prompts[i] for i in batch], [limits[i] for i in batch], [forced[i] for i in batch],
                            length, slots, stop_ids)
            for i, ids in zip(batch, new):
                out[i] = self._result(ids[int(forced[i] >= 0):limits[i]], stops, requests[i].max_new_chars)
                self.stats.prompt_tokens += len(prompts[i])
            if progress:
                progress(len(batch))

    def _run(self, prompts: list[list[int]], limits: list[int], forced: list[int], length: int, slots: int,
             stop_ids) -> np.ndarray:
        rows = padded_rows(len(prompts), data_shards())
        tokens = np.zeros((rows, length), np.int32)
        valid = np.zeros((rows, length), bool)
        row_limits = np.ones(rows, np.int32)
        row_forced = np.full(rows, -1, np.int32)
        for r, (prompt, limit) in enumerate(zip(prompts, limits)):
            tokens[r, :len(prompt)], valid[r, :len(prompt)], row_limits[r], row_forced[r] = prompt, True, limit, forced[r]
        self.stats.compiles.see("generate-seq2seq", rows, length, slots, len(stop_ids))
        begin = time.perf_counter()
        new = np.asarray(generate_seq2seq(self.params, jnp.asarray(stop_ids), *shard_batch(tokens, valid, row_limits, row_forced),
                                          config=self.model.config, dtype=self.model.dtype, slots=slots))
        self.stats.decode_seconds += time.perf_counter() - begin
        self.stats.decode_row_steps += rows * int((new >= 0).sum(axis=1).max(initial=0))
        return new
