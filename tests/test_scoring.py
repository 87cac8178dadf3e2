"""Log-likelihood scoring: batched == one at a time on real XCOPA questions, duplicates computed
once, packing and compiled-program counts (on a random decoder shaped as SmolLM2: engine logic
works alike on any weights), lm-eval's token boundary with SmolLM2's tokenizer, the
empty-continuation case, the chunked head, and how lines are dealt to devices. (Scores against
transformers and lm-eval on real weights: test_golden, test_lm_eval_parity.)"""
import numpy as np
import pytest

from babeleval.requests import Loglikelihood
from babeleval.engine.scoring import Scorer
from babeleval.engine.tokenize import split_pairs
from babeleval.evaluate import prepare_task
from babeleval.tasks.files import find_task
from real_models import ours


@pytest.fixture(scope="module")
def xcopa_unit(data_slices):
    unit, = prepare_task(find_task("xcopa-sw"), data_slices, limit=40)
    return unit


@pytest.fixture(scope="module")
def xcopa_sw(xcopa_unit):
    return xcopa_unit.items


@pytest.fixture(scope="module")
def shaped(tiny_smollm2):
    return ours(str(tiny_smollm2))  # loaded once per session, shared with the other modules that use it


def test_batched_equals_one_at_a_time(xcopa_unit, xcopa_sw, shaped):
    model = shaped
    requests = xcopa_unit.kind.requests(xcopa_sw)
    batched = Scorer(model).loglikelihood(requests)
    single = Scorer(model, batch_size=1).loglikelihood(requests[:16])
    assert max(abs(a.logprob - b.logprob) for a, b in zip(batched, single)) <= 1e-4
    assert [a.is_greedy for a in batched[:16]] == [b.is_greedy for b in single]


def test_token_boundary_follows_lm_eval():
    tok = ours("smollm2-135m").tokenizer
    (ctx, cont), = split_pairs(tok, [("Question: 2+2 = ", "4")])
    assert ctx == tok.encode("Question: 2+2 =") and cont == tok.encode("Question: 2+2 = 4")[len(ctx):]
    (ctx, cont), = split_pairs(tok, [("", "Hello")])
    assert ctx == [tok.bos_id] and cont == tok.encode("Hello")


def test_empty_continuation_is_handled():
    result, = Scorer(ours("smollm2-135m")).loglikelihood([Loglikelihood("Some context", "")])
    assert result.logprob == 0.0 and result.num_tokens == 0 and result.is_greedy


def test_options_share_context_and_compiled_programs_stay_few(xcopa_unit, xcopa_sw, shaped):
    scorer = Scorer(shaped)
    scorer.loglikelihood(xcopa_unit.kind.requests(xcopa_sw))
    assert scorer.stats.questions == len(xcopa_sw)  # one packed row per question: context computed once
    assert scorer.stats.lines < len(xcopa_sw) / 2  # short questions share lines
    assert scorer.stats.tokens_padded < 1.3 * scorer.stats.tokens_computed
    assert scorer.stats.compiles.count <= 6


def test_head_reduces_like_a_full_log_softmax():
    """engine/head.py: chunked (target logit - logsumexp, arg-max == target) at the scored
    positions equals log_softmax + argmax over all of them; chunks past `count` are not run."""
    import jax
    import jax.numpy as jnp

    from babeleval.engine.head import HEAD_CHUNK, score_positions
    from babeleval.models import Decoder, build_module

    model = ours("smollm2-135m")
    module = build_module(model.config)
    rng = np.random.default_rng(0)
    hidden = jnp.asarray(rng.standard_normal((3 * HEAD_CHUNK, model.config.hidden_size), np.float32))
    count = HEAD_CHUNK + 37
    where = rng.permutation(3 * HEAD_CHUNK).astype(np.int32)
    logits = module.apply({"params": model.params}, hidden[where[:count]], method=Decoder.logits)
    targets = np.asarray(jnp.argmax(logits, -1)).astype(np.int32)
    targets[::3] = rng.integers(0, model.config.vocab_size, len(targets[::3]))  # some not the arg-max
    padded_targets = np.zeros(3 * HEAD_CHUNK, np.int32)
    padded_targets[:count] = targets
    logprob, greedy = jax.jit(lambda p, h, w, t, c: score_positions(module, p, h, w, t, c))(
        model.params, hidden, where, padded_targets, count)
    want = np.take_along_axis(np.asarray(jax.nn.log_softmax(logits, -1)), targets[:, None], -1)[:, 0]
    assert np.abs(np.asarray(logprob[:count]) - want).max() <= 1e-4
    assert np.array_equal(np.asarray(greedy[:count]), np.asarray(jnp.argmax(logits, -1)) == targets)
    assert not np.asarray(logprob[2 * HEAD_CHUNK:]).any() and not np.asarray(greedy[2 * HEAD_CHUNK:]).any()


