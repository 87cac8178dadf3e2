"""Choice orders, the axis that measures order sensitivity: original, n seeded shuffles,
gold always first, gold always last. A permutation lists, for each shown position, the
original option shown there; the gold index moves with it."""
from __future__ import annotations

import hashlib
import random

from ..errors import BabelevalError

FIXED = ("original", "gold-first", "gold-last")


def expand_orders(specs: list[str], where: str = "") -> list[str]:
    """["original", "shuffle:3", "gold-last"] -> ["original", "shuffle-1", "shuffle-2", "shuffle-3", "gold-last"]."""
    out = []
    for spec in specs:
        spec = str(spec).strip()
        if spec in FIXED:
            out.append(spec)
        elif spec.startswith("shuffle:") and spec[8:].isdigit() and int(spec[8:]) > 0:
            out += [f"shuffle-{i}" for i in range(1, int(spec[8:]) + 1)]
        else:
            raise BabelevalError(f"{where}: choice order {spec!r}: expected original, shuffle:N, gold-first or gold-last")
    if len(set(out)) != len(out):
        raise BabelevalError(f"{where}: choice orders repeat: {', '.join(out)}")
    return out


def permutation(order: str, n: int, gold: int, seed: int, doc_id: str) -> list[int]:
    if order == "original":
        return list(range(n))
    if order in ("gold-first", "gold-last"):
        rest = [i for i in range(n) if i != gold]
        return [gold] + rest if order == "gold-first" else rest + [gold]
    digest = hashlib.sha256(f"{seed}|{order}|{doc_id}".encode()).digest()  # stable across runs and machines
    perm = list(range(n))
    random.Random(digest).shuffle(perm)
    return perm


def reorder(options: list, gold: int, perm: list[int]) -> tuple[list, int]:
    return [options[i] for i in perm], perm.index(gold)
