"""lm-eval's HF backend (HFLM) rules as babeleval engines: HFTokens encodes text as HFLM's
tok_encode does, ExactGenerator / ExactSeq2SeqGenerator answer generate_until as HFLM does.
Both `babeleval lm-eval` (lm_eval/model.py) and the lm-eval tasks of `babeleval run`
(engines.py: LmEvalGenerate) use them, so one rule set answers both."""
from __future__ import annotations

import dataclasses
import functools

from lm_eval.models.utils import handle_stop_sequences, has_bos_prefix, postprocess_generated_text

from babeleval.engine.generate import Generator
from babeleval.engine.seq2seq_generate import Seq2SeqGenerator
from babeleval.requests import Generate, GenerateResult


class HFTokens:
    """HFLM's tokenisation over a babeleval tokenizer: special tokens added as the model's HF
    tokenizer adds them (its post-processor, or the family's BOS: a GGUF's add_bos_token) unless
    add_bos_token forces it or the text already starts with BOS (a rendered chat template)."""

    def __init__(self, tokenizer, add_bos_token: bool | None = None):
        self.tok = tokenizer
        self.add_bos_token = add_bos_token

    @property
    def prefix_token_id(self) -> int:
        """What an empty context is scored after: BOS, else EOS."""
        return self.tok.bos_id if self.tok.bos_id is not None else self.tok.eos_id

    def special_text(self, token_id: int | None) -> str | None:
        """A token's text with special tokens spelled out (HF's decode(id), skip_special_tokens=False)."""
        if token_id is None:
            return None
        backend = getattr(self.tok, "backend", None)
        return backend.decode([token_id], skip_special_tokens=False) if backend is not None else self.tok.decode([token_id])

    @functools.cached_property
    def bos_text(self) -> str | None:
        return self.special_text(self.prefix_token_id)

    @functools.cached_property
    def adds_special_tokens(self) -> bool:
        """What HF's encode(text) does by default."""
        return bool(self.tok.prefix) or self.tok.encode_batch(["a"], special_tokens=True)[0] != self.tok.encode("a")

    def encode(self, string: str, add_special_tokens: bool | None = None, left_truncate_len=None) -> list[int]:
        add = add_special_tokens if add_special_tokens is not None else self.add_bos_token
        if add_special_tokens is None and has_bos_prefix(string, self.bos_text):
            add = False
        if add is None:
            add = self.adds_special_tokens
        if not add:
            ids = self.tok.encode(string)
        elif self.tok.prefix:
            ids = self.tok.prefix + self.tok.encode(string)
        else:
            ids = self.tok.encode_batch([string], special_tokens=True)[0]
        return ids[-left_truncate_len:] if left_truncate_len else ids


class LmEvalRules:
    """HFLM's prompts and texts, over either generator: the prompt encoded by HFTokens (BOS as
    the tokenizer adds it, not twice after a chat template; T5's closing </s>) and cut to its
    last prompt_room tokens (max_length - max_gen_toks for a decoder, the encoder's whole
    max_length for an encoder-decoder); the EOS token's text one more stop string
    (handle_stop_sequences); the text decoded up to EOS and cut at the first stop string, and
    nothing else (the base generators also drop a partial UTF-8 character at a length cut, which
    HF's decode keeps as U+FFFD)."""

    def __init__(self, model, encode, eos_text: str | None, **kwargs):
        super().__init__(model, **kwargs)
        self.encode = encode
        self.eos_text = eos_text

    def generate_results(self, requests: list[Generate], progress=None) -> list[GenerateResult]:
        requests = [dataclasses.replace(r, stop=tuple(handle_stop_sequences(list(r.stop), eos=self.eos_text)))
                    for r in requests]
        return super().generate_results(requests, progress)

    def prompt_tokens(self, context: str, max_new: int) -> list[int]:
        ids, room = self.encode(context), self.prompt_room(max_new)
        if len(ids) > room:
            self.stats.truncated += 1
        return ids[-room:]

    def _result(self, ids: list[int], stops, max_chars: int | None) -> GenerateResult:
        tok = self.model.tokenizer
        ids = [t for t in ids if t >= 0]
        if tok.eos_id in ids:
            ids = ids[:ids.index(tok.eos_id)]
        self.stats.new_tokens += len(ids)
        return GenerateResult(postprocess_generated_text(tok.decode(ids), list(stops), None), "", len(ids))


class ExactGenerator(LmEvalRules, Generator):
    """A decoder's generate_until as HFLM answers it."""


class ExactSeq2SeqGenerator(LmEvalRules, Seq2SeqGenerator):
    """An encoder-decoder's generate_until as HFLM (backend "seq2seq") answers it: generate's
    max_length is the prompt's length + max_gen_toks, counted in decoder tokens with the start
    token, so a row makes up to len(prompt) + max_gen_toks - 1 new tokens (HFLM's prompt length is
    its padded batch's: equal at batch size 1). HFLM prompts a translation model (NLLB, MADLAD) as
    any other: no language tokens."""

    follows_conventions = False

    def new_token_limit(self, prompt: list[int], max_new: int) -> int:
        return len(prompt) + max_new - 1


def model_max_length(model, max_length: int | None = None) -> int:
    """HFLM's max_length: the model's own limit unless a smaller one is given."""
    return min(int(max_length or model.config.max_positions), model.config.max_positions)


def exact_generator(model, tokens: HFTokens | None = None, max_length: int | None = None,
                    **kwargs) -> ExactGenerator | ExactSeq2SeqGenerator:
    """The model's generate_until engine by HFLM's rules (kwargs: batch_size, share_prefixes, mesh)."""
    tokens = tokens or HFTokens(model.tokenizer)
    engine = ExactSeq2SeqGenerator if model.config.kind == "seq2seq" else ExactGenerator
    return engine(model, tokens.encode, tokens.special_text(model.tokenizer.eos_id),
                  max_length=model_max_length(model, max_length), **kwargs)
