"""BabelevalLM: an lm-evaluation-harness model backend over babeleval's engines.

lm-eval hands a backend all of a task's requests at once; they go to the Scorer in one call
(packed rows, a shared prefix computed once, duplicates scored once) and to the Generator in
one call per generation-settings group. Tokenisation is lm-eval's HF backend's (HFLM), so the
numbers are the same: the context/continuation split is TemplateLM's own code (_encode_pair:
trailing context whitespace moved to the continuation; an empty context scored after the prefix
token, BOS else EOS), tok_encode adds special tokens as the model's tokenizer does unless the
text already starts with BOS (a rendered chat template), a request longer than max_length
keeps its last max_length + 1 tokens, and rolling windows are lm_eval.utils' own.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass

from lm_eval.api.model import TemplateLM
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

from babeleval.engine.generate import GenerationStats
from babeleval.engine.scoring import Scorer, ScoringStats
from babeleval.engine.seq2seq_scoring import Seq2SeqScorer
from babeleval.errors import BabelevalError
from babeleval.loading.source import ModelSource
from babeleval.lm_eval.exact import ExactGenerator, ExactSeq2SeqGenerator, HFTokens, exact_generator, model_max_length
from babeleval.lm_eval.tasks import HFLM_MAX_GEN_TOKS, greedy_request
from babeleval.quant.summary import recorded


@dataclass
class WorkCounts:
    """What a no-sharing engine (HFLM: every request's tokens on their own) would compute."""

    scoring_requests: int = 0
    scoring_tokens_alone: int = 0
    generation_requests: int = 0
    seconds: float = 0.0


class BabelevalLM(TemplateLM):
    def __init__(self, pretrained="smollm2-135m", dtype: str = "float32", max_length: int | None = None,
                 batch_size: int | None = None, add_bos_token: bool | None = None,
                 max_gen_toks: int = HFLM_MAX_GEN_TOKS,
                 share_prefixes: bool = True, mesh=None, quantize: str = "keep", compile_ahead: bool = True, **unused):
        """pretrained: a LoadedModel, a ModelSource (loading/source.py) or any model spec
        `babeleval run` accepts (resolved once, by load_model); max_length:
        the model's own limit by default (as HFLM); add_bos_token: None = as the model's
        tokenizer does (Gemma adds BOS), True/False forces it; max_gen_toks: HFLM's default;
        mesh: as `babeleval run --mesh` ('auto', 'data=D,model=M'; None: one device);
        quantize: a spec's weights as `babeleval run --quantize` loads them; compile_ahead: a
        decoder's main scoring program compiles in the background while lm-eval builds its
        requests (Scorer.compile_ahead; not with mesh 'auto', whose scorer and generator may
        plan different meshes and would then hold two copies of the weights)."""
        super().__init__()
        if isinstance(pretrained, (str, ModelSource)):
            from babeleval.loading import load_model

            pretrained = load_model(pretrained, dtype=dtype, quantize=quantize)
        self.model = pretrained
        self.tok = pretrained.tokenizer
        self.backend = "seq2seq" if pretrained.config.kind == "seq2seq" else "causal"  # TemplateLM's _encode_pair reads it
        self.max_length = model_max_length(pretrained, max_length)
        self.tokens = HFTokens(self.tok, add_bos_token)
        self._max_gen_toks = int(max_gen_toks)
        self.batch_size = None if batch_size in (None, "auto") else int(batch_size)
        self.share_prefixes = share_prefixes
        self.mesh = mesh
        self.work = WorkCounts()
        self._chat = None
        if compile_ahead and self.backend == "causal" and mesh != "auto":
            self.scorer.compile_ahead()

    @functools.cached_property
    def scorer(self) -> Scorer | Seq2SeqScorer:
        """A decoder's request keeps max_length + 1 tokens (its last token is only a target), an
        encoder-decoder's its last max_length context and continuation tokens, as HFLM."""
        engine = Seq2SeqScorer if self.backend == "seq2seq" else Scorer
        return engine(self.model, max_length=self.max_length, batch_size=self.batch_size,
                      share_prefixes=self.share_prefixes, mesh=self.mesh)

    @functools.cached_property
    def generator(self) -> ExactGenerator | ExactSeq2SeqGenerator:
        return exact_generator(self.model, self.tokens, self.max_length, batch_size=self.batch_size,
                               share_prefixes=self.share_prefixes, mesh=self.mesh)

    # -- tokenisation, as HFLM ------------------------------------------------------------
    @property
    def eot_token_id(self) -> int:
        return self.tok.eos_id

    @property
    def prefix_token_id(self) -> int:
        return self.tokens.prefix_token_id

    @property
    def max_gen_toks(self) -> int:
        return self._max_gen_toks

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, left_truncate_len=None, **kwargs):
        return self.tokens.encode(string, add_special_tokens, left_truncate_len)

    def tok_decode(self, tokens, skip_special_tokens: bool = True) -> str:
        return self.tok.decode(tokens)

    # -- requests -------------------------------------------------------------------------
    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        """All of lm-eval's (strings, context ids, continuation ids) in one Scorer call."""
        start = time.time()
        pairs = [(list(context), list(continuation)) for _, context, continuation in requests]
        results = self.scorer.loglikelihood_tokens(pairs)
        self.work.scoring_requests += len(pairs)
        if self.backend == "seq2seq":  # HFLM encodes every request's context and decodes its continuation
            self.work.scoring_tokens_alone += sum(min(len(c), self.max_length) + min(len(k), self.max_length)
                                                  for c, k in pairs)
        else:
            self.work.scoring_tokens_alone += sum(min(len(c) + len(k), self.max_length + 1) - 1 for c, k in pairs)
        self.work.seconds += time.time() - start
        return [(r.logprob, r.is_greedy) for r in results]

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """Every document's windows as HFLM draws them (max_length tokens each, the first after
        the prefix token), all documents' windows in one Scorer call, summed per document."""
        windows, owners = [], []
        for k, (text,) in enumerate(req.args for req in requests):
            for context, continuation in map(make_disjoint_window, get_rolling_token_windows(
                    token_list=self.tok_encode(text), prefix_token=self.prefix_token_id,
                    max_seq_len=self.max_length, context_len=1)):
                windows.append((None, context, continuation))
                owners.append(k)
        totals = [0.0] * len(requests)
        for k, (logprob, _) in zip(owners, self._loglikelihood_tokens(windows)):
            totals[k] += logprob
        for req, total in zip(requests, totals):
            self.cache_hook.add_partial("loglikelihood_rolling", req.args, total)
        return totals

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Greedy: every request with its until strings (and EOS) and max_gen_toks; a request
        asking for sampling is refused (this engine only decodes greedily)."""
        start = time.time()
        asks = [greedy_request(*req.args[:2], self.max_gen_toks, f"task {req.task_name}") for req in requests]
        texts = [r.text for r in self.generator.generate_results(asks)]
        for req, text in zip(requests, texts):
            self.cache_hook.add_partial("generate_until", req.args, text)
        self.work.generation_requests += len(asks)
        self.work.seconds += time.time() - start
        return texts

    # -- chat templates -------------------------------------------------------------------
    @property
    def tokenizer_name(self) -> str:
        return str(self.model.source).replace("/", "__")

    def _template(self):
        if self._chat is None:
            from babeleval.chat import ChatTemplate

            self._chat = ChatTemplate.from_model(self.model)
            if self._chat is None:
                raise BabelevalError(f"{self.model.source}: the model has no chat template (tokenizer_config.json "
                                     "chat_template or GGUF tokenizer.chat_template): run without --apply_chat_template")
        return self._chat

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        if chat_template is False or chat_template is None:
            return None
        return self._template().source

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """As HFLM: transformers' rendering (continue_final_message when no generation prompt;
        a template that refuses a system message is rendered without it)."""
        import jinja2

        try:
            rendered = self._template().render(chat_history, add_generation_prompt=add_generation_prompt)
        except jinja2.exceptions.TemplateError:
            chat_history = [m for m in chat_history if m["role"] != "system"]
            rendered = self._template().render(chat_history, add_generation_prompt=add_generation_prompt)
        if not add_generation_prompt and chat_history:
            final = chat_history[-1]["content"].strip()
            rendered = rendered[:rendered.rindex(final) + len(final)]
        return rendered

    def get_model_info(self) -> dict:
        """lm-eval adds it to its results' config: how the weights were held, as run's results.json."""
        return {"model_source": str(self.model.source), "model_num_parameters": self.model.num_params,
                "model_dtype": str(self.model.dtype), "model_quantization": recorded(self.model.quantization)}

    def engine_stats(self) -> dict:
        """Tokens computed against a no-sharing engine, prefix reuse, seconds."""
        s = self.scorer.stats if "scorer" in self.__dict__ else ScoringStats()  # engines not made: nothing asked
        g = self.generator.stats if "generator" in self.__dict__ else GenerationStats()
        return {"scoring": {"requests": self.work.scoring_requests, "tokens_computed": s.tokens_computed,
                            "tokens_without_sharing": self.work.scoring_tokens_alone, "duplicates": s.duplicates,
                            "prefixes": s.prefixes, "prefix_tokens_reused": s.prefix_tokens_reused,
                            "truncated": s.truncated, "contexts_encoded": s.contexts_encoded, "seconds": round(s.seconds, 2)},
                "generation": {"requests": self.work.generation_requests, "prompt_tokens": g.prompt_tokens,
                               "prefix_tokens_reused": g.prefix_tokens_reused, "new_tokens": g.new_tokens,
                               "truncated": g.truncated, "seconds": round(g.seconds, 2)},
                "seconds": round(self.work.seconds, 2)}
