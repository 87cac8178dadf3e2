"""Bucket shapes: lengths and batch sizes rounded up to a few fixed sizes so that jit
compiles a handful of programs per task, not one per batch."""
from __future__ import annotations


def next_pow2(n: int, minimum: int = 1) -> int:
    n = max(int(n), minimum)
    return 1 << (n - 1).bit_length()


def length_bucket(n: int, minimum: int = 16, step: int = 128) -> int:
    """Round up to the next of 16, 24, 32, 48, 64, 96, ..., 384, 512 (powers of two and their
    midpoints: padding wastes at most a third, shapes stay logarithmic), and past 4 * step to
    a multiple of step (at most a fifth: long prompts' compute, attention above all, grows
    faster than the few extra compiled shapes cost)."""
    if n > 4 * step:
        return -(-int(n) // step) * step
    p = next_pow2(n, minimum)
    return p * 3 // 4 if p * 3 // 4 >= n and p > minimum else p


def padded_rows(n: int, devices: int) -> int:
    """Rows of a batch shape: the next power of two, rounded up to a multiple of the device count."""
    return -(-next_pow2(n) // devices) * devices


def batch_size_for(length: int, token_budget: int, devices: int, limit: int | None = None) -> int:
    """The largest power-of-two batch with batch * length <= token_budget (at least one row per device)."""
    size = max(1, token_budget // max(length, 1))
    size = 1 << (size.bit_length() - 1)
    if limit:
        size = min(size, next_pow2(limit))
    return max(size, devices)


def length_batches(lengths: list[int], token_budget: int, devices: int, extra: int = 0,
                   batch_size: int | None = None, minimum: int = 16):
    """Batches over items sorted longest first: a batch's length is the bucket of its first
    item, its size the fixed batch_size or the most rows of (bucket + extra) tokens that fit
    the token budget. Yields (bucket, start, stop) into the sorted items."""
    i = 0
    while i < len(lengths):
        bucket = length_bucket(lengths[i], minimum)
        size = batch_size or batch_size_for(bucket + extra, token_budget, devices)
        yield bucket, i, min(i + size, len(lengths))
        i += size


class CompileCounter:
    """Counts distinct (function, shape) signatures: each one is a compiled XLA program."""

    def __init__(self):
        self.shapes: set = set()

    def see(self, name: str, *shape) -> None:
        self.shapes.add((name, *shape))

    @property
    def count(self) -> int:
        return len(self.shapes)
