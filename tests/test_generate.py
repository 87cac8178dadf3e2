"""Greedy KV-cache generation equals transformers' batched greedy generate on real
XQuAD-hi prompts with SmolLM2-135M; batched equals one at a time; stop strings, EOS,
max_new_tokens and left truncation. The engine's logic past the first test (packing, decode
groups, shared prefixes, long prompts) runs on a random decoder shaped as SmolLM2 with its
tokenizer (tiny_models.SHAPED), against transformers' generate on the same weights."""
import json

import pytest

from babeleval.placement.devices import num_devices
from babeleval.engine.generate import Generator
from babeleval.requests import Generate, cut_at_stop
from real_models import causal_lm, ours, pad


def xquad_prompts(shared_data, n, max_chars=None):
    data = json.loads((shared_data / "xquad" / "xquad.hi.json").read_text(encoding="utf-8"))
    prompts = [f"Context: {p['context']}\nQuestion: {qa['question']}\nAnswer:"
               for art in data["data"] for p in art["paragraphs"] for qa in p["qas"][:1]]
    if max_chars:
        prompts = [p for p in prompts if len(p) <= max_chars]
    return prompts[:n]


def transformers_generate(generator, prompts, max_new, stop_ids=None):
    """transformers' batched greedy generate on the same (left-truncated) prompt tokens;
    stop_ids: extra token ids that end a row, as EOS does."""
    import torch

    hf = causal_lm(generator.model.source)
    tok = generator.model.tokenizer
    ids, mask = pad([generator.prompt_tokens(p, max_new) for p in prompts], left=True)
    with torch.no_grad():
        out = hf.generate(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), max_new_tokens=max_new,
                          do_sample=False, pad_token_id=tok.eos_id, eos_token_id=[tok.eos_id, *(stop_ids or ())])
    texts = []
    for row in out[:, ids.shape[1]:].tolist():
        if tok.eos_id in row:
            texts.append(tok.decode(row[:row.index(tok.eos_id)]))
        else:  # cut by the length limit: babeleval drops a partial UTF-8 sequence at the end (U+FFFD)
            texts.append(tok.decode(row).rstrip("\ufffd"))
    return texts


@pytest.fixture(scope="module")
def model():
    return ours("smollm2-135m")


@pytest.fixture(scope="module")
def tiny(tiny_smollm2):
    return ours(str(tiny_smollm2))


@pytest.mark.full
def test_equal_transformers_batched_greedy_generate_on_xquad_hi(shared_data, model):
    prompts = xquad_prompts(shared_data, 6) + ["The capital of France is"]
    generator = Generator(model, max_length=160)  # XQuAD contexts are left-truncated to fit
    expected = transformers_generate(generator, prompts, 24)
    got = generator.generate([Generate(p, (), 24) for p in prompts])
    assert got == expected
    assert generator.stats.compiles.count <= 4  # an empty window cache, one packed prefill, its group taken, one decode
    stopped = generator.generate([Generate(p, ("\n",), 24) for p in prompts])
    assert stopped == [cut_at_stop(t, ("\n",)) for t in expected]
    assert any("\n" in t for t in expected)
    assert "Paris" in got[-1]  # the order kept, and the real weights' knowledge


@pytest.mark.full
def test_batched_equals_one_at_a_time_and_order_is_kept(shared_data, tiny):
    prompts = xquad_prompts(shared_data, 5)[::-1] + ["The capital of Japan is", "The capital of France is"]
    requests = [Generate(p, ("\n\n",), 12) for p in prompts]
    batched = Generator(tiny, max_length=128).generate(requests)
    one = Generator(tiny, max_length=128, batch_size=1)
    single = [one.generate([r])[0] for r in requests]
    assert batched == single
    # a small budget: packed lines of 128 tokens (a line per device per call), five 116-token
    # prompts a line each and the two short ones in the room they leave, all in one window's buffer
    # (16 lines of room per device); decoded four rows together
    packed = Generator(tiny, max_length=128, token_budget=200, decode_budget=1024)
    assert packed.generate(requests) == single
    prefills = [shape for shape in packed.stats.compiles.shapes if shape[0].startswith("prefill")]
    decodes = [shape for shape in packed.stats.compiles.shapes if shape[0] == "decode"]
    devices = num_devices()
    lines = {1: 5, 2: 3}.get(devices)  # 2 devices: one holds 3 long prompts and a short one, the other 2 and 1
    window = max(8, devices * 4)  # two decode groups of 4 rows (or a row per device)
    assert [shape[:3] + shape[4:] for shape in prefills] == [("prefill-lines", devices, 128, window)], prefills
    assert lines is None or prefills[0][3] == lines, prefills
    assert {rows for _, rows, *_ in decodes} == {max(4, devices)}, decodes  # 7 prompts in two decode groups
    assert lines is None or packed.stats.prefill_slots == lines * devices * 128


