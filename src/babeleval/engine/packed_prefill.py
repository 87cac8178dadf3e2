"""Prompts that share nothing, prefilled as the scorer scores: packed several to a line.

Left-padded prefill batches (one per prompt-length bucket, each a compiled program) padded
XQuAD-hi's one-question-per-paragraph prompts to 1.3x their tokens and compiled a program per
bucket. Here a window of prompts (the rows of a few decode groups) is packed first-fit
decreasing into lines of one length, one line per device per call, each prompt attending to
itself only (scoring.tree_mask; the causal loop skips the key blocks of a line's other prompts),
and every prompt's keys and values are copied from its line straight into its row of the
window's decode cache (left-padded, the prompt ending at the same slot in every row), with its
first new token taken at its last position: one program for every call of a run. Each decode
group then takes its rows, in the slots its own longest prompt needs (take_group).

A window's rows are decode groups of prompts of similar length (sorted, longest first); within
a group prompts are dealt to the devices in turn, and each device packs the prompts of its rows
only (a device writes only its own rows of the cache).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..models import Decoder, build_module
from ..models.decoder import empty_cache
from .devices import constrain_kv, per_device
from .prefix import attention_inputs
from .scoring import tree_mask


@dataclass
class Call:
    """One prefill call: a line per device ([devices, line] arrays); per device, where each of
    its line's prompts ends in the line and its window row ([devices, rows per device], `count`
    of them real); per window row, its prompt's last position in its device's line (-1: not in
    this call)."""
    tokens: np.ndarray
    positions: np.ndarray
    ends: np.ndarray
    prompt_end: np.ndarray
    prompt_row: np.ndarray  # the device's own row
    count: np.ndarray  # [devices]
    last: np.ndarray  # [window rows]


def group_row(k: int, group_rows: int, devices: int) -> int:
    """The row of a decode group's k-th prompt (longest first): the prompts are dealt to the
    devices in turn (each device's rows alike in length), and shard_batch gives each device a
    contiguous block of rows."""
    return k % devices * (group_rows // devices) + k // devices


def window_rows(count: int, group_rows: int, groups: int, devices: int) -> list[int]:
    """The window row of each of `count` prompts (sorted longest first): decode group g holds
    prompts g * group_rows ...; a window of `groups` groups keeps each device's block of every
    group in turn (device d's rows are d * groups * local ..., local = group_rows / devices), so
    take_group cuts group g out of every device's rows at g * local."""
    local = group_rows // devices
    rows = []
    for j in range(count):
        g, k = divmod(j, group_rows)
        r = group_row(k, group_rows, devices)
        rows.append(r // local * groups * local + g * local + r % local)
    return rows


def pack_calls(prompts: list[list[int]], rows: list[int], rows_per_device: int, line: int,
               devices: int) -> list[Call]:
    """The calls that prefill `prompts` into window rows `rows`: each device packs its own rows' prompts, longest first, into lines of `line`
    tokens (first fit); call c runs line c of every device."""
    lines = [[] for _ in range(devices)]  # per device: [(room, [(prompt, row)])]
    for prompt, row in sorted(zip(prompts, rows), key=lambda pr: -len(pr[0])):
        device = lines[row // rows_per_device]
        for k, (room, members) in enumerate(device):
            if len(prompt) <= room:
                device[k] = (room - len(prompt), members + [(prompt, row)])
                break
        else:
            device.append((line - len(prompt), [(prompt, row)]))
    calls = []
    for c in range(max(map(len, lines))):
        tokens, positions, ends = (np.zeros((devices, line), np.int32) for _ in range(3))
        prompt_end, prompt_row = (np.zeros((devices, rows_per_device), np.int32) for _ in range(2))
        count = np.zeros(devices, np.int32)
        last = np.full(devices * rows_per_device, -1, np.int32)
        for d, device in enumerate(lines):
            at = 0
            for k, (prompt, r) in enumerate(device[c][1] if c < len(device) else ()):
                n = len(prompt)
                tokens[d, at: at + n], positions[d, at: at + n], ends[d, at: at + n] = prompt, np.arange(n), at + n
                prompt_end[d, k], prompt_row[d, k], count[d] = at + n, r - d * rows_per_device, k + 1
                last[r] = at + n - 1
                at += n
        calls.append(Call(tokens, positions, ends, prompt_end, prompt_row, count, last))
    return calls


@partial(jax.jit, static_argnames=("slots", "config", "dtype"))
def empty_window(first, slots: int, config, dtype):
    """The window's decode cache: per layer k, v [rows, Hkv, slots, D] zeros, rows as `first` ([rows])."""
    return constrain_kv(per_device(lambda f: empty_cache(config, f.shape[0], slots, dtype), replicated=0)(first))


def _prefill_lines_on_device(params, cache, first, tokens, positions, ends, prompt_end, prompt_row, count, last,
                             held, config, dtype):
    module = build_module(config, dtype)
    lines, length = tokens.shape
    inputs = attention_inputs(None, positions, tree_mask(ends), None, empty_cache(config, lines, length, dtype))
    hidden, kv = module.apply({"params": params}, tokens, **inputs)
    # each prompt's keys and values: the `held` slots ending at its last token (in the line padded
    # with `held` slots in front) copied into its row's first `held` slots, so it ends at slot held;
    # the slots before it get whatever preceded it in the line, and no query sees them
    padded = jax.tree.map(lambda x: jnp.pad(x[0], ((0, 0), (held, 0), (0, 0))), kv)

    def put(k, cache):
        end, row = prompt_end[0, k], prompt_row[0, k]
        piece = lambda x: jax.lax.dynamic_slice(x, (0, end, 0), (x.shape[0], held, x.shape[2]))[None]
        return jax.tree.map(lambda c, x: jax.lax.dynamic_update_slice(c, piece(x).astype(c.dtype), (row, 0, 0, 0)),
                            cache, padded)

    cache = jax.lax.fori_loop(0, count[0], put, cache)
    picked = hidden.reshape(-1, hidden.shape[-1])[jnp.maximum(last, 0)]
    logits = module.apply({"params": params}, picked, method=Decoder.logits)
    return jnp.where(last >= 0, jnp.argmax(logits, axis=-1).astype(jnp.int32), first), cache


@partial(jax.jit, static_argnames=("held", "config", "dtype"), donate_argnames=("cache", "first"))
def prefill_lines(params, cache, first, tokens, positions, ends, prompt_end, prompt_row, count, last, held: int,
                  config, dtype):
    """One call of pack_calls (a line per device): the lines' prompts prefilled, their keys and
    values written into the window cache (donated; each prompt ending at slot `held`), every
    finished prompt's first new token into `first` [rows]."""
    local = partial(_prefill_lines_on_device, held=held, config=config, dtype=dtype)
    return per_device(local)(params, cache, first, tokens, positions, ends, prompt_end, prompt_row, count, last)


@partial(jax.jit, static_argnames=("rows", "slots"))
def take_group(group, first, cache, rows: int, slots: int):
    """Decode group `group` of the window: `rows` rows per device (each device's block of the
    group, window_rows) and the last `slots` slots of each (the prompts end at the same slot in
    every row, so a group of shorter prompts needs fewer)."""
    def local(group, first, cache):
        at = group * rows
        cut = lambda x: jax.lax.dynamic_slice_in_dim(x, at, rows, axis=0)[:, :, x.shape[2] - slots:]
        return jax.lax.dynamic_slice_in_dim(first, at, rows), jax.tree.map(cut, cache)

    first, cache = per_device(local, replicated=1)(group, first, cache)
    return first, constrain_kv(cache)
