"""Prompts that share nothing, prefilled as the scorer scores: packed several to a line.

Left-padded prefill batches (one per prompt-length bucket, each a compiled program) padded
XQuAD-hi's one-question-per-paragraph prompts to 1.3x their tokens and compiled a program per
bucket. Here a window of prompts (the rows of several decode groups) is packed first-fit
decreasing into lines of one length, one line per device per call, each prompt attending to
itself only (scoring.tree_mask; the causal loop skips the key blocks of a line's other prompts).
Every call's keys and values stay as computed, packed: call c writes line c of each device's
window buffer. Each decode group then gathers its rows from the lines (take_group), every
prompt ending at the group's last prompt slot: one prefill program for every call of a run.

A window is bounded by its buffer's lines, not by rows x the longest prompt: the buffer holds
the prompts' tokens and the lines' padding only (XQuAD-hi's 76 one-question prompts fit one
window, 5.6% padding; windows of rows x 1,696 slots took two, 19.7%: each window ends in part-
filled lines). Decode groups are prompts of similar length (sorted, longest first); within a
group prompts are dealt to the devices in turn, and each device packs the prompts of its rows
only (a device writes only its own rows).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..models import build_module
from ..models.decoder import empty_cache
from ..models.stack import cache_slots
from ..placement.devices import constrain_kv, per_device
from .head import greedy_tokens
from .prefix import attention_inputs
from .scoring import tree_mask


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


class Lines:
    """First-fit packing of prompts (offered longest first: first-fit decreasing) into lines of
    `length` tokens, each device its own lines."""

    def __init__(self, length: int, devices: int):
        self.length = length
        self.lines = [[] for _ in range(devices)]  # per device: [[room, [(prompt index, its length)]]]

    def add(self, j: int, n: int, device: int) -> None:
        lines = self.lines[device]
        for line in lines:
            if n <= line[0]:
                line[0] -= n
                line[1].append((j, n))
                return
        lines.append([self.length - n, [(j, n)]])

    def count(self) -> int:
        """Lines per device: the calls they take."""
        return max(map(len, self.lines))

    def members(self) -> list[int]:
        """The prompts packed, in the order offered."""
        return sorted(j for lines in self.lines for _, members in lines for j, _ in members)

    def copy(self) -> "Lines":
        out = Lines(self.length, 0)
        out.lines = [[[room, list(members)] for room, members in device] for device in self.lines]
        return out


def windows(lengths: list[int], group_rows: int, devices: int, line: int, max_lines: int) -> list[Lines]:
    """Prompts (lengths sorted longest first, decode groups of group_rows) in windows of whole
    decode groups, each packed into at most max_lines lines per device (a group needing more
    has a window of its own); a prompt's device is its turn within its group (group_row)."""
    def place(lines: Lines, start: int) -> Lines:
        for j in range(start, min(start + group_rows, len(lengths))):
            lines.add(j, lengths[j], (j - start) % devices)
        return lines

    out = []
    for start in range(0, len(lengths), group_rows):
        grown = place(out[-1].copy(), start) if out else None
        if grown is not None and grown.count() <= max_lines:
            out[-1] = grown
        else:
            out.append(place(Lines(line, devices), start))
    return out


@dataclass
class Call:
    """Line c of every device ([devices, line] arrays) and, per window row, its prompt's last
    position in its device's line (-1: not in this call)."""
    tokens: np.ndarray
    positions: np.ndarray
    ends: np.ndarray
    last: np.ndarray


