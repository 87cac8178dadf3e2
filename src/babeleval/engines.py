"""Request type -> engine: Loglikelihood -> Scorer, Generate -> Generator, Embed -> Embedder.
The runner hands over a list of requests and gets the answers in the same order; it never
asks which task they came from. Engines are built on first use (a generation-only run
compiles no scoring program)."""
from __future__ import annotations

from .errors import BabelevalError
from .requests import Embed, Generate, Loglikelihood


class Engines:
    def __init__(self, model, batch_size: int | None = None):
        self.model = model
        self.batch_size = batch_size
        self.built = {}

    def _engine(self, kind):
        if kind not in self.built:
            if kind is Loglikelihood:
                from .engine.scoring import Scorer

                self.built[kind] = Scorer(self.model, batch_size=self.batch_size)
            elif kind is Generate:
                from .engine.generate import Generator

                self.built[kind] = Generator(self.model, batch_size=self.batch_size)
            else:
                from .engine.embed import Embedder

                self.built[kind] = Embedder(self.model, batch_size=self.batch_size)
        return self.built[kind]

    def answer(self, requests: list, progress=None):
        if not requests:
            return []
        kind = type(requests[0])
        if kind not in (Loglikelihood, Generate, Embed) or any(type(r) is not kind for r in requests):
            raise BabelevalError(f"one batch of requests must be all Loglikelihood, Generate or Embed ({kind.__name__})")
        if kind is Generate and self.model.config.kind == "encoder":
            raise BabelevalError(f"{self.model.source}: an encoder cannot generate; use a decoder model")
        if kind is Loglikelihood and self.model.config.kind == "encoder":
            raise BabelevalError(f"{self.model.source}: an encoder cannot score log-likelihoods; use a decoder model")
        engine = self._engine(kind)
        if kind is Loglikelihood:
            return engine.loglikelihood(requests, progress)
        if kind is Generate:
            return engine.generate_results(requests, progress)
        return engine.embed(requests, progress)

    def stats(self) -> dict:
        out = {}
        for kind, engine in self.built.items():
            s = engine.stats if hasattr(engine, "stats") else None
            if kind is Loglikelihood:
                out["scoring"] = {"requests": s.requests, "questions": s.questions, "lines": s.lines,
                                  "tokens_computed": s.tokens_computed, "tokens_padded": s.tokens_padded,
                                  "compiled_programs": s.compiles.count, "seconds": round(s.seconds, 2)}
            elif kind is Generate:
                out["generation"] = {"requests": s.requests, "prompt_tokens": s.prompt_tokens, "new_tokens": s.new_tokens,
                                     "compiled_programs": s.compiles.count, "seconds": round(s.seconds, 2)}
            else:
                out["embedding"] = {"seconds": round(engine.seconds, 2)}
        return out
