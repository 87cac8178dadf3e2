"""The byte-level GPT: our decoder with a 256-symbol vocabulary (UTF-8 bytes), plus a
small trainer so that a real byte-level baseline can be built on CPU in minutes."""
from __future__ import annotations

import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .config import DecoderConfig
from .decoder import Decoder


def bytelm_config(layers: int = 4, hidden: int = 256, heads: int = 4, context: int = 256) -> DecoderConfig:
    return DecoderConfig(
        arch="bytelm", vocab_size=256, hidden_size=hidden, num_layers=layers, num_heads=heads, num_kv_heads=heads,
        head_dim=hidden // heads, intermediate_size=4 * hidden, max_positions=context, norm="rms", mlp="gated",
        activation="silu", position="rope", tie_embeddings=True, bos_token_id=0, eos_token_id=0, pad_token_id=0,
    )


@dataclass
class TrainReport:
    steps: int
    seconds: float
    train_loss: float
    heldout_loss_before: float
    heldout_loss_after: float


def _batches(data: np.ndarray, batch: int, context: int, rng: np.random.Generator):
    while True:
        starts = rng.integers(0, len(data) - context - 1, size=batch)
        yield np.stack([data[s: s + context + 1] for s in starts])


def _loss_fn(module, params, chunk):
    tokens, targets = chunk[:, :-1], chunk[:, 1:]
    t = tokens.shape[1]
    mask = jnp.broadcast_to(jnp.tril(jnp.ones((t, t), bool)), (tokens.shape[0], t, t))
    positions = jnp.broadcast_to(jnp.arange(t), tokens.shape)
    hidden, _ = module.apply({"params": params}, tokens, positions, mask)
    logits = module.apply({"params": params}, hidden, method=Decoder.logits)
    logp = jax.nn.log_softmax(logits)
    return -jnp.take_along_axis(logp, targets[..., None], -1).mean()


def train_bytelm(text: str, config: DecoderConfig, params, seconds: float = 60.0, batch: int = 16,
                 lr: float = 3e-3, seed: int = 0, log=print, steps: int | None = None):
    """Adam on next-byte prediction over 90% of `text`; the last 10% is held out. Stops after
    `seconds`, or after exactly `steps` steps when given (a reproducible run)."""
    import optax

    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int32)
    split = int(len(data) * 0.9)
    train, heldout = data[:split], data[split:]
    context = config.max_positions
    if len(heldout) <= context + 1:
        raise ValueError(f"need more than {10 * (context + 2)} bytes of text to train and hold out")
    module = Decoder(config)
    optimizer = optax.adamw(optax.warmup_cosine_decay_schedule(0.0, lr, 50, 5000, lr / 10), weight_decay=0.01)
    opt_state = optimizer.init(params)

    @jax.jit
    def step(params, opt_state, chunk):
        loss, grads = jax.value_and_grad(lambda p: _loss_fn(module, p, chunk))(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    eval_chunks = np.stack([heldout[i: i + context + 1] for i in range(0, len(heldout) - context - 1, context)][:32])
    evaluate = jax.jit(lambda p: _loss_fn(module, p, eval_chunks))
    before = float(evaluate(params))
    rng = np.random.default_rng(seed)
    start, done, loss = time.time(), 0, float("nan")
    for chunk in _batches(train, batch, context, rng):
        params, opt_state, loss = step(params, opt_state, chunk)
        done += 1
        if done % 50 == 0:
            log(f"step {done}: train loss {float(loss):.3f} ({time.time() - start:.0f}s)")
        if done == steps or (steps is None and time.time() - start > seconds):
            break
    return params, TrainReport(done, time.time() - start, float(loss), before, float(evaluate(params)))
