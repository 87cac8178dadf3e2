"""The embedding task kind through the runner: Tatoeba bitext retrieval with a real
sentence embedder (all-MiniLM-L6-v2); the predictions equal a brute-force numpy search over
the same Embedder's vectors, and the weighted F1 follows scikit-learn's definition."""
import numpy as np
import pytest

from babeleval.evaluate import evaluate, prepare_task
from babeleval.requests import Embed
from babeleval.tasks.bitext import weighted_f1
from babeleval.tasks.files import find_task


def test_tatoeba_bitext_equals_brute_force_search(data_slices, tmp_path, monkeypatch):
    from babeleval.engine.embed import Embedder
    from real_models import ours

    model = ours("all-minilm-l6-v2")
    monkeypatch.setenv("BABELEVAL_CACHE", str(tmp_path / "cache"))  # an empty embedding cache
    summary = evaluate(model, ["tatoeba:deu,fra"], tmp_path / "run", data=data_slices, limit=64, progress=False,
                       compile_cache=False)
    task = summary["tasks"]["tatoeba"]
    units = {subset: prepare_task(find_task(f"tatoeba:{subset}"), data_slices, 64) for subset in ("deu", "fra")}
    texts = sorted({t for forward, _ in units.values() for p in forward.items for t in (p.source, p.target)})
    vector = dict(zip(texts, Embedder(model).embed([Embed(t) for t in texts])))  # computed again, in one call
    for subset, (forward, backward) in units.items():
        assert backward.items[0].source == forward.items[0].target  # eng -> xx: the sides swapped
        pairs = forward.items
        source = np.stack([vector[p.source] for p in pairs])
        target = np.stack([vector[p.target] for p in pairs])
        cos = (source / np.linalg.norm(source, axis=1, keepdims=True)) @ (target / np.linalg.norm(target, axis=1, keepdims=True)).T
        want = (np.argmax(cos, axis=1) == np.arange(len(pairs))).mean()
        result = task["variants"][f"{subset}|direction=xx-eng"]
        assert result["accuracy"] == pytest.approx(want) and result["n"] == 64
        l2 = np.sqrt(((source[:, None] - target[None]) ** 2).sum(-1))  # MINERS: L2 on the raw vectors, k = 5
        in_top5 = (np.argsort(l2, axis=1)[:, :5] == np.arange(len(pairs))[:, None]).any(1)
        assert result["accuracy@5"] == pytest.approx(in_top5.mean())
    # English-only MiniLM finds few translations (transformers + torch give the same 7/64 for French)
    assert task["variants"]["deu|direction=xx-eng"]["accuracy"] == 14 / 64
    assert task["variants"]["fra|direction=xx-eng"]["accuracy"] == 7 / 64
    assert task["main_metric"] == "f1" and task["metrics"]["n"] == 256 and task["subsets"]["fra"]["n"] == 128
    # both directions embed the same 256 sentences (255 distinct): the second direction comes from the cache
    assert len(texts) == 255
    assert summary["engine"]["embedding"] == {**summary["engine"]["embedding"], "texts": 512, "computed": 255,
                                              "from_cache": 257}


def test_weighted_f1_follows_scikit_learn():
    # gold 0..3; predicted [0, 0, 2, 1]: label 0 P=1/2 R=1, label 1 P=0 R=0, label 2 P=1 R=1, label 3 P=0 R=0
    assert weighted_f1(np.array([0, 1, 2, 3]), np.array([0, 0, 2, 1])) == pytest.approx((2 / 3 + 0 + 1 + 0) / 4)
    assert weighted_f1(np.array([0, 1]), np.array([0, 1])) == 1.0