def test_a_calls_lines_are_one_length_and_only_its_last_batches_are_partial(shaped):
    """Every line of a call has one length (LINE, or the longest row's multiple of 128), so its
    full batches compile one program; only the last lines run in smaller power-of-two batches."""
    from babeleval.engine.buckets import batch_size_for, padded_rows
    from babeleval.engine.radix import Row
    from babeleval.engine.scoring import LINE, fill_lines, line_length

    rng = np.random.default_rng(1)
    rows = [Row(length=int(n + m)) for n, m in rng.integers(5, 200, (300, 2))]
    assert line_length(rows, 2048) == LINE == 512
    assert line_length(rows + [Row(length=700)], 2048) == 768 and line_length(rows + [Row(length=700)], 700) == 700
    lines = fill_lines(rows, 512, 512)
    assert sorted(id(r) for _, line in lines for r in line) == sorted(map(id, rows))
    assert {length for length, _ in lines} == {512} and all(sum(r.length for r in line) <= 512 for _, line in lines)
    assert sum(r.length for r in rows) / (512 * len(lines)) > 0.97  # first-fit decreasing packs them tight
    scorer = Scorer(shaped)
    batches = list(scorer._batches([line for _, line in lines], 512))
    assert [id(line) for batch in batches for line in batch] == [id(line) for _, line in lines]
    size = batch_size_for(512, scorer.token_budget, 1)
    full = [b for b in batches if len(b) == size]
    assert batches[:len(full)] == full and len(full) == len(lines) // size
    tail = batches[len(full):]
    assert sum(padded_rows(len(b), 1) - len(b) for b in tail) <= 1  # the rest in power-of-two pieces
    assert len(lines) % size and tail


def test_identical_requests_are_computed_once(xcopa_unit, xcopa_sw, shaped):
    model = shaped
    requests = xcopa_unit.kind.requests(xcopa_sw[:6])
    unconditional = [Loglikelihood("", r.continuation) for r in requests]  # acc_mutual_info's second half
    repeated = requests + requests[:4] + unconditional + unconditional
    scorer = Scorer(model)
    results = scorer.loglikelihood(repeated)
    alone = Scorer(model).loglikelihood(requests + unconditional)
    n = len(requests)
    assert [r.logprob for r in results[:n]] == [r.logprob for r in alone[:n]]
    assert [r.logprob for r in results[n:n + 4]] == [r.logprob for r in alone[:4]]
    assert [r.logprob for r in results[n + 4:]] == [r.logprob for r in alone[n:]] * 2
    assert scorer.stats.requests == len(repeated) and scorer.stats.duplicates == 4 + len(unconditional)


def test_lines_are_dealt_to_devices_by_scored_positions():
    """A batch's lines go to the device with the fewest scored positions so far (each device
    loops over its own head chunks): nine lines in 2 x 8 rows split 441 / 400, not 800 / 41."""
    from babeleval.engine.scoring import arrange

    scored = [100] * 8 + [41]
    rows = arrange(scored, devices=2, rows_per_device=8)
    assert sorted(rows) == sorted(set(rows)) and all(0 <= r < 16 for r in rows)
    load = [sum(s for s, r in zip(scored, rows) if r // 8 == d) for d in range(2)]
    assert sorted(load) == [400, 441]
    assert arrange([5, 9, 7], devices=1, rows_per_device=4) == [2, 0, 1]  # one device: most first


def test_a_batch_that_branches_keeps_its_shapes_program():
    """A line that branches scores more positions than it has tokens; the head's room starts at
    twice the batch's tokens, so such a batch and a plain one of the same rows and length are
    one compiled shape (xnli-style options over a shared premise compiled two)."""
    from types import SimpleNamespace

    from babeleval.engine.scoring import head_entries

    def line(scored: int):
        return SimpleNamespace(pred=list(range(scored)), targets=[1] * scored, entry_of=[0], owner_of=[0])

    plain = head_entries([line(200), line(256)], [0, 1], 256, 1, 2)
    branching = head_entries([line(300), line(290)], [0, 1], 256, 1, 2)
    assert plain[0].shape == branching[0].shape == (1, 1024) and branching[2][0] == 590
    assert head_entries([line(600), line(600)], [0, 1], 256, 1, 2)[0].shape == (1, 2048)  # more still: doubled


def test_the_main_program_compiles_ahead_in_the_background_once(xcopa_unit, xcopa_sw, shaped):
    """Scorer.compile_ahead compiles the program of a call's full batches on another thread; the
    call then waits for it and compiles nothing itself (a program of another capacity or shape,
    or a call that does not wait, compiles on the calling thread), with the same results.
    max_length 497: a shape no other test compiles, so no cache answers for either thread; the
    questions three times over, with different first words, fill more than one batch."""
    import threading

    import jax

    from babeleval.engine.scoring import head_capacity

    compiled = []

    def listener(name, seconds, **kwargs):
        if name == "/jax/core/compile/backend_compile_duration":
            compiled.append(threading.current_thread().name)

    requests = [Loglikelihood(f"{n} {r.context}", r.continuation) for r in xcopa_unit.kind.requests(xcopa_sw)
                for n in ("One", "Two", "Three")]
    scorer = Scorer(shaped, max_length=497)
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        scorer.compile_ahead()
        ahead = scorer._ahead
        results = scorer.loglikelihood(requests)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert not ahead.is_alive() and scorer._ahead is None
    assert compiled == ["compile-ahead"], compiled
    shards = scorer.mesh.shape["data"]
    assert scorer.stats.compiles.shapes == {("score", 8, 497, head_capacity(8 // shards, 497))}
    plain = Scorer(shaped, max_length=497).loglikelihood(requests)
    assert [r.logprob for r in results] == [r.logprob for r in plain]
