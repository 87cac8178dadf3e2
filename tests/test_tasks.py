"""The task layer without a model: task files (YAML, include, checks), every source
format with its bad rows, rendered prompts character for character, few-shot blocks,
choice orders, targets in every accepted form, and that importing it starts no JAX."""
import json
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, strategies as st

from babeleval.errors import BabelevalError
from babeleval.evaluate import prepare_task
from babeleval.tasks.files import find_task, list_tasks, load_task_file
from babeleval.tasks.multiple_choice import gold_index
from babeleval.tasks.order import expand_orders, permutation, reorder


def write(path, text):
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def items(spec, data, limit=None):
    return [u.items for u in prepare_task(find_task(spec) if isinstance(spec, str) else spec, data, limit)]


def test_xcopa_prompt_equals_lm_eval_text(data_slices):
    (q, *_), = items("xcopa-sw", data_slices, 2)
    assert q.context == "Kifaa kilikuwa kimefungwa kwenye mfuko vibofu kwa sababu"
    assert q.choices == ("kikuwa nyepesi kuvunjika.", "kilikuwa kidogo.") and q.gold == 0 and q.id == "0"


def test_xquad_prompt_and_references(data_slices):
    (p, *_), = items("xquad-hi", data_slices, 2)
    paragraph = json.loads((data_slices / "xquad" / "xquad.hi.json").read_text())["data"][0]["paragraphs"][0]
    question = paragraph["qas"][0]["question"]  # 'पैंथर्स डिफ़ेंस ने कितने अंक दिए?' (with a combining nukta)
    assert p.context == f"Context: {paragraph['context']}\nQuestion: {question}\nAnswer:"
    assert p.context.startswith("Context: पैंथर्स की डिफ़ेन्स ने लीग में केवल 308 अंक दिए") or "308" in p.context
    assert p.references == ("308",) and p.id == "56beb4343aeaaa14008c925b"


def test_two_shot_block_from_the_validation_split(data_slices, tmp_path):
    path = write(tmp_path / "xcopa2.yaml", """
        include: {builtin}/xcopa.yaml
        name: xcopa-2shot
        fewshot: {{n: 2, split: val}}
        """.format(builtin=find_task("xcopa").where.rsplit("/", 1)[0]))
    (q, *_), = items(f"{path}:sw", data_slices, 1)
    assert q.context == ("Mwanaume alifungua bomba la maji kwa hiyo maji yalitiririka kutoka kwenye bomba.\n\n"
                         "Msichana aliona mdudu kwenye uji wake kwa hiyo alipoteza hamu ya kula.\n\n"
                         "Kifaa kilikuwa kimefungwa kwenye mfuko vibofu kwa sababu")


def test_sib200_has_all_24_languages_and_seven_topics(data_slices):
    task = find_task("sib200")
    assert len(task.subsets) == 24 and task.subsets["amh_Ethi"] == {"language": "amh", "script": "Ethi"}
    (q, *_), = items("sib200-amh_Ethi", data_slices, 1)
    assert len(q.choices) == 7 and q.choices[q.gold] == "science/technology" and q.id == "1523"
    assert q.context.startswith("Text: ሚውቴሽን") and q.context.endswith(
        "\nQuestion: Which topic is this text about: science/technology, travel, politics, sports, health, "
        "entertainment, geography?\nAnswer:")


def test_builtin_tasks_load_and_cldr_needs_no_data():
    names = {t.name for t in list_tasks()}
    assert {"cldr-months", "cldr-weekdays", "xcopa", "xcopa-orders", "sib200", "xquad-hi", "tatoeba"} <= names
    (q, *_), *_ = items("cldr-weekdays:am", None, 1)
    assert q.context == 'The English word "Monday" in Amharic is' and len(q.choices) == 7 and q.gold == 0


MC_YAML = """
    name: mine
    kind: multiple_choice
    data: {{path: {path}}}
    prompt: "Q: {{{{ question }}}}\\n{{% for c in choices %}}{{{{ labels[loop.index0] }}}}. {{{{ c }}}}\\n{{% endfor %}}Answer:"
    choices: "[option1, option2, option3]"
    target: answer
    {extra}
    """


