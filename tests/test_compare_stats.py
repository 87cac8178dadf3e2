"""The paired tests of `babeleval compare` against their references, on fixed seeded data:
McNemar's exact p against scipy's binomial test, the paired bootstrap of a mean against an
independent numpy computation (weights per resample, not gathered rows), the paired
bootstrap of chrF and BLEU against sacreBLEU's own paired bootstrap test, Holm and
Benjamini-Hochberg against statsmodels, with cells not tested left out of the family."""
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest
from statsmodels.stats.multitest import multipletests

from babeleval.compare.stats import adjust, mcnemar_exact, mcnemar_interval, paired_bootstrap

EXAMPLES = Path(__file__).parents[1] / "examples"


def _pairs():
    rng = np.random.default_rng(7)
    for n, pa, pb in ((30, 0.5, 0.5), (100, 0.55, 0.45), (500, 0.62, 0.50), (2000, 0.51, 0.50), (60, 0.9, 0.2)):
        a = (rng.random(n) < pa).astype(float)
        b = np.where(rng.random(n) < 0.6, a, (rng.random(n) < pb).astype(float))  # correlated, as two models are
        yield a, b


def test_mcnemar_equals_scipy_binomial_test():
    for a, b in _pairs():
        got = mcnemar_exact(a, b)
        assert got["only_a"] == np.sum((a == 1) & (b == 0)) and got["only_b"] == np.sum((a == 0) & (b == 1))
        expected = binomtest(got["only_a"], got["only_a"] + got["only_b"], 0.5).pvalue
        assert got["p"] == pytest.approx(expected, rel=1e-12, abs=0)
    # by hand: 10 vs 2 discordant, p = 2 (C(12,0) + C(12,1) + C(12,2)) / 2^12
    a, b = np.r_[np.ones(10), np.zeros(2), np.ones(5)], np.r_[np.zeros(10), np.ones(2), np.ones(5)]
    assert mcnemar_exact(a, b)["p"] == pytest.approx(2 * (1 + 12 + 66) / 4096, rel=1e-15)
    assert mcnemar_exact(a * 100, b * 100)["only_a"] == 10  # exact match's 0/100
    assert mcnemar_exact(a, a)["p"] == 1.0
    for n, gap in ((20_000, 150), (150_000, 500)):  # exact integers; scipy's incomplete beta past 100,000
        a = np.r_[np.ones(n // 2 - gap), np.zeros(n // 2 + gap)]
        assert mcnemar_exact(a, 1 - a)["p"] == pytest.approx(binomtest(n // 2 - gap, n, 0.5).pvalue, rel=1e-12)


def test_mcnemar_interval_inverts_the_exact_test():
    """Clopper-Pearson (scipy's exact proportion_ci) on the discordant questions, scaled: it
    excludes zero exactly when McNemar's p < 0.05."""
    rng = np.random.default_rng(9)
    checked = {True: 0, False: 0}
    for n in rng.integers(20, 600, 300):
        a = (rng.random(n) < 0.5).astype(float)
        b = np.where(rng.random(n) < 0.5, a, (rng.random(n) < rng.uniform(0.2, 0.8)).astype(float))
        exact = mcnemar_exact(a, b)
        low, high = mcnemar_interval(exact["only_a"], exact["only_b"], n)
        discordant = exact["only_a"] + exact["only_b"]
        if discordant:
            ci = binomtest(exact["only_a"], discordant, 0.5).proportion_ci(0.95, method="exact")
            assert (low, high) == pytest.approx((discordant * (2 * ci.low - 1) / n, discordant * (2 * ci.high - 1) / n),
                                                abs=1e-12)
        assert low <= a.mean() - b.mean() <= high
        excludes = low > 0 or high < 0
        assert excludes == (exact["p"] < 0.05)
        checked[excludes] += 1
    assert min(checked.values()) > 20  # both outcomes occur in the draw
    assert mcnemar_interval(0, 0, 50) == (0.0, 0.0)
    # A wins all 5 discordant questions: the upper end is 5/50, the lower end 0.025 ** (1/5) scaled
    assert mcnemar_interval(5, 0, 50) == pytest.approx((5 * (2 * 0.025 ** (1 / 5) - 1) / 50, 0.1), abs=1e-12)
    assert mcnemar_interval(0, 5, 50) == pytest.approx((-0.1, -5 * (2 * 0.025 ** (1 / 5) - 1) / 50), abs=1e-12)


def _bootstrap_by_weights(a, b, resamples, seed):
    """The same resamples, computed another way: per resample the count of each question."""
    indices = np.random.default_rng(seed).choice(len(a), size=(resamples, len(a)), replace=True)
    counts = np.stack([np.bincount(row, minlength=len(a)) for row in indices]).astype(float)
    diffs = (counts @ a - counts @ b) / len(a)
    observed = a.mean() - b.mean()
    beyond = np.sum(np.abs(diffs - observed) >= abs(observed))  # the shift test, two-sided
    return observed, np.percentile(diffs, [2.5, 97.5]), (beyond + 1) / (resamples + 1)


@pytest.mark.parametrize("chunk", [1 << 22, 4096])  # one block of resamples; many (bounded memory)
def test_paired_bootstrap_of_a_mean_equals_independent_computation(chunk, monkeypatch):
    from babeleval.compare import stats

    monkeypatch.setattr(stats, "CHUNK", chunk)
    rng = np.random.default_rng(3)
    for n, shift in ((40, 0.0), (200, 4.0), (500, 1.5)):
        a = np.clip(rng.normal(60, 25, n), 0, 100)  # F1-like per-question scores
        b = np.clip(a - shift + rng.normal(0, 15, n), 0, 100)
        got = paired_bootstrap(a, b, resamples=2000, seed=11)
        observed, (low, high), p = _bootstrap_by_weights(a, b, 2000, 11)
        assert got["difference"] == pytest.approx(observed, abs=1e-12)
        assert (got["low"], got["high"]) == pytest.approx((low, high), abs=1e-9)
        assert got["p"] == p  # exact: the same resamples, the same count
    assert paired_bootstrap(a, a, resamples=500)["p"] == 1.0


def test_paired_bootstrap_of_chrf_and_bleu_equals_sacrebleu():
    """Real generations (SmolLM2 translating into English, 30 sentences) against a second
    system (each reference less its last word): the joint resamples give sacreBLEU's paired
    bootstrap numbers (the system's resampled mean and 95% half-width), and p is the shift
    test computed from sacreBLEU's own per-resample scores."""
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest, estimate_ci

    from babeleval.compare.paired import statistics
    from babeleval.compare.stats import resample_indices, resampled

    records = [json.loads(line) for line in (EXAMPLES / "sib200-translate-smollm2" /
                                             "samples_sib200-translate.jsonl").read_text().splitlines()]
    base = [r for r in records if r["variant"]["direction"] == "xxen"]
    other = [{**r, "prediction": " ".join(r["references"][0].split()[:-1])} for r in base]
    references = [[r["references"][0] for r in base]]
    indices = resample_indices(len(base), 1000, 12345)
    for name, metric in (("chrf", CHRF()), ("bleu", BLEU())):
        systems = [("base", [r["prediction"] for r in base]), ("other", [r["prediction"] for r in other])]
        _, results = PairedTest(systems, {name: metric}, references, test_type="bs", n_samples=1000)()
        base_result, other_result = results[next(k for k in results if k != "System")]
        stats_other, score = statistics(other, name, "corpus")
        stats_base, _ = statistics(base, name, "corpus")
        got = paired_bootstrap(stats_other, stats_base, score, resamples=1000, seed=12345)
        assert got["difference"] == pytest.approx(other_result.score - base_result.score, abs=1e-9)
        theirs_ci = (other_result.mean, other_result.ci)  # computed in float32 by sacreBLEU
        assert estimate_ci(resampled(stats_other, indices, score)) == pytest.approx(theirs_ci, rel=1e-5)
        theirs = [np.array([metric._compute_score_from_stats(s.sum(0)).score
                            for s in np.array(metric._extract_corpus_statistics(hyps, references), "float32")[indices]])
                  for _, hyps in systems]
        diffs, observed = theirs[1] - theirs[0], other_result.score - base_result.score
        assert got["p"] == (np.sum(np.abs(diffs - observed) >= abs(observed)) + 1) / 1001
        assert (got["low"], got["high"]) == pytest.approx(tuple(np.percentile(diffs, [2.5, 97.5])), rel=1e-6)


@pytest.mark.parametrize("method,reference", [("holm", "holm"), ("bh", "fdr_bh")])
def test_corrections_equal_statsmodels(method, reference):
    rng = np.random.default_rng(5)
    for m in (1, 2, 5, 12, 40):
        p = np.round(rng.random(m) ** 3, 3)  # rounded: ties, as McNemar p-values have
        assert adjust(list(p), method) == pytest.approx(list(multipletests(p, method=reference)[1]), abs=1e-15)
    with_gaps = [0.01, None, 0.04, 0.03, None]
    tested = multipletests([0.01, 0.04, 0.03], method=reference)[1]
    assert adjust(with_gaps, method) == pytest.approx([tested[0], None, tested[1], tested[2], None])
    assert adjust([0.01, 0.2], "none") == [0.01, 0.2]


def test_knn_macro_f1_of_summed_label_counts_equals_sklearn():
    """multilingual-e5's kNN predictions on NusaX (real records): on every resample the
    macro F1 of the summed one-hot counts is sklearn's over the resampled questions."""
    import gzip

    from sklearn.metrics import f1_score

    from babeleval.compare.paired import metric_kind, statistics

    lines = gzip.open(EXAMPLES / "miners-e5" / "samples_nusax-knn.jsonl.gz", "rt", encoding="utf-8").read().splitlines()
    records = [r for r in map(json.loads, lines) if r["key"] == "javanese|setting=monolingual"]
    assert metric_kind(records, "macro_f1@5", "nusax-knn") == "labels"
    assert metric_kind(records, "accuracy@5", "nusax-knn") == "binary"
    stats, score = statistics(records, "macro_f1@5", "labels")
    gold, predicted = np.array([r["gold"] for r in records]), np.array([r["prediction@5"] for r in records])
    for row in np.random.default_rng(1).choice(len(records), size=(30, len(records))):
        assert score(stats[row].sum(0)) == pytest.approx(f1_score(gold[row], predicted[row], average="macro",
                                                                  zero_division=0), abs=1e-12)
    accuracy, _ = statistics(records, "accuracy@5", "binary")
    assert accuracy[:, 0].tolist() == [float(g == p) for g, p in zip(gold, predicted)]


def test_importing_compare_and_export_starts_no_jax():
    import subprocess
    import sys

    code = ("import sys, babeleval.compare, babeleval.compare.output, babeleval.compare.paired, babeleval.export; "
            "print('jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("top", [1.0, 100.0])  # acc; exact match counted 0/100
def test_difference_inside_its_interval_when_one_run_is_never_right_alone(top):
    """Only a is ever right alone (1 question of 20): the interval ends exactly at the difference,
    which two rounded means (0.55 - 0.5 = 0.050000000000000044) once put outside it."""
    from babeleval.compare.paired import test as paired_test

    a = [{"acc": top}] * 11 + [{"acc": 0.0}] * 9
    b = [{"acc": top}] * 10 + [{"acc": 0.0}] * 10
    d = paired_test(a, b, "acc", "binary")
    assert d["low"] <= d["difference"] <= d["high"] and d["difference"] == d["high"] == pytest.approx(0.05 * top)
    d = paired_test(b, a, "acc", "binary")
    assert d["low"] <= d["difference"] <= d["high"] and d["difference"] == d["low"] == pytest.approx(-0.05 * top)
