"""The vocabulary head at scored positions only, reduced as it goes.

For each scored position we need log p(target) and whether the target is the arg-max.
Projecting every position at once and taking a full log-softmax writes and re-reads a
[positions, vocabulary] array several times (2,400 x 49k floats is 0.5 GB for one XCOPA
batch). Here HEAD_CHUNK positions are projected at a time and reduced at once to
(target logit - logsumexp, arg-max == target); a loop with a data-dependent trip count
runs only as many chunks as there are scored positions, so the capacity of the position
array does not cost compute and does not add compiled shapes.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

HEAD_CHUNK = 128


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