def mc_task(tmp_path, rows, extra="", suffix="jsonl"):
    data = tmp_path / f"rows.{suffix}"
    if suffix == "jsonl":
        data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    else:
        data.write_text(rows, encoding="utf-8")
    return load_task_file(write(tmp_path / "mine.yaml", textwrap.dedent(MC_YAML).format(path=data, extra=extra)))


def test_label_scoring_and_native_labels(tmp_path):
    rows = [{"id": "a", "question": "ቀን?", "option1": "ሰኞ", "option2": "ማክሰኞ", "option3": "ረቡዕ", "answer": "ለ"}]
    task = mc_task(tmp_path, rows, "scoring: label\nlabels: [ሀ, ለ, ሐ]")
    (q,), = items(task, None)
    assert q.context == "Q: ቀን?\nሀ. ሰኞ\nለ. ማክሰኞ\nሐ. ረቡዕ\nAnswer:" and q.choices == ("ሀ", "ለ", "ሐ") and q.gold == 1
    kind = prepare_task(task, None)[0].kind
    assert [r.continuation for r in kind.requests([q])] == [" ሀ", " ለ", " ሐ"]


@pytest.mark.parametrize("target", [1, "B", "option2", "1", "two"])
def test_every_target_form_names_the_same_option(target):
    assert gold_index(target, ["one", "two", "three"], ("A", "B", "C"), "f:1") == 1


@pytest.mark.parametrize("target", ["E", "option9", 7, None, "four"])
def test_unknown_target_is_an_error_naming_the_row(target):
    with pytest.raises(BabelevalError, match=r"^f:3: target .* is not an option"):
        gold_index(target, ["one", "two", "three"], ("A", "B", "C"), "f:3")


@given(st.integers(2, 9).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))),
       st.sampled_from(expand_orders(["original", "shuffle:3", "gold-first", "gold-last"])), st.text(max_size=8))
def test_choice_orders_remap_gold(n_gold, order, doc_id):
    n, gold = n_gold
    options = [f"option {i}" for i in range(n)]
    perm = permutation(order, n, gold, 1234, doc_id)
    shown, new_gold = reorder(options, gold, perm)
    assert sorted(perm) == list(range(n)) and shown[new_gold] == options[gold]
    assert perm == permutation(order, n, gold, 1234, doc_id)  # seeded: the same every run
    if order == "gold-first":
        assert new_gold == 0 and [o for o in shown if o != options[gold]] == [o for o in options if o != options[gold]]
    if order == "gold-last":
        assert new_gold == n - 1
    if order == "original":
        assert shown == options


def test_orders_expand_into_subsets_and_shuffles_differ(data_slices):
    task = find_task("xcopa-orders:sw")
    assert task.axes == {"order": ["original", "shuffle-1", "shuffle-2", "shuffle-3", "gold-first", "gold-last"]}
    by_order = dict(zip(task.axes["order"], items(task, data_slices, 40)))
    assert all(q.gold == 0 for q in by_order["gold-first"]) and all(q.gold == 1 for q in by_order["gold-last"])
    for order, questions in by_order.items():
        for q, original in zip(questions, by_order["original"]):
            assert q.options[q.gold] == original.options[original.gold]
    assert [q.order for q in by_order["shuffle-1"]] != [q.order for q in by_order["shuffle-2"]]
    with pytest.raises(BabelevalError, match="choice order 'shufle:2'"):
        expand_orders(["shufle:2"])


def test_prompt_axis_and_signature_changes_with_the_template(tmp_path):
    rows = [{"id": "a", "question": "q", "option1": "x", "option2": "y", "option3": "z", "answer": 0}]
    task = mc_task(tmp_path, rows, 'axes:\n  template:\n    plain: {}\n    terse: {prompt: "{{ question }}?"}')
    assert task.axes == {"template": ["plain", "terse"]}
    plain, terse = task.variants
    assert plain.key == "default|template=plain" and plain.signature != terse.signature
    assert items(task, None)[1][0].context == "q?"