@pytest.mark.full
def test_max_new_tokens_and_left_truncation(shared_data, tiny):
    long_prompt = xquad_prompts(shared_data, 1)[0] * 4
    generator = Generator(tiny, max_length=256)
    assert len(generator.prompt_tokens(long_prompt, 8)) == 256 - 8
    text = generator.generate([Generate(long_prompt, (), 8)])[0]
    assert 0 < len(tiny.tokenizer.encode(text)) <= 9
    assert generator.stats.new_tokens <= 8


def test_cut_at_stop_takes_the_earliest_stop():
    assert cut_at_stop("abc\ndef.", ("." , "\n")) == "abc"
    assert cut_at_stop("abc", ("\n",)) == "abc"


@pytest.mark.full
def test_prompts_sharing_a_one_shot_prefix_prefill_it_once_and_equal_transformers(shared_data, tiny):
    """1-shot en->hi translation (sib200-translate): the instruction and the exemplar are one
    shared prefix, prefilled once; every prompt's continuation equals transformers' greedy."""
    from babeleval.evaluate import prepare_task
    from babeleval.tasks.files import find_task

    units = prepare_task(find_task("sib200-translate:hin_Deva"), shared_data, limit=4)
    enxx = [u for u in units if u.variant.key.endswith("direction=enxx")][0]
    requests = enxx.kind.requests(enxx.items)
    prompts = [r.context for r in requests]
    generator = Generator(tiny)
    got = generator.generate([Generate(p, (), 12) for p in prompts])
    assert got == transformers_generate(generator, prompts, 12)
    s = generator.stats
    assert s.prefixes == 1 and s.prefix_tokens >= 128  # the English and Hindi exemplar
    assert s.prefix_tokens_reused == 4 * s.prefix_tokens
    plain = Generator(tiny, share_prefixes=False)
    assert plain.generate([Generate(p, (), 12) for p in prompts]) == got and plain.stats.prefixes == 0


@pytest.mark.full
def test_prompts_past_2k_tokens_are_read_whole_and_equal_transformers(shared_data, tiny):
    """The three XQuAD-hi prompts longer than 2,016 tokens (2,0xx-3,278): read whole by default
    (the model's 8,192 positions; a 2,048 default once cut them, so the first new token
    differed from transformers'), greedy continuations equal transformers' one prompt at a time."""
    prompts = [p for p in xquad_prompts(shared_data, 1000) if len(tiny.tokenizer.encode(p)) > 2016]
    assert len(prompts) == 3
    generator = Generator(tiny)
    got = generator.generate([Generate(p, (), 8) for p in prompts])
    assert generator.stats.truncated == 0
    assert got == [transformers_generate(generator, [p], 8)[0] for p in prompts]


@pytest.mark.full
def test_questions_of_several_paragraphs_each_continue_their_own_prefix_in_one_batch(shared_data, tiny):
    """XQuAD-style prompts: every paragraph's questions share it as a prefix. Three paragraphs'
    questions decode together, each row attending its own paragraph's cached keys (per-row
    prefixes): one prefill program for all of them, outputs equal transformers' greedy."""
    data = json.loads((shared_data / "xquad" / "xquad.hi.json").read_text(encoding="utf-8"))
    paragraphs = sorted((p for art in data["data"] for p in art["paragraphs"]), key=lambda p: len(p["context"]))[:3]
    prompts = [f"Context: {p['context']}\nQuestion: {qa['question']}\nAnswer:" for p in paragraphs for qa in p["qas"][:3]]
    generator = Generator(tiny)
    got = generator.generate([Generate(p, (), 10) for p in prompts])
    assert got == transformers_generate(generator, prompts, 10)
    s = generator.stats
    assert s.prefixes == 3 and s.prefix_tokens_reused > 0
    programs = sorted(shape[0] for shape in s.compiles.shapes)
    assert programs == ["decode", "prefill", "prefix", "prefix-rows"], s.compiles.shapes
    assert Generator(tiny, share_prefixes=False).generate([Generate(p, (), 10) for p in prompts]) == got


def test_decode_groups_keep_a_prefix_s_prompts_together_by_hand():
    from babeleval.engine.generate import decode_groups

    a, b, c = (1,) * 40, (2,) * 40, (3,) * 48
    prompts = [list(a) + [7] * n for n in (5, 9, 7)] + [list(b) + [8] * 3] * 2 + [list(c) + [9]] * 5 + [[5] * 30, [6] * 60]
    groups = [(c, [5, 6, 7, 8, 9]), (a, [0, 1, 2]), (b, [3, 4]), ((), [10, 11])]
    # 4 rows per group at these lengths (64-slot bucket + 16 new: 4 x 80 = 320 of a 330 budget)
    got = list(decode_groups(groups, prompts, 330, 16, None))
    assert got == [[(i, c) for i in (5, 6, 7, 8)],  # a prefix with more prompts than a group fills one
                   [(9, c)] + [(i, a) for i in (1, 2, 0)],  # the next prefix joins if it fits whole
                   [(3, b), (4, b)],
                   [(11, ()), (10, ())]]  # prompts without a shared prefix: apart, longest first
