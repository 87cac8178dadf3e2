"""The context/continuation token boundary, exactly as lm-evaluation-harness draws it
for decoder models: encode(context + continuation) minus encode(context), the context's
trailing whitespace (spaces, newlines, tabs: all of it, str.rstrip() as TemplateLM._encode_pair)
moved to the continuation, an empty context replaced by BOS (or EOS), and no second BOS
before a context that starts with one (a chat template's); and for encoder-decoders as it
draws them there (seq2seq_pairs)."""
from __future__ import annotations

from ..loading.tokenizer import Tokenizer


def move_whitespace(context: str, continuation: str) -> tuple[str, str]:
    """lm-eval's rule: the context's trailing whitespace starts the continuation ("Answer:\\n",
    " A" -> "Answer:", "\\n A"), so the context's tokens never end in a whitespace token that
    the continuation's text would have merged with."""
    kept = context.rstrip()
    return kept, context[len(kept):] + continuation


def split_pairs(tokenizer: Tokenizer, pairs: list[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    """A context of whitespace only is then empty and gets BOS (or EOS) as an empty one does
    (lm-eval would score such a request with no context token at all)."""
    moved = [move_whitespace(context, continuation) for context, continuation in pairs]
    wholes = tokenizer.encode_batch([c + x for c, x in moved])
    contexts = tokenizer.encode_batch([c for c, _ in moved])
    start = tokenizer.bos_id if tokenizer.bos_id is not None else tokenizer.eos_id
    out = []
    for (context, _), whole, ctx in zip(moved, wholes, contexts):
        # empty context: whole == the continuation's own tokens, after BOS (or EOS)
        out.append(([start], whole) if not context else (tokenizer.with_prefix(ctx), whole[len(ctx):]))
    return out


def seq2seq_pairs(tokenizer: Tokenizer, pairs: list[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    """lm-eval's seq2seq split (TemplateLM._encode_pair with backend "seq2seq"): trailing
    whitespace of the context moved to the continuation, the context encoded with the
    tokenizer's special tokens (T5's closing </s>) for the encoder, the continuation without
    for the decoder; an empty context is the prefix token (BOS, else EOS: T5's </s>), or the
    continuation's first token when it is that token."""
    start = tokenizer.bos_id if tokenizer.bos_id is not None else tokenizer.eos_id
    moved = [move_whitespace(context, continuation) for context, continuation in pairs]
    contexts = tokenizer.encode_batch([c for c, _ in moved], special_tokens=True)
    continuations = tokenizer.encode_batch([k for _, k in moved])
    out = []
    for (context, _), ctx, cont in zip(moved, contexts, continuations):
        if context:
            out.append((ctx, cont))
        else:
            out.append(([start], cont) if not cont or cont[0] != start else (cont[:1], cont[1:]))
    return out