def test_delimited_files_and_their_bad_rows(tmp_path):
    csv_text = "id,question,option1,option2,option3,answer\n1,q,\"a, b\",c,d,A\n2,q,x,y\n"
    with pytest.raises(BabelevalError, match=r"rows\.csv:3: 4 fields, the header has 6"):
        items(mc_task(tmp_path, csv_text, suffix="csv"), None)
    tsv_text = "id\tquestion\toption1\toption2\toption3\tanswer\n1\tq\ta\tb\tc\tC\n"
    (q,), = items(mc_task(tmp_path, tsv_text, suffix="tsv"), None)
    assert q.gold == 2


def test_jsonl_errors_name_file_line_and_field(tmp_path):
    good = {"id": "a", "question": "q", "option1": "x", "option2": "y", "option3": "z", "answer": 0}
    task = mc_task(tmp_path, [good])
    (tmp_path / "rows.jsonl").write_text(json.dumps(good) + '\n{"id": "b", "question": \n', encoding="utf-8")
    with pytest.raises(BabelevalError, match=r"rows\.jsonl:2: malformed JSON"):
        items(task, None)
    missing = {k: v for k, v in good.items() if k != "option3"}
    (tmp_path / "rows.jsonl").write_text(json.dumps(good) + "\n" + json.dumps({**missing, "id": "b"}), encoding="utf-8")
    with pytest.raises(BabelevalError, match=r"rows\.jsonl:2: choices refers to a missing field .*option3.*"
                                             r"the document has: answer, id, option1, option2, question"):
        items(task, None)
    (tmp_path / "rows.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(good), encoding="utf-8")
    with pytest.raises(BabelevalError, match=r"rows\.jsonl:2: duplicate document id 'a' \(first at .*rows\.jsonl:1\)"):
        items(task, None)
    (tmp_path / "rows.jsonl").write_text(json.dumps({**good, "option2": " "}), encoding="utf-8")
    with pytest.raises(BabelevalError, match=r"rows\.jsonl:1: choice 2 of 3 is empty"):
        items(mc_task(tmp_path, [{**good, "option2": " "}], "bad_rows: {empty_choice: error}"), None)
    (tmp_path / "rows.jsonl").write_bytes(json.dumps(good).encode() + b'\n{"id": "\xff"}\n')
    with pytest.raises(BabelevalError, match=r"rows\.jsonl:2: not UTF-8 \(byte 0xff\)"):
        items(task, None)


def test_json_with_examples_key_parquet_and_a_directory(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"context": "ক", "question": "প্রশ্ন?", "answers": [{"text": "উত্তর"}], "lang": "bn"}]
    (tmp_path / "xquad_bn_test.json").write_text(json.dumps({"examples": rows}, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "dir").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "dir" / "test-00000.parquet")
    for data, fmt in ((tmp_path / "xquad_bn_test.json", "{path: %s, key: examples}"), (tmp_path / "dir", "{path: %s}")):
        task = load_task_file(write(tmp_path / "g.yaml", f"""
            name: g
            kind: generation
            data: {fmt % data}
            prompt: "{{{{ context }}}} {{{{ question }}}}"
            target: answers
            metrics: [squad]
            """))
        (p,), = items(task, None)
        assert p.context == "ক প্রশ্ন?" and p.references == ("উত্তর",)
    task = load_task_file(write(tmp_path / "g.yaml", f"""
        name: g
        kind: generation
        data: {{path: {tmp_path / 'xquad_bn_test.json'}, key: data}}
        prompt: "x"
        target: answers
        """))
    with pytest.raises(BabelevalError, match=r"xquad_bn_test\.json: no top-level key 'data' \(found: examples\)"):
        items(task, None)


