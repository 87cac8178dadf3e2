"""The embedding task kind through the runner: Tatoeba bitext retrieval with a real
sentence embedder (all-MiniLM-L6-v2); the predictions equal a brute-force numpy search over
the same Embedder's vectors, and the weighted F1 follows scikit-learn's definition."""
import numpy as np
import pytest

from babeleval.evaluate import evaluate, prepare_task
from babeleval.requests import Embed
from babeleval.tasks.bitext import weighted_f1
from babeleval.tasks.files import find_task


def test_tatoeba_bitext_equals_brute_force_search(shared_data, tmp_path):
    from babeleval.engine.embed import Embedder
    from real_models import ours

    model = ours("all-minilm-l6-v2")
    summary = evaluate(model, ["tatoeba:deu,fra"], tmp_path, data=shared_data, limit=64, progress=False,
                       compile_cache=False)
    task = summary["tasks"]["tatoeba"]
    for subset in ("deu", "fra"):
        unit, = prepare_task(find_task(f"tatoeba:{subset}"), shared_data, 64)
        pairs = unit.items
        embedder = Embedder(model)
        source = embedder.embed([Embed(p.source) for p in pairs])
        target = embedder.embed([Embed(p.target) for p in pairs])
        cos = (source / np.linalg.norm(source, axis=1, keepdims=True)) @ (target / np.linalg.norm(target, axis=1, keepdims=True)).T
        want = (np.argmax(cos, axis=1) == np.arange(len(pairs))).mean()
        assert task["subsets"][subset]["accuracy"] == pytest.approx(want) and task["subsets"][subset]["n"] == 64
    # English-only MiniLM finds few translations (transformers + torch give the same 7/64 for French)
    assert task["subsets"]["deu"]["accuracy"] == 14 / 64 and task["subsets"]["fra"]["accuracy"] == 7 / 64
    assert task["main_metric"] == "f1" and task["metrics"]["n"] == 128


def test_weighted_f1_follows_scikit_learn():
    # gold 0..3; predicted [0, 0, 2, 1]: label 0 P=1/2 R=1, label 1 P=0 R=0, label 2 P=1 R=1, label 3 P=0 R=0
    assert weighted_f1(np.array([0, 1, 2, 3]), np.array([0, 0, 2, 1])) == pytest.approx((2 / 3 + 0 + 1 + 0) / 4)
    assert weighted_f1(np.array([0, 1]), np.array([0, 1])) == 1.0
