"""Embedding engine: batched equals one at a time on real Tatoeba sentences; MiniLM equals
the sentence-transformers recipe on transformers; decoder mean pooling equals
transformers' masked mean of the last hidden state; prefixes; request order."""
import numpy as np
import pytest

from babeleval.engine.embed import Embedder
from babeleval.requests import Embed
from real_models import causal_lm, ours, pad, reference


def sentences(shared_data, n=24):
    lines = []
    for lang in ("hin", "swh", "cmn", "tha"):
        path = shared_data / "tatoeba" / f"tatoeba.{lang}-eng.{lang}"
        lines += path.read_text(encoding="utf-8").splitlines()[: n // 4]
    return lines


def masked_mean(hidden, mask):
    m = mask[..., None].astype(np.float32)
    return (hidden * m).sum(1) / m.sum(1)


@pytest.mark.full
def test_minilm_batched_equals_single_and_transformers(shared_data):
    import torch

    model = ours("all-minilm-l6-v2")
    texts = sentences(shared_data) + ["A man is playing a guitar. " * 80]  # truncated to 512 tokens
    embedder = Embedder(model)
    batched = embedder.embed([Embed(t) for t in texts])
    single = np.stack([Embedder(model, batch_size=1).embed([Embed(t)])[0] for t in texts[:6]])
    np.testing.assert_allclose(batched[:6], single, atol=1e-5)
    assert embedder.compiles.count <= 4
    assert embedder.tokens(["We agree with you."]) == [[101, 2057, 5993, 2007, 2017, 1012, 102]]  # no padding inside
    ids, mask = pad(embedder.tokens(texts))
    with torch.no_grad():
        hidden = reference("all-minilm-l6-v2")(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask))
    want = masked_mean(hidden.last_hidden_state.numpy(), mask)
    want /= np.linalg.norm(want, axis=-1, keepdims=True)
    assert (batched * want).sum(-1).min() >= 0.9999
    np.testing.assert_allclose(np.linalg.norm(batched, axis=-1), 1.0, atol=1e-5)


def test_prefix_is_prepended():
    embedder = Embedder(ours("all-minilm-l6-v2"))
    a = embedder.embed([Embed("Mvua inanyesha leo.", prefix="query: ")])
    b = embedder.embed([Embed("query: Mvua inanyesha leo.")])
    c = embedder.embed([Embed("Mvua inanyesha leo.")])
    np.testing.assert_allclose(a, b, atol=1e-6)
    assert not np.allclose(a, c, atol=1e-3)


@pytest.mark.full
def test_decoder_mean_pooling_equals_transformers(shared_data, tiny_smollm2):
    """A decoder's mean-pooled last states (a random decoder shaped as SmolLM2, its tokenizer)."""
    import torch

    model = ours(str(tiny_smollm2))
    texts = sentences(shared_data, 8)
    got = Embedder(model).embed([Embed(t) for t in texts])
    ids, mask = pad(Embedder(model).tokens(texts))
    with torch.no_grad():
        out = causal_lm(model.source)(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                                        output_hidden_states=True)
    want = masked_mean(out.hidden_states[-1].numpy(), mask)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=2e-3)
