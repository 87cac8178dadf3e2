"""`babeleval run --task lm-eval:FILE` against a plain lm-eval run on the same weights
(lm_eval.simple_evaluate, its HF backend HFLM on the transformers model; a random decoder shaped
as SmolLM2 with its tokenizer: what is checked is the runner, and real SmolLM2 weights against
lm-eval are tests/test_lm_eval_backend.py's and tests/test_lm_eval_parity.py's): XCOPA-sw
through lm-eval's own xcopa functions (`!function`, `include:`), zero-shot and 3-shot (the
few-shot sampler seeded as simple_evaluate seeds it), a run torn by a kill and resumed, and
choice orders on a prompt-listing MCQ (SIB-200 Swahili with the seven topics as lettered
options): the options re-rendered in the prompt, the gold moved with them, the original
order equal to lm-eval's own records; a task whose options are not in the prompt is refused
in one line."""
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from babeleval.cli.main import cli
from babeleval.errors import BabelevalError
from babeleval.evaluate import evaluate, prepare_task
from babeleval.evaluate import find_tasks

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "lm_eval_run"
XCOPA, SIB = FIXTURES / "xcopa_sw_local.yaml", FIXTURES / "sib200_swh_options.yaml"
GROUP = FIXTURES / "xcopa_local.yaml"  # xcopa_sw_local + xcopa_ta_local
N = 24
N_SHOTS = 12  # 3-shot
N_SIB = 12  # x 3 orders x 7 options


@pytest.fixture(autouse=True)
def at_repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # the fixtures name their data as tests/data/..., relative to where lm-eval runs


@pytest.fixture(scope="module")
def model(tiny_smollm2):
    from real_models import ours

    return ours(str(tiny_smollm2))


@pytest.fixture(scope="module")
def hflm(model):
    sys.path.insert(0, str(ROOT / "bench"))
    from lm_eval_peer import lm_eval_model
    from real_models import causal_lm

    return lm_eval_model(model, causal_lm(model.source))


def plain_lm_eval(lm, task_file: Path, limit: int, num_fewshot=None) -> list[dict]:
    import lm_eval
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_defaults=False, include_path=str(FIXTURES))  # not lm-eval's 10k files: 8 s a call
    results = lm_eval.simple_evaluate(model=lm, tasks=[str(task_file)], limit=limit, num_fewshot=num_fewshot,
                                      log_samples=True, batch_size=8, task_manager=manager)
    (samples,) = results["samples"].values()
    return sorted(samples, key=lambda s: s["doc_id"])


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_same_as_lm_eval(ours_records: list[dict], reference: list[dict]) -> None:
    assert [r["id"] for r in ours_records] == [str(s["doc_id"]) for s in reference]
    got = np.array([r["loglikelihoods"] for r in ours_records])
    want = np.array([[float(resp[0][0]) for resp in s["resps"]] for s in reference])
    assert np.all(np.abs(got - want) <= np.maximum(1e-3, 5e-5 * np.abs(want)))
    for name in ("acc", "acc_norm"):
        assert [r[name] for r in ours_records] == [s[name] for s in reference]


@pytest.fixture(scope="module")
def zero_shot(tmp_path_factory, model):
    """The group file: xcopa_sw_local and xcopa_ta_local as two subsets of one task."""
    out = tmp_path_factory.mktemp("zero_shot")
    return out, evaluate(model, [f"lm-eval:{GROUP}"], out, limit=N, progress=False, compile_cache=False)


