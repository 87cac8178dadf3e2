"""The encoder-decoder engines against transformers + torch on tiny random models: scoring by
lm-eval's seq2seq rules with one encoder pass per distinct context, greedy generation with the
cross-attention keys computed once, encoder mean pooling, and an orbax round trip."""
import numpy as np
import pytest

from babeleval.loading import load_model
from babeleval.requests import Embed, Generate, Loglikelihood
from tiny_models import build_seq2seq


@pytest.fixture(scope="module")
def mt5(tmp_path_factory):
    """A random mT5 (2 encoder, 3 decoder layers, untied head) with a real SentencePiece tokenizer."""
    folder = tmp_path_factory.mktemp("mt5")
    return folder, build_seq2seq("mt5", folder, real_tokenizer=True), load_model(str(folder))


def xcopa_requests(root, n: int = 3) -> list[Loglikelihood]:
    import json

    rows = [json.loads(line) for line in (root / "xcopa" / "sw" / "test.sw.jsonl").read_text().splitlines()[:n]]
    out = []
    for row in rows:
        context = row["premise"].rstrip(".") + (" kwa sababu" if row["question"] == "cause" else " kwa hiyo")
        out += [Loglikelihood(context, " " + row[f"choice{k}"][0].lower() + row[f"choice{k}"][1:]) for k in (1, 2)]
    return out


def reference_logprob(torch_model, tokenizer, context: str, continuation: str, start: int) -> tuple[float, bool]:
    """lm-eval HFLM's seq2seq request, computed by transformers: the context (trailing spaces
    moved) with special tokens to the encoder, the continuation as labels."""
    import torch

    spaces = len(context) - len(context.rstrip())
    context, continuation = context[:len(context) - spaces], context[len(context) - spaces:] + continuation
    ctx = tokenizer(context).input_ids if context else [start]
    cont = tokenizer(continuation, add_special_tokens=False).input_ids
    with torch.no_grad():
        logp = torch_model(input_ids=torch.tensor([ctx]), labels=torch.tensor([cont])).logits[0].log_softmax(-1)
    return float(logp[range(len(cont)), cont].sum()), bool((logp.argmax(-1) == torch.tensor(cont)).all())


def test_scores_equal_transformers_one_encoder_pass_per_context(mt5, data_slices):
    import transformers

    from babeleval.engine.seq2seq_scoring import Seq2SeqScorer

    folder, torch_model, model = mt5
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    requests = xcopa_requests(data_slices) + [Loglikelihood("", " Habari ya dunia"), Loglikelihood("Nina njaa ", "sana")]
    requests.append(requests[0])  # a duplicate: scored once
    scorer = Seq2SeqScorer(model)
    results = scorer.loglikelihood(requests)
    for request, result in zip(requests, results):
        want, greedy = reference_logprob(torch_model, tokenizer, request.context, request.continuation,
                                         tokenizer.eos_token_id)
        assert abs(result.logprob - want) <= max(1e-3, 5e-5 * abs(want)), request
        assert result.is_greedy == greedy
    s = scorer.stats
    assert s.contexts_encoded == 3 + 1 + 1  # three questions' contexts, </s> alone, "Nina njaa"
    assert s.requests == 9 and s.duplicates == 1
    assert s.tokens_alone > s.tokens_computed  # each question's context computed once, not per option


def test_empty_context_follows_lm_eval(mt5):
    """lm-eval's empty context: the prefix token (T5 has no BOS: </s>) as the encoder's input,
    the continuation without special tokens; a continuation that starts with that token gives it
    to the encoder instead."""
    from babeleval.engine.tokenize import seq2seq_pairs

    _, _, model = mt5
    tok = model.tokenizer
    eos = tok.eos_id
    body = tok.encode("Habari")
    assert seq2seq_pairs(tok, [("", "Habari")]) == [([eos], body)]
    assert seq2seq_pairs(tok, [("Swali:  ", "jibu")])[0][0] == tok.encode_batch(["Swali:"], special_tokens=True)[0]
    assert seq2seq_pairs(tok, [("Swali:  ", "jibu")])[0][1] == tok.encode("  jibu")


@pytest.mark.parametrize("family", ["mt5", pytest.param("umt5", marks=pytest.mark.full),
                                    pytest.param("m2m_100", marks=pytest.mark.full)])