def window_calls(packed: Lines, start: int, prompts: list[list[int]], rows: list[int], window_size: int):
    """The calls of a window whose prompts are prompts[start ...] (rows[j - start]: prompt j's
    window row), and per window row the line its prompt is in and where it ends there (0, 0 for
    rows without a prompt)."""
    devices, length = len(packed.lines), packed.length
    line_of, end_of = np.zeros(window_size, np.int32), np.zeros(window_size, np.int32)
    calls = []
    for c in range(packed.count()):
        tokens, positions, ends = (np.zeros((devices, length), np.int32) for _ in range(3))
        last = np.full(window_size, -1, np.int32)
        for d, lines in enumerate(packed.lines):
            at = 0
            for j, n in lines[c][1] if c < len(lines) else ():
                r = rows[j - start]
                tokens[d, at: at + n], positions[d, at: at + n], ends[d, at: at + n] = prompts[j], np.arange(n), at + n
                last[r], line_of[r], end_of[r] = at + n - 1, c, at + n
                at += n
        calls.append(Call(tokens, positions, ends, last))
    return calls, line_of, end_of


@partial(jax.jit, static_argnames=("lines", "length", "config", "dtype"))
def empty_buffer(first, lines: int, length: int, config, dtype):
    """A window's buffer: per layer k, v [devices x lines, Hkv, length, D] zeros (`first`: any
    array split over the devices)."""
    return constrain_kv(per_device(lambda f: empty_cache(config, lines, length, dtype), replicated=0)(first))


def _prefill_lines_on_device(params, index, buffer, first, tokens, positions, ends, last, config, dtype):
    module = build_module(config, dtype)
    lines, length = tokens.shape
    inputs = attention_inputs(None, positions, tree_mask(ends), None, empty_cache(config, lines, length, dtype))
    at = jnp.maximum(last, 0)  # flat [lines x length] positions
    outputs = jnp.broadcast_to(at % length, (lines, at.size))  # the last layer's queries: the rows' last tokens only
    hidden, kv = module.apply({"params": params}, tokens, **inputs, outputs=outputs)
    buffer = jax.tree.map(lambda b, x: jax.lax.dynamic_update_slice(b, x.astype(b.dtype), (index,) + (0,) * (b.ndim - 1)),
                          buffer, kv)
    picked = hidden[at // length, jnp.arange(at.size)]
    return jnp.where(last >= 0, greedy_tokens(module, params, picked), first), buffer


@partial(jax.jit, static_argnames=("config", "dtype"), donate_argnames=("buffer", "first"))
def prefill_lines(params, index, buffer, first, tokens, positions, ends, last, config, dtype):
    """One call of window_calls (a line per device): the lines' prompts prefilled, their keys
    and values written as line `index` of each device's window buffer (donated), every
    finished prompt's first new token into `first` [window rows]."""
    local = partial(_prefill_lines_on_device, config=config, dtype=dtype)
    return per_device(local, replicated=2)(params, index, buffer, first, tokens, positions, ends, last)


@partial(jax.jit, static_argnames=("rows", "length", "new"))
def take_group(group, first, buffer, line_of, end_of, rows: int, length: int, new: int):
    """Decode group `group` of the window: `rows` rows per device (each device's block of the
    group, window_rows), each row's prompt gathered from its line of the buffer into `length`
    slots ending at the last (the slots before it hold what precedes it in the line, or the
    line's end: no query sees them), then `new` empty slots."""
    def local(group, first, buffer, line_of, end_of):
        at = group * rows
        lines, ends = (jax.lax.dynamic_slice_in_dim(a, at, rows) for a in (line_of, end_of))
        slots = (ends[:, None] - length + jnp.arange(length)[None]) % cache_slots(buffer)  # [rows, length]

        def gather(x):  # [lines, ..., Hkv, L, D] -> [rows, ..., Hkv, length + new, D]
            rows_kv = jax.vmap(lambda line, s: jnp.take(x[line], s, axis=-2))(lines, slots)
            return jnp.pad(rows_kv, ((0, 0),) * (rows_kv.ndim - 2) + ((0, new), (0, 0)))

        return jax.lax.dynamic_slice_in_dim(first, at, rows), jax.tree.map(gather, buffer)

    first, cache = per_device(local, replicated=1)(group, first, buffer, line_of, end_of)
    return first, constrain_kv(cache)