@pytest.mark.full
def test_xcopa_through_lm_eval_functions_equals_plain_lm_eval(zero_shot, hflm):
    out, summary = zero_shot
    task = summary["tasks"]["lm-eval-xcopa_local"]
    rs = records(out / "samples_lm-eval-xcopa_local.jsonl")
    sw = [r for r in rs if r["subset"] == "xcopa_sw_local"]
    reference = plain_lm_eval(hflm, XCOPA, N)
    assert_same_as_lm_eval(sw, reference)
    assert task["languages"] == {"xcopa_sw_local": {"language": "sw", "script": ""},
                                 "xcopa_ta_local": {"language": "ta", "script": ""}}
    subset = task["subsets"]["xcopa_sw_local"]
    assert subset["acc"] == pytest.approx(np.mean([s["acc"] for s in reference]))
    assert subset["acc_stderr"] == pytest.approx(np.std([s["acc"] for s in reference], ddof=1) / np.sqrt(N))
    assert task["subsets"]["xcopa_ta_local"]["n"] == N and task["metrics"]["n"] == 2 * N
    assert task["metrics"]["acc_norm"] == pytest.approx(np.mean([r["acc_norm"] for r in rs]))


@pytest.mark.full
def test_three_shot_resumed_after_a_kill_equals_plain_lm_eval(tmp_path, hflm, model):
    """lm-eval's random few-shot sampler draws in document order from one seeded generator: a
    resumed run must still give every document the demonstrations a plain run gives it."""
    fewshot = {"fewshot": {"n": 3}}
    evaluate(model, [f"lm-eval:{XCOPA}"], tmp_path, limit=N_SHOTS, progress=False, compile_cache=False, overrides=fewshot)
    samples = tmp_path / "samples_lm-eval-xcopa_sw_local.jsonl"
    full = records(samples)
    lines = samples.read_text().splitlines(keepends=True)
    samples.write_text("".join(lines[:9]) + lines[9][:40])  # killed while writing record 10
    summary = evaluate(model, [f"lm-eval:{XCOPA}"], tmp_path, limit=N_SHOTS, progress=False, compile_cache=False,
                       overrides=fewshot)
    assert summary["tasks"]["lm-eval-xcopa_sw_local"]["resumed"] == 9
    resumed = sorted(records(samples), key=lambda r: int(r["id"]))
    assert [r["prompt_hash"] for r in resumed] == [r["prompt_hash"] for r in full]  # the same demonstrations
    reference = plain_lm_eval(hflm, XCOPA, N_SHOTS, num_fewshot=3)
    assert_same_as_lm_eval(full, reference)
    assert_same_as_lm_eval(resumed, reference)


@pytest.mark.full
def test_changed_task_file_is_not_resumed_into(zero_shot, tmp_path, model):
    """The signature hashes lm-eval's own config dump (the utils function's source included)."""
    out, _ = zero_shot
    folder = tmp_path / "tasks"
    shutil.copytree(FIXTURES, folder)
    shutil.copy(out / "samples_lm-eval-xcopa_local.jsonl", tmp_path / "samples_lm-eval-xcopa_local.jsonl")
    changed = (folder / XCOPA.name).read_text().replace("utils.doc_to_text_sw", "utils.doc_to_text_ta")
    (folder / XCOPA.name).write_text(changed)
    with pytest.raises(BabelevalError, match="written by another configuration of xcopa_sw_local "):
        evaluate(model, [f"lm-eval:{folder / GROUP.name}"], tmp_path, limit=N, progress=False, compile_cache=False)


