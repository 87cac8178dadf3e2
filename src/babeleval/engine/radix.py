"""Requests that share a token prefix share the row that computes it: a radix tree over token ids.

A request is one token sequence, context then continuation; the model reads all of it but its
last token, which is only a target. Sorted, the requests of a row form a trie laid out depth
first: each writes only the tokens after the prefix it shares with its predecessor (in sorted
order the longest prefix it shares with any earlier member). A token then attends to its
ancestors only, which is what it would see alone: key i is visible to query j iff
i <= j < end[i], end[i] being the end of i's subtree, so one array per line encodes the whole
mask. This covers a question's options sharing its context (the old row) and options sharing
their first words as well: xnli's three options ("premise, right? Yes|Also|No, hypothesis")
share the premise although lm-eval's context is empty. Every continuation token is scored,
inside a shared prefix too, by its parent's hidden state; a (parent, target) pair several
requests score is projected once and added to each.

When a request joins its predecessor's row (joins): it must share MIN_SHARED tokens, and
- the whole context of both, of MIN_SHARED tokens or more (the options of one question), up to
  the line limit, as before; or
- at least a quarter of its own tokens, while the row stays within ROW_LIMIT tokens: the line
  a row needs grows with it, and attention cost grows with the line (on SmolLM2 a 512-token
  line spends ~15% of its FLOPs on attention, a 128-token line ~4%), so a merge must save more
  than the longer line costs. Sharing only a BOS token or a chance first word is not worth a row.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MIN_SHARED = 2  # tokens: BOS alone (every empty-context request has it) is not a reason to join
SHARE_FRACTION = 4  # requests of different contexts join when they share 1/4 of their tokens
ROW_LIMIT = 512  # tokens a row of different contexts may grow to


@dataclass
class Member:
    owner: int  # the request's index
    inputs: tuple  # the tokens the model reads: context + continuation without its last token
    context: int  # context length
    targets: tuple  # the continuation: predicted from positions context - 1 ... len(inputs) - 1
    shared: int = 0  # input tokens shared with the row's previous member (not computed again)


@dataclass
class Row:
    """Requests laid out as one trie (see the module docstring)."""

    members: list[Member] = field(default_factory=list)
    length: int = 0  # tokens the row computes

    def add(self, member: Member) -> None:
        self.members.append(member)
        self.length += len(member.inputs) - member.shared


@dataclass
class LineArrays:
    """What one line (rows back to back) puts into a batch: tokens, positions, subtree ends
    (0 for padding), and per scored entry the position whose distribution is read and the token
    it should predict; entry_of[k] / owner_of[k]: request owner_of[k] sums entry entry_of[k]."""

    tokens: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    pred: list[int] = field(default_factory=list)
    targets: list[int] = field(default_factory=list)
    entry_of: list[int] = field(default_factory=list)
    owner_of: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, rows: list[Row]) -> "LineArrays":
        line = cls()
        for row in rows:
            line.add_row(row)
        return line

    def add_row(self, row: Row) -> None:
        offset = len(self.tokens)
        ends = np.zeros(row.length, np.int64)
        path = np.zeros(0, np.int64)  # line index of every input token of the current member
        entries: dict[tuple[int, int], int] = {}
        for m in row.members:
            base = len(self.tokens)
            new = len(m.inputs) - m.shared
            path = np.concatenate([path[:m.shared], np.arange(base, base + new)])
            self.tokens += m.inputs[m.shared:]
            self.positions += range(m.shared, len(m.inputs))
            ends[path - offset] = base + new
            for node, target in zip(path[m.context - 1:].tolist(), m.targets):
                entry = entries.get((node, target))
                if entry is None:
                    entry = entries[node, target] = len(self.pred)
                    self.pred.append(node)
                    self.targets.append(target)
                self.entry_of.append(entry)
                self.owner_of.append(m.owner)
        self.ends += ends.tolist()


def members(pairs, owners=None) -> list[Member]:
    """The requests with a continuation as members, sorted by their inputs."""
    out = []
    for k, (context, continuation) in enumerate(pairs):
        if not continuation:
            continue
        sequence = tuple(context) + tuple(continuation)
        out.append(Member(k if owners is None else owners[k], sequence[:-1], len(context), tuple(continuation)))
    out.sort(key=lambda m: m.inputs)
    return out


def common_length(a: tuple, b: tuple) -> int:
    """The length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def joins(row: Row, previous: Member, member: Member, shared: int, max_length: int) -> bool:
    grown = row.length + len(member.inputs) - shared
    if shared < MIN_SHARED or grown > max_length:
        return False
    same_context = min(previous.context, member.context) >= MIN_SHARED and shared >= max(previous.context, member.context)
    return same_context or (SHARE_FRACTION * shared >= len(member.inputs) and grown <= ROW_LIMIT)


def radix_rows(pairs, max_length: int, owners=None) -> list[Row]:
    """Rows of at most max_length tokens from requests of at most max_length + 1 tokens (see the
    module docstring for when requests share one). owners: each pair's request index (default:
    its position)."""
    rows: list[Row] = []
    previous = None
    for member in members(pairs, owners):
        shared = common_length(previous.inputs, member.inputs) if previous else 0
        if previous is not None and joins(rows[-1], previous, member, shared, max_length):
            member.shared = shared
        else:
            rows.append(Row())
        rows[-1].add(member)
        previous = member
    return rows
