"""Requests sharing token prefixes share rows (engine/radix.py): on real xnli-style whole-option
requests (SIB-200's parallel sentences in four scripts, lm-eval's empty context: each option
scored after the prefix token alone), log-probs equal every request scored on its own and
transformers, the shared tokens are counted exactly, and the layout's mask is the ancestors. The
model: a random decoder shaped as SmolLM2 with its tokenizer (tiny_models.SHAPED)."""
import csv

import numpy as np
import pytest

from babeleval.engine.radix import LineArrays, radix_rows
from babeleval.engine.scoring import Scorer
from real_models import causal_lm, ours

LANGUAGES = ("hin_Deva", "amh_Ethi", "rus_Cyrl", "swh_Latn")
QUESTIONS = 5  # per language: 20 questions, 60 requests


def tolerance(logp: float) -> float:
    return max(1e-3, 5e-5 * abs(logp))


@pytest.fixture(scope="module")
def model(tiny_smollm2):
    return ours(str(tiny_smollm2))


@pytest.fixture(scope="module")
def whole_options(shared_data, model):
    """(prefix token, whole option) pairs as lm-eval's HF backend forms them for xnli: the premise
    in the language, ", right? Yes|Also|No, ", the English hypothesis."""
    tok = model.tokenizer
    read = lambda lang: list(csv.DictReader(open(shared_data / "sib200" / lang / "test.tsv"), delimiter="\t"))
    english = read("eng_Latn")
    pairs = []
    for lang in LANGUAGES:
        for premise, hypothesis in zip(read(lang)[:QUESTIONS], english[QUESTIONS:2 * QUESTIONS]):
            for word in ("Yes", "Also", "No"):
                pairs.append(([tok.eos_id], tok.encode(f"{premise['text']}, right? {word}, {hypothesis['text']}")))
    return pairs


@pytest.fixture(scope="module")
def shared_run(whole_options, model):
    scorer = Scorer(model)
    return scorer.loglikelihood_tokens(whole_options), scorer.stats


@pytest.mark.full
def test_shared_option_prefixes_equal_each_request_alone(whole_options, shared_run, model):
    got, _ = shared_run
    scorer = Scorer(model)
    alone = [scorer.loglikelihood_tokens([pair])[0] for pair in whole_options[::4]]
    assert scorer.stats.tokens_shared == 0
    for g, a in zip(got[::4], alone):
        assert abs(g.logprob - a.logprob) <= tolerance(a.logprob) and g.is_greedy == a.is_greedy


@pytest.mark.full
def test_tokens_inside_the_shared_prefix_are_scored_as_transformers_does(whole_options, shared_run, model):
    import torch

    got, _ = shared_run
    ref = causal_lm(model.source)
    with torch.no_grad():
        for k in range(0, len(whole_options), 7):
            context, continuation = whole_options[k]
            logp = torch.log_softmax(ref(input_ids=torch.tensor([context + continuation])).logits[0], -1)
            want = float(sum(logp[p, t] for p, t in enumerate(continuation)))
            assert abs(got[k].logprob - want) <= tolerance(want)


@pytest.mark.full
def test_token_accounting_adds_up(whole_options, shared_run):
    _, s = shared_run
    alone = sum(len(c) + len(k) - 1 for c, k in whole_options)
    assert s.tokens_alone == alone
    assert s.tokens_alone == s.tokens_computed - s.prefix_tokens + s.prefix_tokens_reused + s.tokens_shared
    # a trie computes each distinct input prefix once: per question at most, over all at least
    prefixes = lambda pairs: {tuple(c + k)[:i] for c, k in pairs for i in range(1, len(c) + len(k))}
    per_question = sum(len(prefixes(whole_options[q: q + 3])) for q in range(0, len(whole_options), 3))
    assert len(prefixes(whole_options)) <= s.tokens_computed <= per_question
    assert s.tokens_computed < 0.65 * alone  # the options share their premise and ", right?"


def test_layout_is_a_trie_and_scores_every_target_once():
    pairs = [([1, 2], [3, 4, 5]), ([1, 2], [3, 4, 6]), ([1, 2, 3], [4]), ([7, 8], [9])]
    rows = radix_rows(pairs, 64)
    assert [sorted(m.owner for m in r.members) for r in rows] == [[0, 1, 2], [3]]
    line = LineArrays()
    line.add_row(rows[0])
    # inputs 1 2 3 4 (shared by all three) then 5's parent is 4: the three share every input
    assert line.tokens == [1, 2, 3, 4] and line.positions == [0, 1, 2, 3] and line.ends == [4, 4, 4, 4]
    # entries: (2 -> 3), (3 -> 4), (4 -> 5), (4 -> 6): request 2's single target 4 is entry (3 -> 4)
    assert sorted(zip(line.pred, line.targets)) == [(1, 3), (2, 4), (3, 5), (3, 6)]
    per_owner = {}
    for e, o in zip(line.entry_of, line.owner_of):
        per_owner.setdefault(o, []).append((line.pred[e], line.targets[e]))
    assert per_owner == {0: [(1, 3), (2, 4), (3, 5)], 1: [(1, 3), (2, 4), (3, 6)], 2: [(2, 4)]}


def test_branches_see_their_ancestors_only():
    from babeleval.engine.scoring import tree_mask

    rows = radix_rows([([1, 2, 3], [4, 5]), ([1, 2, 3], [6, 7]), ([8, 9, 10, 11], [12])], 64)
    line = LineArrays()
    for row in rows:
        line.add_row(row)
    # the first row: 1 2 3 4 | 6 (branch after 3); the second row: 8 9 10 11
    assert line.tokens == [1, 2, 3, 4, 6, 8, 9, 10, 11]
    mask = np.asarray(tree_mask(np.asarray([line.ends + [0]])))[0]
    sees = {q: [k for k in range(10) if mask[q, k]] for q in range(10)}
    assert sees[3] == [0, 1, 2, 3] and sees[4] == [0, 1, 2, 4] and sees[8] == [5, 6, 7, 8] and sees[9] == [9]


@pytest.mark.full
def test_a_branching_token_scores_more_targets_than_its_line_has_tokens(model):
    """300 one-token options after one 3-token context: one row of 3 tokens, 300 scored entries
    at its last position (more than the 128-token line has slots), each log p of transformers."""
    import torch

    context = model.tokenizer.encode("Jibu ni")
    options = list(range(1000, 1300))
    scorer = Scorer(model)
    got = scorer.loglikelihood_tokens([(context, [t]) for t in options])
    assert scorer.stats.tokens_computed == len(context) and scorer.stats.lines == 1
    with torch.no_grad():
        logp = torch.log_softmax(causal_lm(model.source)(input_ids=torch.tensor([context])).logits[0, -1], -1)
    assert max(abs(g.logprob - float(logp[t])) for g, t in zip(got, options)) <= 1e-4
    assert [g.is_greedy for g in got] == [int(logp.argmax()) == t for t in options]
