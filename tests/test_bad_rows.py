"""bad_rows: rows with two identical options, an empty option or a target naming no option.
The fixture is eight real XCOPA-sw validation rows, three of them spoiled the way real files
are (row 2: both endings the same text, gold the second; row 4: an empty ending; row 6: label
2 of two options). keep scores them exactly as lm-evaluation-harness does (its own
process_results over our log-likelihoods), flags and counts them; skip leaves them out and
counts them; error refuses with the row's file:line (tests/test_bad_input.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from babeleval.cli.main import cli
from babeleval.errors import BabelevalError
from babeleval.tasks.bad_rows import lm_eval_problems
from babeleval.tasks.files import load_task_file

MESSY = Path(__file__).parent / "fixtures" / "bad_rows" / "xcopa_sw_messy.jsonl"
SKIP_ALL = "{duplicate_choices: skip, empty_choice: skip, unknown_target: skip}"
TASK = f"""name: messy
kind: multiple_choice
data: {{path: {MESSY}}}
prompt: "{{{{ premise }}}}"
choices: [choice1, choice2]
target: label
metrics: [acc, acc_norm]
subsets:
  keep: {{language: sw}}
  skip: {{language: sw, bad_rows: {SKIP_ALL}}}
"""
LM_EVAL_TASK = f"""task: messy_lm_eval
dataset_path: json
dataset_kwargs:
  data_files:
    test: {MESSY}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{premise}}}}"
doc_to_choice: "{{{{[choice1, choice2]}}}}"
doc_to_target: label
metric_list:
  - metric: acc
  - metric: acc_norm