def test_task_file_checks_name_the_field_and_close_matches(tmp_path):
    base = "name: t\nkind: multiple_choice\ndata: {path: x.jsonl}\nprompt: p\nchoices: c\ntarget: t\n"
    cases = {
        "promt: x\n": r"unknown field 'promt' in the task file \(did you mean prompt",
        "metrics: [acc, accnorm]\n": r"metric 'accnorm' is not one of .* \(did you mean acc_norm",
        "scoring: labels\n": r"scoring 'labels' is not one of sequence, label",
        "fewshot: {n: 2, sampler: firts}\n": r"fewshot sampler 'firts'",
        "choice_orders: [original, reversed]\n": r"choice order 'reversed'",
    }
    for extra, message in cases.items():
        with pytest.raises(BabelevalError, match=message):
            load_task_file(write(tmp_path / "t.yaml", base.replace("prompt: p\n", "prompt: p\n" + extra)
                                 if not extra.startswith("promt") else base + extra))
    with pytest.raises(BabelevalError, match=r"t\.yaml \[default\]: prompt does not parse"):
        load_task_file(write(tmp_path / "t.yaml", base.replace("prompt: p", 'prompt: "{{ x "')))
    with pytest.raises(BabelevalError, match=r"t\.yaml: kind 'mcq' is not one of"):
        load_task_file(write(tmp_path / "t.yaml", base.replace("multiple_choice", "mcq")))
    with pytest.raises(BabelevalError, match=r"unknown task 'xcopaa' \(did you mean xcopa"):
        find_task("xcopaa")
    with pytest.raises(BabelevalError, match=r"unknown subset 'xx'"):
        find_task("xcopa:xx")
    gen = "name: g\nkind: generation\ndata: {path: x.jsonl}\nprompt: p\ntarget: t\nmetrics: [chrf, sqad]\n"
    with pytest.raises(BabelevalError, match=r"unknown metric 'sqad' \(did you mean squad\?\)"):
        load_task_file(write(tmp_path / "g.yaml", gen))


