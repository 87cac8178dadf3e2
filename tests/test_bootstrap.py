"""Bootstrap standard errors of corpus metrics equal sacreBLEU's own resampling (same seed,
same draws): the stderr is the std of sacreBLEU's resampled scores, ci95 its half-width.
Real outputs: SmolLM2's English->Hindi translations of SIB-200 (examples/)."""
import json
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
from sacrebleu.significance import _bootstrap_resample

from babeleval.metrics.generation import GenerationMetric
from babeleval.tasks.generation import Generation

SAMPLES = Path(__file__).parents[1] / "examples" / "sib200-translate-smollm2" / "samples_sib200-translate.jsonl"


@pytest.fixture(scope="module")
def outputs():
    rows = [json.loads(line) for line in SAMPLES.read_text(encoding="utf-8").splitlines()]
    return [r["prediction"] for r in rows], [r["references"] for r in rows]


@pytest.mark.parametrize("name, reference", [("chrf", sacrebleu.CHRF()), ("chrf++", sacrebleu.CHRF(word_order=2)),
                                             ("bleu", sacrebleu.BLEU()), ("ter", sacrebleu.TER())])
def test_bootstrap_matches_sacrebleu(outputs, name, reference):
    hypotheses, references = outputs
    ours = GenerationMetric(name).corpus(hypotheses, references)
    streams = [[r[0] for r in references]]
    theirs = reference.corpus_score(hypotheses, streams, n_bootstrap=1000)
    assert ours[name] == pytest.approx(theirs.score, abs=1e-9)
    assert ours[f"{name}_ci95"] == pytest.approx(theirs._ci, rel=1e-5)
    _, scores = _bootstrap_resample(reference._extract_corpus_statistics(hypotheses, streams), reference, 1000)
    assert ours[f"{name}_stderr"] == pytest.approx(np.std([s.score for s in scores], ddof=1), rel=1e-5)
    assert ours[f"{name}_stderr"] > 0.1  # 60 segments: chrF moves by about a point


def test_generation_results_carry_bootstrap_not_sentence_mean_stderr(outputs):
    from babeleval.tasks.files import find_task

    hypotheses, references = outputs
    task = Generation(find_task("sib200-translate").variants[0])
    records = [{"prediction": h, "references": r, "stop_reason": "eos", "new_tokens": 1} for h, r in zip(hypotheses, references)]
    out = task.aggregate(records)
    assert out["chrf_stderr"] == pytest.approx(GenerationMetric("chrf").corpus(hypotheses, references)["chrf_stderr"])
    assert "stderr:bootstrap:1000|seed:12345" in task.signatures()["chrf"]
