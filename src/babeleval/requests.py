"""Requests and results as plain data: tasks build requests, the engine answers them
in the same order, metrics read results. Nothing here knows a model or a task, and
nothing here imports JAX (tasks import this module)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Loglikelihood:
    """log P(continuation | context); the continuation usually starts with the target delimiter."""

    context: str
    continuation: str


@dataclass(frozen=True)
class Translation:
    """What a translation request asks, apart from its LLM prompt: the source sentence alone and
    the two languages as FLORES-200 codes (eng_Latn, hin_Deva). A translation model (NLLB, M2M100,
    MADLAD-400) reads these instead of the prompt (engine/translation.py); other models ignore them."""

    text: str
    source: str
    target: str


@dataclass(frozen=True)
class Generate:
    context: str
    stop: tuple[str, ...] = ()
    max_new_tokens: int = 32
    max_new_chars: int | None = None  # a character budget: fair across scripts that byte-fall-back
    translation: Translation | None = None  # a translation task's sentence and languages


@dataclass(frozen=True)
class LmEvalGenerate(Generate):
    """An lm-eval task's generate_until, answered by lm-eval's HF backend's rules (its prompt
    encoding and left truncation, EOS text as a stop, the text cut at the first stop and nothing
    else: lm_eval/model.py), so `babeleval run --task lm-eval:...` writes what lm-eval would."""


@dataclass(frozen=True)
class Embed:
    text: str
    prefix: str = ""  # instruction such as "query: " or "passage: " (e5)


@dataclass(frozen=True)
class LoglikelihoodResult:
    logprob: float  # sum over continuation tokens
    is_greedy: bool  # every continuation token was the arg-max
    num_tokens: int  # continuation tokens scored (mean-per-token scoring divides by this)


STOP_REASONS = ("eos", "stop", "length")


def cut_at_stop(text: str, stops) -> str:
    """The text before the first of the stop strings (a Generate request's stop rule)."""
    ends = [text.find(s) for s in stops if s and s in text]
    return text[:min(ends)] if ends else text


@dataclass(frozen=True)
class GenerateResult:
    text: str
    stop_reason: str  # "eos" | "stop" (a stop string) | "length" (max_new_tokens or max_new_chars)
    new_tokens: int  # tokens generated before the cut