@pytest.mark.full
def test_choice_orders_on_listed_options(tmp_path, hflm, data_slices, model):
    result = CliRunner().invoke(cli, ["run", "--quiet", "--model", model.source, "--task", f"lm-eval:{SIB}", "--choice-orders",
                                      "original,shuffle:2", "--limit", str(N_SIB), "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rs = records(tmp_path / "samples_lm-eval-sib200_swh_options.jsonl")
    by_order = {o: sorted((r for r in rs if r["variant"]["order"] == o), key=lambda r: int(r["id"]))
                for o in ("original", "shuffle-1", "shuffle-2")}
    assert [len(v) for v in by_order.values()] == [N_SIB] * 3
    original = by_order["original"]
    for order in ("shuffle-1", "shuffle-2"):
        for base, moved in zip(original, by_order[order]):
            assert moved["gold"] == moved["order"].index(base["gold"])  # the gold letter follows its topic
            assert moved["target"] == base["target"]  # the same topic, by text
            assert moved["chosen"] == base["target"] if moved["acc"] else moved["chosen"] != base["target"]
            assert moved["prompt_hash"] != base["prompt_hash"] and moved["loglikelihoods"] != base["loglikelihoods"]
    # the prompt is re-rendered by the task's own template with the options in the new order
    unit = next(u for u in prepare_task(find_tasks(f"lm-eval:{SIB}", overrides={"choice_orders": ["original", "shuffle:1"]})[0],
                                        limit=1) if u.variant.order == "shuffle-1")
    item = unit.items[0]
    listed = [line.split(". ", 1)[1] for line in item.instances[0].args[0].splitlines()[-8:-1]]
    topics = (data_slices / "sib200" / "labels.txt").read_text().split()
    assert item.order != tuple(range(7)) and listed == [topics[i] for i in item.order]
    task = json.loads((tmp_path / "results.json").read_text())["tasks"]["lm-eval-sib200_swh_options"]
    axis = task["axes"]["order"]
    scores = [axis["values"][o]["acc"] for o in ("original", "shuffle-1", "shuffle-2")]
    assert scores == [pytest.approx(np.mean([r["acc"] for r in by_order[o]])) for o in by_order]
    assert axis["spread"] == pytest.approx(max(scores) - min(scores))
    same = np.mean([len({by_order[o][i]["chosen"] for o in by_order}) == 1 for i in range(N_SIB)])
    assert axis["consistency"] == pytest.approx(same)
    assert_same_as_lm_eval(original, plain_lm_eval(hflm, SIB, N_SIB))


def test_choice_orders_refused_where_options_are_not_in_the_prompt():
    with pytest.raises(BabelevalError) as error:
        find_tasks(f"lm-eval:{XCOPA}", overrides={"choice_orders": ["original", "shuffle:2"]})
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("lm-eval task xcopa_sw_local: --choice-orders cannot reorder it: its prompt does not list")


def test_shuffled_orders_keep_the_original_demonstrations(tmp_path):
    """Belebele's few-shot: first_n over the evaluated split, the evaluated document left out.
    A permuted document must leave out its original, not be shown its own question."""
    folder = tmp_path / "tasks"
    shutil.copytree(FIXTURES, folder)
    (folder / "sib_shots.yaml").write_text(f"include: {SIB.name}\ntask: sib200_swh_shots\nfewshot_split: test\n"
                                           "fewshot_config:\n  sampler: first_n\nnum_fewshot: 2\n")
    task = find_tasks(f"lm-eval:{folder / 'sib_shots.yaml'}", overrides={"choice_orders": ["original", "shuffle:2"]})[0]
    units = prepare_task(task, limit=3)
    for i in range(3):
        contexts = [u.items[i].instances[0].args[0] for u in units]
        text = units[0].items[i].doc["text"]
        assert [c.count(text) for c in contexts] == [1, 1, 1]
        assert len({c.rsplit("\n\n", 1)[0] for c in contexts}) == 1  # the same two demonstrations


def test_a_skipped_document_still_takes_its_few_shot_draw(monkeypatch):
    """--bad-rows skip leaves a document out; lm-eval scores it, drawing its demonstrations from
    the seeded sampler: the documents after it must still get the plain run's demonstrations."""
    import babeleval.lm_eval.tasks as lm_eval_task

    spec, shots = f"lm-eval:{XCOPA}", {"fewshot": {"n": 3}}
    full = prepare_task(find_tasks(spec, overrides=shots)[0], limit=6)[0].items
    monkeypatch.setattr(lm_eval_task, "_problems", lambda v, doc, log, origin: None if origin.endswith(" 2") else ())
    kept = prepare_task(find_tasks(spec, overrides=shots)[0], limit=6)[0].items
    assert [i.id for i in kept] == ["0", "1", "3", "4", "5"]
    assert [i.instances[0].args for i in kept] == [i.instances[0].args for i in full if i.id != "2"]
