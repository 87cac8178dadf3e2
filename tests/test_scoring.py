"""Log-likelihood scoring: batched == one at a time on real XCOPA, equal to transformers
+ torch on SmolLM2, lm-eval's token boundary, the empty-continuation case, and the same
results on 1 and 2 devices."""
import numpy as np
import pytest

from babeleval.engine.requests import Loglikelihood
from babeleval.engine.scoring import Scorer
from babeleval.engine.tokenize import split_pairs
from babeleval.tasks.multiple_choice import aggregate, requests_for, score_questions
from babeleval.tasks.xcopa import load_xcopa
from real_models import ours, reference


@pytest.fixture(scope="module")
def xcopa_sw(shared_data):
    return load_xcopa(shared_data / "xcopa" / "sw" / "test.sw.jsonl", "sw")[:40]


def test_batched_equals_one_at_a_time(xcopa_sw):
    model = ours("smollm2-135m")
    requests = requests_for(xcopa_sw)
    batched = Scorer(model).loglikelihood(requests)
    single = Scorer(model, batch_size=1).loglikelihood(requests[:16])
    assert max(abs(a.logprob - b.logprob) for a, b in zip(batched, single)) <= 1e-4
    assert [a.is_greedy for a in batched[:16]] == [b.is_greedy for b in single]


def test_matches_transformers_loglikelihoods_and_accuracy(xcopa_sw):
    import torch

    model, ref = ours("smollm2-135m"), reference("smollm2-135m")
    questions = xcopa_sw[:20]
    requests = requests_for(questions)
    got = Scorer(model).loglikelihood(requests)
    pairs = split_pairs(model.tokenizer, [(r.context, r.continuation) for r in requests])
    want = []
    with torch.no_grad():
        for context, continuation in pairs:
            ids = torch.tensor([context + continuation])
            logp = torch.log_softmax(ref(input_ids=ids).logits[0], -1)
            positions = range(len(context) - 1, len(context) + len(continuation) - 1)
            want.append(sum(float(logp[p, t]) for p, t in zip(positions, continuation)))
    assert max(abs(g.logprob - w) for g, w in zip(got, want)) <= 1e-3
    ours_acc = aggregate(score_questions(questions, got))["acc"]
    ref_results = [type(g)(w, g.is_greedy, g.num_tokens) for g, w in zip(got, want)]
    assert ours_acc == aggregate(score_questions(questions, ref_results))["acc"]


def test_token_boundary_follows_lm_eval():
    tok = ours("smollm2-135m").tokenizer
    (ctx, cont), = split_pairs(tok, [("Question: 2+2 = ", "4")])
    assert ctx == tok.encode("Question: 2+2 =") and cont == tok.encode("Question: 2+2 = 4")[len(ctx):]
    (ctx, cont), = split_pairs(tok, [("", "Hello")])
    assert ctx == [tok.bos_id] and cont == tok.encode("Hello")


def test_empty_continuation_is_handled():
    result, = Scorer(ours("smollm2-135m")).loglikelihood([Loglikelihood("Some context", "")])
    assert result.logprob == 0.0 and result.num_tokens == 0 and result.is_greedy


def test_options_share_context_and_compiled_programs_stay_few(xcopa_sw):
    scorer = Scorer(ours("smollm2-135m"))
    scorer.loglikelihood(requests_for(xcopa_sw))
    assert scorer.stats.questions == len(xcopa_sw)  # one packed row per question: context computed once
    assert scorer.stats.lines < len(xcopa_sw) / 2  # short questions share lines
    assert scorer.stats.tokens_padded < 1.3 * scorer.stats.tokens_computed
    assert scorer.stats.compiles.count <= 6