"""


def lm_eval_task(folder: Path):
    from lm_eval.tasks import TaskManager

    (folder / "messy_lm_eval.yaml").write_text(LM_EVAL_TASK, encoding="utf-8")
    return TaskManager(include_defaults=False, include_path=str(folder)).load(["messy_lm_eval"])["tasks"]["messy_lm_eval"]


@pytest.mark.full
def test_keep_scores_as_lm_eval_and_skip_counts(tmp_path):
    task = tmp_path / "messy.yaml"
    task.write_text(TASK, encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", "--quiet", "--task", task, "--output", out])
    assert result.exit_code == 0, result.output
    where = lambda line: f"{MESSY}:{line}"
    summary = json.loads((out / "results.json").read_text())["tasks"]["messy"]
    assert summary["bad_rows"] == {
        "keep": {"duplicate_choices": {"kept": 1, "skipped": 0, "first": where(2)},
                 "empty_choice": {"kept": 1, "skipped": 0, "first": where(4)},
                 "unknown_target": {"kept": 1, "skipped": 0, "first": where(6)}},
        "skip": {"duplicate_choices": {"kept": 0, "skipped": 1, "first": where(2)},
                 "empty_choice": {"kept": 0, "skipped": 1, "first": where(4)},
                 "unknown_target": {"kept": 0, "skipped": 1, "first": where(6)}}}
    assert summary["subsets"]["keep"]["n"] == 8 and summary["subsets"]["skip"]["n"] == 5
    warnings = [line for line in result.output.splitlines() if "rows with" in line]
    assert warnings == [f"warning: task messy: 2 rows with {p} (keep 1, skip 1): 1 scored as lm-eval scores them (flagged in "
                        f"their records), 1 skipped; first at {where(n)} (bad_rows: {{{k}: keep|skip|error}} in the task file, or --bad-rows {k}=...)"
                        for p, n, k in (("duplicate choices", 2, "duplicate_choices"), ("empty choice", 4, "empty_choice"),
                                        ("unknown target", 6, "unknown_target"))]
    records = [json.loads(line) for line in (out / "samples_messy.jsonl").read_text().splitlines()]
    keep = {r["id"]: r for r in records if r["subset"] == "keep"}
    skip = {r["id"]: r for r in records if r["subset"] == "skip"}
    assert sorted(skip) == ["0", "2", "4", "6", "7"] and all("bad_row" not in r for r in skip.values())
    assert {i: r.get("bad_row") for i, r in keep.items() if "bad_row" in r} == {
        "1": ["duplicate_choices"], "3": ["empty_choice"], "5": ["unknown_target"]}
    assert keep["1"]["loglikelihoods"][0] == keep["1"]["loglikelihoods"][1] and keep["1"]["acc"] == 0.0
    assert keep["5"]["gold"] is None and keep["5"]["target"] is None and keep["5"]["acc"] == 0.0
    assert {i: keep[i]["loglikelihoods"] for i in skip} == {i: r["loglikelihoods"] for i, r in skip.items()}
    # lm-eval's own process_results over our log-likelihoods: the same acc and acc_norm, row by row
    lm_task = lm_eval_task(tmp_path)
    found = {i: [p for p, _ in lm_eval_problems(lm_task, doc)[0]] for i, doc in enumerate(lm_task.eval_docs)}
    assert {str(i): p for i, p in found.items() if p} == {i: r["bad_row"] for i, r in keep.items() if "bad_row" in r}
    for i, doc in enumerate(lm_task.eval_docs):
        record = keep[str(i)]
        expected = lm_task.process_results(doc, [(ll, greedy) for ll, greedy in zip(record["loglikelihoods"], record["is_greedy"])])
        assert (record["acc"], record["acc_norm"]) == (expected["acc"], expected["acc_norm"]), (i, record, expected)


def test_policies_are_checked_like_other_fields(tmp_path):
    task = tmp_path / "messy.yaml"
    task.write_text(TASK.replace("skip: {language: sw, bad_rows: " + SKIP_ALL + "}",
                                 "skip: {language: sw, bad_rows: {duplicate_choice: skip}}"), encoding="utf-8")
    with pytest.raises(BabelevalError, match=r"unknown field 'duplicate_choice' in bad_rows \(did you mean duplicate_choices"):
        load_task_file(task)
    task.write_text(TASK.replace(SKIP_ALL, "{empty_choice: drop}"), encoding="utf-8")
    with pytest.raises(BabelevalError, match=r"bad_rows empty_choice 'drop' is not one of keep, skip, error"):
        load_task_file(task)


def test_lm_eval_tasks_follow_the_same_policy(tmp_path):
    """`lm-eval:FILE` tasks: kept rows carry their problems, skip leaves them out, error
    refuses, with the same problems as our own task files find."""
    from babeleval.lm_eval.tasks import load_lm_eval_task, prepare_lm_eval

    yaml = tmp_path / "messy_lm_eval.yaml"
    yaml.write_text(LM_EVAL_TASK, encoding="utf-8")

    def prepared(overrides):
        ((_, kind, items),) = prepare_lm_eval(load_lm_eval_task(str(yaml), overrides))
        return kind, {item.id: item.problems for item in items}

    kind, kept = prepared({})
    assert {i: p for i, p in kept.items() if p} == {"1": ("duplicate_choices",), "3": ("empty_choice",),
                                                    "5": ("unknown_target",)} and len(kept) == 8
    assert [origin for _, _, origin in kind.bad_rows.rows] == [f"lm-eval:{yaml} [messy_lm_eval] document {i}" for i in (1, 3, 5)]
    _, skipped = prepared({"bad_rows": {"duplicate_choices": "skip", "unknown_target": "skip"}})
    assert sorted(skipped) == ["0", "2", "3", "4", "6", "7"]
    with pytest.raises(BabelevalError, match=r"document 3: choice 2 of 2 is empty; set bad_rows: \{empty_choice: keep\}"):
        prepared({"bad_rows": {"empty_choice": "error"}})


def test_bad_rows_option_for_every_task(tmp_path):
    """--bad-rows PROBLEM=POLICY,... sets the field for every task (refused before the model loads)."""
    task = tmp_path / "messy.yaml"
    task.write_text(TASK, encoding="utf-8")
    run = lambda value: CliRunner().invoke(cli, ["run", "--quiet", "--task", task, "--output", tmp_path / "out",
                                                 "--bad-rows", value])
    result = run("empty_choice=skip, duplicate_choices=error")
    assert result.exit_code == 2 and f"{MESSY}:2: choices 1 and 2 are the same text" in result.output, result.output
    result = run("duplicate_choices")
    assert result.exit_code == 2 and "expected PROBLEM=POLICY" in result.output


@pytest.mark.parametrize("empty_logprob", [-0.5, 0.0])
def test_empty_option_acc_norm_is_lm_evals_rule(tmp_path, empty_logprob):
    """An empty option's acc_norm divides its log-likelihood by 0 characters, as lm-eval's
    process_results does: -inf for a negative log-likelihood (never chosen), nan for 0 (np.argmax
    picks the first nan, so chosen). Log-likelihoods chosen so that the plausible alternatives
    (dividing by max(chars, 1), or by the delimiter's length) choose otherwise: the real model's
    values on the fixture do not tell them apart."""
    from babeleval.requests import LoglikelihoodResult
    from babeleval.tasks.documents import load_documents
    from babeleval.tasks.multiple_choice import MultipleChoice

    task = tmp_path / "messy.yaml"
    task.write_text(TASK, encoding="utf-8")
    variant = load_task_file(task).variants[0]
    kind = MultipleChoice(variant)
    (question,) = [q for q in kind.prepare(load_documents(variant, None), []) if q.id == "3"]
    assert question.options[1] == "" and question.gold == 1
    lls = [-45.0, empty_logprob]  # choice1 has 43 characters: -1.05 per character
    record = kind.score([question], [LoglikelihoodResult(ll, False, 1) for ll in lls])[0]
    lm_task = lm_eval_task(tmp_path)
    expected = lm_task.process_results(lm_task.eval_docs[3], [(ll, False) for ll in lls])
    assert (record["acc"], record["acc_norm"]) == (expected["acc"], expected["acc_norm"]) == (1.0, float(empty_logprob == 0.0))
