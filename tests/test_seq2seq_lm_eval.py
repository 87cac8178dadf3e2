"""`babeleval lm-eval`'s backend on an encoder-decoder equals lm-eval's HF backend
(backend="seq2seq") per sample: a random mT5 (2+2 layers) with a real SentencePiece tokenizer,
saved as an HF folder with its own untied lm_head, on real multilingual data: 0-shot XCOPA-sw,
xnli-style NusaX (empty context: every option after the prefix token </s>), 5-shot SIB-200,
NusaX-MT translation (generate_until) and XQuAD-hi perplexity (loglikelihood_rolling).

lm-eval's HFLM calls model.tie_weights() after loading, and transformers 5 forces
tie_word_embeddings on every T5 config: HFLM loading such a folder scores with the embedding
as the head, not the checkpoint's lm_head (asserted below, so that a fix upstream shows). The
reference is therefore HFLM over the model transformers' from_pretrained returns, untied."""
import pytest

from lm_eval_samples import ROOT, samples
from tiny_models import build_seq2seq

pytestmark = pytest.mark.full
TASKS = {"xcopa_sw_local": 8, "nusax_xnli_style": 4, "sib200_milu_5shot_swh": 3, "nusax_mt_gen": 3,
         "xquad_hi_rolling": 2}


def values(sample) -> list:
    """A sample's answers: log-likelihoods (and greedy flags), a rolling total, or a text."""
    out = []
    for response in sample["resps"]:
        first = response[0]
        out.extend(first if isinstance(first, (list, tuple)) else [first])
    return out


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("mt5")
    build_seq2seq("mt5", path, real_tokenizer=True, num_decoder_layers=2)  # transformers' generate needs equal stacks
    return path


def test_per_sample_equals_lm_eval_hf_seq2seq(folder, shared_data, monkeypatch):
    import transformers
    from lm_eval.models.huggingface import HFLM

    from babeleval.lm_eval import BabelevalLM
    from babeleval.loading import load_model

    monkeypatch.chdir(ROOT)  # the task files' data_files are relative to the repository root
    lm = BabelevalLM(load_model(str(folder)))
    ours = samples(lm, TASKS)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    model.tie_weights = lambda *args, **kwargs: None  # keep the checkpoint's own head (see the module docstring)
    theirs = samples(HFLM(pretrained=model, tokenizer=transformers.AutoTokenizer.from_pretrained(folder),
                          backend="seq2seq", batch_size=1, device="cpu", dtype="float32"), TASKS)
    for task, count in TASKS.items():
        assert len(ours[task]) == len(theirs[task]) == count
        for a, b in zip(ours[task], theirs[task]):
            for x, y in zip(values(a), values(b), strict=True):
                if isinstance(y, float):
                    assert abs(x - y) <= max(1e-3, 5e-5 * abs(y)), (task, a["doc_id"], x, y)
                else:
                    assert x == y, (task, a["doc_id"], x, y)
            for metric in ("acc", "acc_norm", "exact_match"):
                assert a.get(metric) == b.get(metric), (task, a["doc_id"], metric)
    stats = lm.scorer.stats
    distinct = len({(s["doc_id"], task) for task in ("xcopa_sw_local", "sib200_milu_5shot_swh") for s in ours[task]})
    assert stats.contexts_encoded < stats.requests  # one encoder pass per distinct context, not per option
    assert stats.contexts_encoded >= distinct


def test_lm_eval_hflm_ties_the_t5_head(folder):
    """What HFLM(pretrained=<folder>) does to an mT5 checkpoint under transformers 5: its lm_head
    becomes the input embedding. If this fails, lm-eval or transformers changed: the reference
    above could then load the folder directly."""
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(folder), backend="seq2seq", batch_size=1, device="cpu", dtype="float32")
    assert lm.model.lm_head.weight is lm.model.shared.weight