def test_greedy_generation_equals_transformers(family, mt5, tmp_path):
    """transformers' generate without a cache (its cache assumes as many decoder as encoder
    layers; these have 2 and 3), up to EOS or 12 new tokens, several prompts in one batch."""
    import torch

    from babeleval.engine.seq2seq_generate import Seq2SeqGenerator

    if family == "mt5":
        _, torch_model, model = mt5
        prompts = ["Tafsiri kwa Kiingereza: Paka amelala.", "Nina njaa", "Swali: Mji mkuu wa Kenya ni upi? Jibu:"]
    else:
        torch_model = build_seq2seq(family, tmp_path)
        model = load_model(str(tmp_path))
        prompts = ["w5 w6 w7 w8", "w9 w10", "w11 w12 w13 w14 w15 w16 w17 w18 w19 w20"]
    generator = Seq2SeqGenerator(model, conventions=False)  # prompts as they are (an M2M100 too: tests/test_translation.py)
    results = generator.generate_results([Generate(p, max_new_tokens=12) for p in prompts])
    tok = model.tokenizer
    for prompt, result in zip(prompts, results):
        ids = tok.encode_batch([prompt], special_tokens=True)[0]
        with torch.no_grad():
            out = torch_model.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False, num_beams=1,
                                       use_cache=False)[0].tolist()[1:]
        reason = "eos" if tok.eos_id in out else "length"
        out = out[:out.index(tok.eos_id)] if tok.eos_id in out else out
        assert result.text == tok.decode(out).rstrip("\ufffd") and result.stop_reason == reason
    assert generator.stats.requests == 3 and generator.stats.prompt_tokens > 0


def test_encoder_mean_pooling_equals_transformers(mt5):
    import torch

    from babeleval.engine.embed import Embedder

    folder, torch_model, model = mt5
    texts = ["Paka amelala juu ya meza.", "Habari", "Kila mtu ana haki ya kuishi, uhuru na usalama wa nafsi yake."]
    got = Embedder(model).embed([Embed(t) for t in texts])
    enc = [model.tokenizer.encode_batch([t], special_tokens=True)[0] for t in texts]
    for vector, ids in zip(got, enc):
        with torch.no_grad():
            hidden = torch_model.get_encoder()(input_ids=torch.tensor([ids])).last_hidden_state[0]
        assert np.abs(vector - hidden.mean(0).numpy()).max() <= 1e-4


def test_orbax_checkpoint_round_trip(mt5, tmp_path, data_slices):
    from babeleval.engine.seq2seq_scoring import Seq2SeqScorer

    _, _, model = mt5
    saved = load_model(str(model.save(tmp_path / "ckpt")))
    assert saved.config == model.config
    requests = xcopa_requests(data_slices, 1)
    a, b = Seq2SeqScorer(model).loglikelihood(requests), Seq2SeqScorer(saved).loglikelihood(requests)
    assert [r.logprob for r in a] == [r.logprob for r in b]


def test_a_hub_layout_folder_loads(mt5, tmp_path):
    """What google/mt5-* and bigscience/mt0-* hold: pytorch_model.bin and spiece.model, no
    safetensors and no tokenizer.json. Weights come from the pickle (weights_only), the
    tokenizer is converted by transformers; both equal the safetensors folder's."""
    import shutil

    import torch
    from safetensors.torch import load_file

    folder, _, model = mt5
    for name in ("config.json", "spiece.model", "tokenizer_config.json"):
        shutil.copy(folder / name, tmp_path / name)
    torch.save(load_file(folder / "model.safetensors"), tmp_path / "pytorch_model.bin")
    hub = load_model(str(tmp_path))
    assert hub.config == model.config
    assert np.array_equal(hub.params["lm_head"]["kernel"], model.params["lm_head"]["kernel"])
    text = ["Kila mtu ana haki ya kuishi.", "Paka amelala juu ya meza"]
    assert hub.tokenizer.encode_batch(text, special_tokens=True) == model.tokenizer.encode_batch(text, special_tokens=True)


def test_babeleval_run_answers_every_task_kind(mt5, data_slices, tmp_path):
    """`babeleval run`'s evaluate on an mT5 folder: multiple choice (XCOPA), generation (SIB-200
    translation) and bitext retrieval (Tatoeba) in one run; results.json names the encoder-decoder
    and its parts, and the engine counts one encoder pass per XCOPA question."""
    import json

    from babeleval.evaluate import evaluate

    folder, _, model = mt5
    evaluate(model, ["xcopa:sw", "sib200-translate:swh_Latn", "tatoeba:swh"], tmp_path, data=data_slices, limit=3,
             progress=False)
    summary = json.loads((tmp_path / "results.json").read_text())
    assert summary["model"]["kind"] == "seq2seq" and summary["model"]["arch"] == "mt5"
    assert set(summary["model"]["params_by_part"]) == {"embed", "encoder", "decoder", "lm_head"}
    assert sum(summary["model"]["params_by_part"].values()) == summary["model"]["params"]
    engine = summary["engine"]
    assert engine["scoring"]["requests"] == 6 and engine["scoring"]["contexts_encoded"] == 3
    assert engine["generation"]["requests"] == 6 and engine["embedding"]["computed"] > 0
    assert set(summary["tasks"]) == {"xcopa", "sib200-translate", "tatoeba"}
