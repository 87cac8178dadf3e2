"""The context/continuation token boundary, exactly as lm-evaluation-harness draws it
for decoder models: encode(context + continuation) minus encode(context), trailing
context spaces moved to the continuation, an empty context replaced by BOS (or EOS), and
no second BOS before a context that starts with one (a chat template's)."""
from __future__ import annotations

from ..loading.tokenizer import Tokenizer


def split_pairs(tokenizer: Tokenizer, pairs: list[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    moved = []
    for context, continuation in pairs:
        spaces = len(context) - len(context.rstrip(" "))
        if spaces:
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        moved.append((context, continuation))
    wholes = tokenizer.encode_batch([c + x for c, x in moved])
    contexts = tokenizer.encode_batch([c for c, _ in moved])
    start = tokenizer.bos_id if tokenizer.bos_id is not None else tokenizer.eos_id
    out = []
    for (context, _), whole, ctx in zip(moved, wholes, contexts):
        # empty context: whole == the continuation's own tokens, after BOS (or EOS)
        out.append(([start], whole) if not context else (tokenizer.with_prefix(ctx), whole[len(ctx):]))
    return out
