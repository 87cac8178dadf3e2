"""The vocabulary head at scored positions only, reduced as it goes.

For each scored position we need log p(target) and whether the target is the arg-max.
Projecting every position at once and taking a full log-softmax writes and re-reads a
[positions, vocabulary] array several times (2,400 x 49k floats is 0.5 GB for one XCOPA
batch). Here HEAD_CHUNK positions are projected at a time and reduced at once to
(target logit - logsumexp, arg-max == target); a loop with a data-dependent trip count
runs only as many chunks as there are scored positions, so the capacity of the position
array does not cost compute and does not add compiled shapes.

A quantized head is never dequantized whole: Llama 3's 128,256 x 4,096 head is 2.1 GB as
float32, and XLA hoists a loop-invariant dequantization out of the position loop (a 2-layer
Llama-3-8B-shaped Q4_K_M file's scoring program held 4.0 GB of temporaries per device). There the
vocabulary is the outer loop: VOCAB_CHUNK rows dequantized at a time, once per batch, and the
position chunks inside it keep a running max, sum of exponentials (logsumexp), target logit
and arg-max.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ..placement.devices import mesh
from ..quant import is_quantized

HEAD_CHUNK = 128
VOCAB_CHUNK = 8192  # head rows dequantized at a time (at most; 8,192 x 4,096 float32: 134 MB)


def target_logprobs(logits, targets):
    """logits: [N, V] float32, targets: [N] -> (log p(target) [N], target is the arg-max [N])."""
    top = jnp.max(logits, axis=-1)
    logsumexp = top + jnp.log(jnp.sum(jnp.exp(logits - top[:, None]), axis=-1))
    chosen = jnp.take_along_axis(logits, targets[:, None], axis=-1)[:, 0]
    return chosen - logsumexp, jnp.argmax(logits, axis=-1) == targets


def score_positions(module, params, hidden, positions, targets, count):
    """hidden: [N, D]; positions, targets: [C], C a multiple of HEAD_CHUNK, of which the
    first `count` are real (module: a Decoder or an EncoderDecoder, whose `logits` projects). Returns log-probs [C] and greedy flags [C]; only the chunks
    that hold real positions run (later entries stay zero, the rest of the last chunk is junk)."""
    if _quantized_head(module, params):
        return _by_vocabulary(module, params, hidden, positions, targets, count)
    capacity = positions.shape[0]

    def chunk(i, carry):
        logprob, greedy = carry
        start = i * HEAD_CHUNK
        where = jax.lax.dynamic_slice(positions, (start,), (HEAD_CHUNK,))
        target = jax.lax.dynamic_slice(targets, (start,), (HEAD_CHUNK,))
        logits = module.apply({"params": params}, hidden[where], method=type(module).logits)
        lp, gr = target_logprobs(logits, target)
        return (jax.lax.dynamic_update_slice(logprob, lp, (start,)),
                jax.lax.dynamic_update_slice(greedy, gr, (start,)))

    start = (jnp.zeros(capacity, jnp.float32), jnp.zeros(capacity, bool))
    return jax.lax.fori_loop(0, (count + HEAD_CHUNK - 1) // HEAD_CHUNK, chunk, start)


def greedy_tokens(module, params, hidden):
    """hidden: [B, D] -> the arg-max token of each row [B] int32 (a generation step). A quantized
    head is read VOCAB_CHUNK rows at a time, keeping each row's best so far (the first arg-max
    wins, as jnp.argmax's), so a decode step never holds the whole head dense (and XLA has no
    whole dense head to hoist out of the decode loop)."""
    if not _quantized_head(module, params):
        logits = module.apply({"params": params}, hidden, method=type(module).logits)
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)
    pieces, size = _vocab_slices(module)

    def piece(v, carry):
        top, best = carry
        _, start, rows, fresh = _vocab_slice(module, params, v, size)
        logits = jnp.where(fresh, module.apply({"params": params}, hidden, rows, method=type(module).project), -jnp.inf)
        here = jnp.max(logits, axis=-1)
        better = here > top
        return jnp.where(better, here, top), jnp.where(better, start + jnp.argmax(logits, axis=-1), best)

    start = (jnp.full(hidden.shape[0], -jnp.inf, jnp.float32), jnp.zeros(hidden.shape[0], jnp.int32))
    return jax.lax.fori_loop(0, pieces, piece, start)[1]


def _vocab_slices(module) -> tuple[int, int]:
    """(pieces, rows per piece): the head's vocabulary in slices of at most VOCAB_CHUNK rows."""
    pieces = -(-module.cfg.vocab_size // VOCAB_CHUNK)
    return pieces, -(-module.cfg.vocab_size // pieces)


def _vocab_slice(module, params, v, size: int):
    """Slice v of the head: its first id, where its rows start (the last slice ends at the
    vocabulary's end), those rows dense [size, D], and which of them no earlier slice took."""
    first = v * size
    start = jnp.minimum(first, module.cfg.vocab_size - size)
    rows = module.apply({"params": params}, start, size, method=type(module).head_rows)
    return first, start, rows, start + jnp.arange(size) >= first


def _quantized_head(module, params) -> bool:
    """A Decoder's head held quantized on one device per data shard (a head split over a model
    axis is dequantized shard by shard as it is: slicing it by traced rows would gather it)."""
    if not hasattr(module, "head_rows") or mesh().shape["model"] > 1:
        return False
    head = params["embed"]["embedding"] if module.cfg.tie_embeddings else params["lm_head"]["kernel"]
    return is_quantized(head)


def _by_vocabulary(module, params, hidden, positions, targets, count):
    """score_positions for a quantized head: vocabulary slices outside, position chunks inside.
    The last slice ends at the vocabulary's end; its rows an earlier slice took are masked."""
    capacity = positions.shape[0]
    pieces, size = _vocab_slices(module)
    chunks = (count + HEAD_CHUNK - 1) // HEAD_CHUNK
    apply = lambda *args, method: module.apply({"params": params}, *args, method=method)  # noqa: E731

    def piece(v, carry):
        first, start, rows, fresh = _vocab_slice(module, params, v, size)

        def chunk(i, carry):
            top, total, chosen, best = carry
            at = i * HEAD_CHUNK
            where = jax.lax.dynamic_slice(positions, (at,), (HEAD_CHUNK,))
            target = jax.lax.dynamic_slice(targets, (at,), (HEAD_CHUNK,))
            logits = jnp.where(fresh, apply(hidden[where], rows, method=type(module).project), -jnp.inf)
            old = jax.lax.dynamic_slice(top, (at,), (HEAD_CHUNK,))
            here = jnp.max(logits, axis=-1)
            new = jnp.maximum(old, here)
            sum_exp = jax.lax.dynamic_slice(total, (at,), (HEAD_CHUNK,)) * jnp.exp(old - new) + jnp.sum(
                jnp.exp(logits - new[:, None]), axis=-1)
            inside = (target >= first) & (target < start + size)
            picked = jnp.take_along_axis(logits, jnp.clip(target - start, 0, size - 1)[:, None], axis=-1)[:, 0]
            picked = jnp.where(inside, picked, jax.lax.dynamic_slice(chosen, (at,), (HEAD_CHUNK,)))
            arg = jnp.where(here > old, start + jnp.argmax(logits, axis=-1),  # strictly: the first arg-max wins
                            jax.lax.dynamic_slice(best, (at,), (HEAD_CHUNK,)))
            update = lambda whole, part: jax.lax.dynamic_update_slice(whole, part, (at,))  # noqa: E731
            return update(top, new), update(total, sum_exp), update(chosen, picked), update(best, arg)

        return jax.lax.fori_loop(0, chunks, chunk, carry)

    start = (jnp.full(capacity, -jnp.inf, jnp.float32), jnp.zeros(capacity, jnp.float32),
             jnp.zeros(capacity, jnp.float32), jnp.full(capacity, -1, jnp.int32))
    top, total, chosen, best = jax.lax.fori_loop(0, pieces, piece, start)
    ran = jnp.arange(capacity) < chunks * HEAD_CHUNK
    return (jnp.where(ran, chosen - (top + jnp.log(total)), 0.0), ran & (best == targets))
