"""The metrics a generation task can list, each with the signature that records every
setting that changes its number. Per-sample values go into samples_<task>.jsonl; corpus
values are computed again from the records of each subset (chrF and BLEU are corpus
statistics, not means of sentence scores).

Task files name them as strings (exact_match, squad, squad_multilingual, chrf, chrf++,
bleu, ter, rouge_l) or as mappings ({name: squad_multilingual, language: hi}).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import BabelevalError
from .means import mean_and_stderr

NAMES = ("exact_match", "squad", "squad_multilingual", "chrf", "chrf++", "bleu", "ter", "rouge_l")


def _spec(metric) -> tuple[str, dict]:
    if isinstance(metric, str):
        return metric, {}
    if isinstance(metric, dict) and "name" in metric:
        return metric["name"], {k: v for k, v in metric.items() if k != "name"}
    raise BabelevalError(f"a metric is a name or a mapping with a name, got {metric!r}")


def check_metric(metric, where: str) -> None:
    name, options = _spec(metric)
    if name not in NAMES:
        import difflib

        close = difflib.get_close_matches(str(name), NAMES, n=2)
        raise BabelevalError(f"{where}: unknown metric {name!r}{f' (did you mean {close[0]}?)' if close else ''}; "
                             f"metrics: {', '.join(NAMES)}")
    allowed = {"squad_multilingual": ("language",)}.get(name, ())
    for key in options:
        if key not in allowed:
            raise BabelevalError(f"{where}: metric {name} has no option {key!r}"
                                 f"{'; options: ' + ', '.join(allowed) if allowed else ''}")


def _streams(references: list[list[str]]) -> list[list[str]]:
    """sacreBLEU's layout (one list per reference position); a segment with fewer references
    repeats its first, which changes neither chrF's best reference nor BLEU's clipped counts."""
    width = max((len(r) for r in references), default=1)
    return [[refs[k] if k < len(refs) else refs[0] for refs in references] for k in range(width)]


@dataclass(frozen=True)
class GenerationMetric:
    name: str
    language: str = ""

    @property
    def keys(self) -> tuple[str, ...]:
        if self.name.startswith("squad"):
            prefix = "squad" if self.name == "squad" else "squad_ml"
            return (f"{prefix}_em", f"{prefix}_f1")
        return (self.name,)

    @property
    def signature(self) -> str:
        from .bootstrap import SIGNATURE as BOOTSTRAP
        from .chrf import CHRF
        from .rouge import SIGNATURE
        from .squad import SQuAD

        if self.name == "exact_match":
            return "exact_match|strip:yes|case:mixed|refs:any"
        if self.name.startswith("squad"):
            return SQuAD("official" if self.name == "squad" else "multilingual", self.language or "en").signature
        if self.name in ("chrf", "chrf++"):
            chrf = CHRF(word_order=2 if self.name == "chrf++" else 0)
            return f"{chrf.name}|{chrf.signature()}|stderr:{BOOTSTRAP}"
        if self.name == "rouge_l":
            return SIGNATURE
        import sacrebleu

        return f"{self.name}|sacrebleu:{sacrebleu.__version__}|defaults|stderr:{BOOTSTRAP}"

    def per_sample(self, predictions: list[str], references: list[list[str]]) -> dict[str, list[float]]:
        if self.name == "exact_match":
            return {"exact_match": [100.0 * any(p.strip() == r.strip() for r in refs)
                                    for p, refs in zip(predictions, references)]}
        if self.name.startswith("squad"):
            from .squad import SQuAD

            squad = SQuAD("official" if self.name == "squad" else "multilingual", self.language or "en")
            em, f1 = squad.scores(predictions, references)
            return dict(zip(self.keys, ((100.0 * em).tolist(), (100.0 * f1).tolist())))
        if self.name in ("chrf", "chrf++"):
            from .chrf import CHRF

            chrf = CHRF(word_order=2 if self.name == "chrf++" else 0)
            return {self.name: chrf.sentence_scores(predictions, _streams(references))}
        if self.name == "rouge_l":
            from .rouge import rouge_l_scores

            return {"rouge_l": (100.0 * rouge_l_scores(predictions, _streams(references))[:, 2]).tolist()}
        return {}  # BLEU and TER are corpus statistics only

    def corpus(self, predictions: list[str], references: list[list[str]]) -> dict[str, float]:
        """The corpus value; for chrF, BLEU and TER also its bootstrap stderr and 95% half-width
        (metrics/bootstrap.py), since they are not means of per-segment scores."""
        if self.name in ("chrf", "chrf++", "bleu", "ter"):
            from .bootstrap import bootstrap

            stats, score = self._statistics(predictions, _streams(references))
            spread = bootstrap(stats, score)
            return {self.name: float(score(stats.sum(0))), f"{self.name}_stderr": spread["stderr"],
                    f"{self.name}_ci95": spread["ci95"]}
        out = {}
        for key, values in self.per_sample(predictions, references).items():
            out.update(mean_and_stderr(key, values))
        return out

    def _statistics(self, predictions: list[str], streams: list[list[str]]):
        """Per-segment statistics [n, k] and the score of their sum, as sacreBLEU defines it."""
        if self.name in ("chrf", "chrf++"):
            from ..kernels.chrf import f_score
            from .chrf import CHRF

            chrf = CHRF(word_order=2 if self.name == "chrf++" else 0)
            stats = chrf.statistics(predictions, streams).astype(np.float64)
            return stats, lambda s: float(f_score(np.asarray(s, np.float64), chrf.order, chrf.beta, chrf.eps_smoothing))
        import sacrebleu

        metric = sacrebleu.BLEU() if self.name == "bleu" else sacrebleu.TER()
        stats = np.array(metric._extract_corpus_statistics(predictions, streams), np.float64)
        return stats, lambda s: float(metric._compute_score_from_stats(s).score)


def build_metric(metric, language: str) -> GenerationMetric:
    name, options = _spec(metric)
    return GenerationMetric(name, options.get("language", language if name == "squad_multilingual" else ""))