def test_importing_the_package_tasks_and_metrics_starts_no_jax():
    code = ("import sys, babeleval, babeleval.tasks.files, babeleval.evaluate, babeleval.metrics.chrf, "
            "babeleval.metrics.squad, babeleval.metrics.generation; "
            "babeleval.tasks.files.find_task('xcopa'); print('jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_hub_source_through_datasets_on_a_local_copy(tmp_path):
    """The hub path (datasets.load_dataset) on a local dataset folder, as users' hub ids are
    read when online; offline, a hub id that is not cached is one clear error."""
    pytest.importorskip("datasets")
    folder = tmp_path / "ds"
    folder.mkdir()
    (folder / "test.jsonl").write_text(json.dumps({"id": "x1", "source": "ሰላም", "target": "hello"}) + "\n",
                                       encoding="utf-8")
    task = load_task_file(write(tmp_path / "b.yaml", f"""
        name: b
        kind: bitext
        data: {{hub: {{path: {folder}}}}}
        source_text: source
        target_text: target
        """))
    (pair,), = items(task, None)
    assert (pair.id, pair.source, pair.target) == ("x1", "ሰላም", "hello")
    missing = load_task_file(write(tmp_path / "m.yaml", """
        name: m
        kind: bitext
        data: {path: nowhere/test.jsonl, hub: {path: babeleval-tests/not-a-dataset}}
        source_text: source
        target_text: target
        """))
    with pytest.raises(BabelevalError, match=r"nowhere/test\.jsonl: no such file, and hub dataset babeleval-tests/not-a-dataset"):
        items(missing, tmp_path)


def test_parallel_line_files_must_align(tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("uno\n", encoding="utf-8")
    task = load_task_file(write(tmp_path / "p.yaml", f"""
        name: p
        kind: bitext
        data: {{path: [{tmp_path / 'a.txt'}, {tmp_path / 'b.txt'}], format: lines}}
        source_text: source
        target_text: target
        """))
    with pytest.raises(BabelevalError, match=r"parallel files differ in length \(.*a\.txt: 2, .*b\.txt: 1 lines\)"):
        items(task, None)


def test_choice_orders_switch_on_any_multiple_choice_task(data_slices):
    orders = ["original", "shuffle:2", "gold-last"]
    task = find_task("sib200-amh_Ethi", overrides={"choice_orders": orders})
    assert task.axes == {"order": ["original", "shuffle-1", "shuffle-2", "gold-last"]}
    assert [v.key for v in task.variants][-1] == "amh_Ethi|order=gold-last"
    with pytest.raises(BabelevalError, match="choice_orders apply to multiple_choice tasks only"):
        find_task("xquad-hi", overrides={"choice_orders": orders})


LATIN, ETHIOPIC = ("A", "B", "C", "D"), ("ሀ", "ለ", "ሐ", "መ")


@pytest.mark.parametrize("text, labels, want", [
    ("B", LATIN, 1), (" (b) because", LATIN, 1), ("B. ማክሰኞ", LATIN, 1), ("Answer: C", LATIN, 2), ("ለ", ETHIOPIC, 1),
    ("መልስ፦ ሐ", ETHIOPIC, 2), ("It is Tuesday.", LATIN, 1), ("tuesday", ETHIOPIC, 1), ("Monday or Tuesday", LATIN, None),
    ("I don't know", LATIN, None), ("", LATIN, None), ("Apples", LATIN, None)])
def test_verbaliser_maps_answers_to_options(text, labels, want):
    from babeleval.tasks.verbalise import verbalise

    assert verbalise(text, labels, ("Monday", "Tuesday", "Wednesday", "Thursday")) == want


def test_multiple_choice_by_generation_scores_the_verbalised_answer(tmp_path):
    from babeleval.evaluate import kind_for
    from babeleval.requests import Generate, GenerateResult

    rows = [{"id": str(i), "question": "q", "option1": "x", "option2": "y", "option3": "z", "answer": i} for i in range(3)]
    task = mc_task(tmp_path, rows, "scoring: generate\ngeneration: {stop: [\"\\n\"], max_new_tokens: 8}")
    unit, = prepare_task(task, None)
    kind = kind_for(unit.variant)
    requests = kind.requests(unit.items)
    assert requests[0] == Generate("Q: q\nA. x\nB. y\nC. z\nAnswer:", ("\n",), 8, None)
    records = kind.score(unit.items, [GenerateResult(" A", "stop", 1), GenerateResult(" y", "stop", 1),
                                      GenerateResult(" no idea", "length", 8)])
    assert [r["acc"] for r in records] == [1.0, 1.0, 0.0] and [r["no_answer"] for r in records] == [0.0, 0.0, 1.0]
    assert kind.aggregate(records)["no_answer"] == pytest.approx(1 / 3)
    with pytest.raises(BabelevalError, match="by generation reports acc"):
        mc_task(tmp_path, rows, "scoring: generate\nmetrics: [acc_norm]")


def test_main_metric_and_order_axis_clash_are_checked(tmp_path):
    with pytest.raises(BabelevalError, match=r"main_metric .squad_f. is not one of squad_em, squad_f1, squad_ml_em, squad_ml_f1, cut_by_length \(did you mean squad_f1"):
        find_task("xquad-hi", overrides={"main_metric": "squad_f"})
    with pytest.raises(BabelevalError, match="has its own axis 'order'"):
        find_task("proverbeval-fill-blank", overrides={"choice_orders": ["original", "gold-first"]})


def test_sample_draws_the_same_documents_in_every_variant(data_slices):
    from babeleval.tasks.documents import load_documents

    task = find_task("sib200-amh_Ethi", overrides={"choice_orders": ["original", "gold-last"]})
    first, last = [[d.id for d in load_documents(v, data_slices, sample=30)] for v in task.variants]
    assert first == last and len(first) == 30
    categories = {d.fields["category"] for d in load_documents(task.variants[0], data_slices, sample=30)}
    assert len(categories) > 3  # the first 30 rows are all science/technology
    assert {d.fields["category"] for d in load_documents(task.variants[0], data_slices, limit=30)} == {"science/technology"}
