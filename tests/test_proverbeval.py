"""ProverbEval's task files on fixtures in the dataset's published schemas (configs
{lang}_choice_{english,native} with splits english_1..5 / native_1..5, {lang}_fill_blank with
train_1..3 and valid, {lang}_generation with english / native, translate_* with the
"tranalste" / "translate" columns): the reference prompts character for character, the
native labels, the five fixed orders, the corrected and the reference prompt assignment."""
import functools
import json

import pytest

from babeleval.evaluate import prepare_task
from babeleval.tasks.files import find_task

PROVERB = {"amh": "ሰው ሲያረጅ ልጅ ይሆናል", "orm": "Namni dulloome daa'ima ta'a", "tir": "ሰብ ምስ ኣረገ ቆልዓ ይኸውን",
           "gez": "ሰብእ ሶበ ይልህቅ ሕፃነ ይከውን"}
OPTIONS = ["Old age brings a second childhood", "Rain follows thunder", "A wise man listens", "Work before rest"]


def write_rows(folder, split, rows):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data") / "proverbeval"
    for lang, proverb in PROVERB.items():
        for choices in ("english", "native"):
            for order in range(1, 6):
                shown = OPTIONS[order - 1:] + OPTIONS[:order - 1] if order <= 3 else OPTIONS
                gold = {4: 0, 5: 3}.get(order, shown.index(OPTIONS[0]))
                shown = list(shown)
                if order in (4, 5):
                    shown.remove(OPTIONS[0])
                    shown.insert(gold, OPTIONS[0])
                row = {"Proverb": proverb, **dict(zip("ABCD", shown)), "Answer_Letter": "ABCD"[gold]}
                write_rows(root / f"{lang}_choice_{choices}", f"{choices}_{order}", [row])
                translated = {"tranalste" if choices == "english" else "translate": "When a person grows old he becomes a child"}
                write_rows(root / f"translate_{lang}_choice_{choices}", f"{choices}_1", [{**row, **translated}])
        blank = {"Proverb": proverb.rsplit(" ", 1)[0] + " ___", "A": "ይሆናል", "B": "ይሄዳል", "C": "ይበላል", "D": "ይተኛል", "Answer": "A"}
        for split in ("train_1", "train_2", "train_3"):
            write_rows(root / f"{lang}_fill_blank", split, [blank])
        write_rows(root / f"{lang}_fill_blank", "valid", [dict(blank, Proverb=f"ምሳሌ {i} ___") for i in range(5)])
        for split in ("english", "native"):
            write_rows(root / f"{lang}_generation", split, [{"Description": "ሽማግሌ እንደ ሕፃን ነው" if split == "native" else
                                                          "An old person becomes like a child again", "Proverb": proverb}])
    return root.parent


def variants(data, spec):
    return {u.variant.key: u.items for u in prepare_task(find_task(spec), data)}


ENGLISH_T1 = ("\n" + " " * 16 + "You are LLM capable of undersatnding Amharic language. \n"
              + " " * 16 + "I will give you prompt and list of descriptions that have the same meaing.\n"
              + " " * 16 + "return a letter for the correct choice among four choices given\n\n\n\n"
              + " " * 16 + "Amharic Proverb: ሰው ሲያረጅ ልጅ ይሆናል\n\n\n" + " " * 16 + "Choices\n\n"
              + "".join(" " * 16 + f"{label}: {text}\n" for label, text in zip("ABCD", OPTIONS)) + "\n\n"
              + " " * 16 + "Answer:")


def test_english_t1_prompt_and_text_scoring(data):
    by_key = variants(data, "proverbeval-meaning:amh")
    assert len(by_key) == 2 * 3 * 2 * 5 * 2  # prompt language x template x choices x order x scoring
    question = by_key["amh|prompt_language=english|template=t1|choice_language=native|order=4|scoring=text"][0]
    assert question.context == ENGLISH_T1 and question.gold == 0 and question.choices == tuple(OPTIONS)
    d_last = by_key["amh|prompt_language=english|template=t1|choice_language=english|order=5|scoring=text"][0]
    assert d_last.gold == 3 and d_last.options[3] == OPTIONS[0]


def test_english_t3_keeps_the_reference_whitespace(data):
    question = variants(data, "proverbeval-meaning:amh")["amh|prompt_language=english|template=t3|choice_language=native|order=4|scoring=text"][0]
    assert question.context.startswith("\n" + " " * 16 + "Which choice are simmilar \n" + " " * 18 + "\n"
                                       + " " * 16 + "Proverb: ሰው ሲያረጅ ልጅ ይሆናል\n\n\n")


def test_native_prompt_and_native_labels(data):
    question = variants(data, "proverbeval-meaning:amh")["amh|prompt_language=native|template=t1|choice_language=native|order=4|scoring=label"][0]
    assert question.context.startswith("\n" + " " * 16 + "አንተ አማረኛ ቋንቋ መረዳት የምትችል የኮምፒውተር ማሽን ነህ። \n" + " " * 15)
    assert (" " * 16 + "አማረኛ ምሳሌያዊ አነጋገር፦ ሰው ሲያረጅ ልጅ ይሆናል\n") in question.context
    assert question.context.endswith(" " * 16 + "ምርጫ\n\n" + " " * 16 + f"ሀ: {OPTIONS[0]}\n" + " " * 16 + f"ለ: {OPTIONS[1]}\n"
                                     + " " * 16 + f"ሐ: {OPTIONS[2]}\n" + " " * 16 + f"መ: {OPTIONS[3]}\n\n\n" + " " * 16 + "መልስ፦")
    assert question.choices == ("ሀ", "ለ", "ሐ", "መ") and question.gold == 0


def test_oromo_native_prompt_corrected_and_as_the_reference_ran_it(data):
    key = "orm|prompt_language=native|template=t1|choice_language=english|order=1|scoring=text"
    corrected = variants(data, "proverbeval-meaning:orm")[key][0]
    assert "Ati LLM dandeetti afaan Afann Oromo hubachuu qabdudha." in corrected.context
    assert corrected.choices == tuple(OPTIONS[0:])  # Oromo's native labels are A-D; texts scored here
    reference = variants(data, "proverbeval-meaning-reference:orm")[key][0]
    assert "ንስኻ ትግረኛ ዝተብሃለ ቋንቋ" in reference.context  # the Tigrinya prompt, as the reference's orm.yaml calls it
    same = "orm|prompt_language=native|template=t1|choice_language=native|order=1|scoring=text"
    assert variants(data, "proverbeval-meaning-reference:orm")[same][0].context == variants(data, "proverbeval-meaning:orm")[same][0].context


def test_translate_test_uses_the_translated_column(data):
    by_key = variants(data, "proverbeval-translate-test:tir")
    for choices in ("english", "native"):
        question = by_key[f"tir|template=t2|choice_language={choices}|scoring=text"][0]
        assert (" " * 16 + "Proverb: When a person grows old he becomes a child\n") in question.context
    assert "English Proverb: When a person" in by_key["tir|template=t1|choice_language=english|scoring=text"][0].context


def test_fill_blank_prompt_orders_and_five_shot(data):
    by_key = variants(data, "proverbeval-fill-blank:amh")
    question = by_key["amh|order=2"][0]
    assert question.context == ("\n" + " " * 16 + "You are LLM capable of undersatnding Amharic language. \n"
                                + " " * 16 + "Given a proverb can you fill the blank with approprate choice word from the choices.\n"
                                + " " * 16 + "blank is shown with '___'\n\n"
                                + " " * 16 + "Amharic Proverb: ሰው ሲያረጅ ልጅ ___\n\n\n" + " " * 16 + "Choices\n\n"
                                + "".join(" " * 16 + f"{l}: {w}\n" for l, w in zip("ABCD", ["ይሆናል", "ይሄዳል", "ይበላል", "ይተኛል"]))
                                + "\n\n" + " " * 16 + "Answer:   \n" + " " * 13)
    assert set(by_key) == {"amh|order=1", "amh|order=2", "amh|order=3"}
    five = variants(data, "proverbeval-fill-blank-5shot:amh")["amh|order=1"][0]
    assert five.context.count("Answer:   \n" + " " * 13) == 6 and "ምሳሌ 4 ___" in five.context


def test_generation_prompts_and_the_geez_correction(data):
    by_key = variants(data, "proverbeval-generation:gez")
    native = by_key["gez|description=native"][0]
    assert native.context == ("\n" + " " * 12 + "You are LLM capable of undersatnding Amharic language. \n"
                              + " " * 12 + "Based on the detailed description provided in Amharic, generate an appropriate proverb in "
                              "Geez that captures the essence and meaning of the context.\n\n"
                              + " " * 12 + "Amharic Description: ሽማግሌ እንደ ሕፃን ነው\n" + " " * 12 + "Geez Proverb:")
    english = by_key["gez|description=english"][0]
    assert english.context.startswith("\n" + " " * 8 + "You are LLM capable of undersatnding English language. \n")
    assert english.context.endswith("\n" + " " * 8 + "Geez Proverb:") and english.references == (PROVERB["gez"],)
    task = find_task("proverbeval-generation")
    assert task.main_metric == "chrf" and task.variants[0].metrics == ("chrf", "bleu", "ter", "exact_match")


def test_the_proverbeval_suite_names_the_papers_tasks():
    from babeleval.tasks.files import find_tasks

    assert [t.name for t in find_tasks("proverbeval")] == ["proverbeval-meaning", "proverbeval-translate-test",
                                                            "proverbeval-fill-blank", "proverbeval-fill-blank-5shot",
                                                            "proverbeval-generation"]
    assert find_task("proverbeval-meaning").axis_groups["order"]["all D"] == ["5"]


def test_label_and_text_scoring_log_probs_equal_the_scorer_called_directly(data, tmp_path, tiny_smollm2):
    from babeleval.engine.scoring import Scorer
    from babeleval.evaluate import evaluate
    from babeleval.requests import Loglikelihood
    from real_models import ours

    only = {"prompt_language": ["native"], "template": ["t1"], "choice_language": ["native"], "order": ["4"]}
    task = find_task("proverbeval-meaning:amh", overrides={"subsets": {"amh": {"only": only}}})
    assert [v.key for v in task.variants] == [f"amh|prompt_language=native|template=t1|choice_language=native|order=4|scoring={s}"
                                              for s in ("text", "label")]
    model = ours(str(tiny_smollm2))  # the run's requests against the scorer's: any decoder will do
    evaluate(model, [task], tmp_path, data=data, progress=False, compile_cache=False)
    records = {r["variant"]["scoring"]: r for r in map(json.loads, (tmp_path / "samples_proverbeval-meaning.jsonl").open())}
    question = variants(data, "proverbeval-meaning:amh")[task.variants[1].key][0]
    for scoring, continuations in (("label", ["ሀ", "ለ", "ሐ", "መ"]), ("text", OPTIONS)):
        direct = Scorer(model).loglikelihood([Loglikelihood(question.context, " " + c) for c in continuations])
        assert records[scoring]["loglikelihoods"] == pytest.approx([r.logprob for r in direct], abs=1e-4)


REFERENCE = json.loads((__import__("pathlib").Path(__file__).parent / "reference" / "proverbeval_reference_prompts.json")
                       .read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def reference_data(tmp_path_factory):
    """The rows the reference's own prompt functions were called on, in the dataset's layout."""
    root = tmp_path_factory.mktemp("reference") / "proverbeval"
    rows = REFERENCE["rows"]
    for lang in ("amh", "orm", "tir", "gez", "eng"):
        for choices in ("english", "native"):
            for order in range(1, 6):
                write_rows(root / f"{lang}_choice_{choices}", f"{choices}_{order}", [rows["choice"]])
            write_rows(root / f"translate_{lang}_choice_{choices}", f"{choices}_1", [rows["choice"]])
        for split in ("train_1", "train_2", "train_3", "valid"):
            write_rows(root / f"{lang}_fill_blank", split, [rows["fill_blank"]])
        for split in ("english", "native"):
            write_rows(root / f"{lang}_generation", split, [rows["generation"]])
    return root.parent


def ours(data, spec, key):
    return _prepared(data, spec)[key][0].context


@functools.lru_cache(maxsize=None)
def _prepared(data, spec):
    """Each task prepared once for all the prompts read from it (its variants, rendered)."""
    return variants(data, spec)


@pytest.mark.parametrize("name", sorted(REFERENCE["prompts"]))
def test_every_prompt_equals_the_reference_functions_output(reference_data, name):
    """tests/reference/proverbeval_reference_prompts.json: the outputs of EthioProverbEval's own
    doc_to_text functions (commit in its provenance) on one row per task; babeleval's task
    files render the same string, except where babeleval corrects the reference (asserted)."""
    want = REFERENCE["prompts"][name]
    part = name.split()
    if part[0] == "meaning":
        prompt_language, lang, template = part[1:]
        choices = "native"
        got = ours(reference_data, f"proverbeval-meaning:{lang}",
                   f"{lang}|prompt_language={prompt_language}|template={template}|choice_language={choices}|order=1|scoring=text")
    elif part[0] == "translate":
        lang, template = part[1:]
        got = ours(reference_data, f"proverbeval-translate-test:{lang}", f"{lang}|template={template}|choice_language=english|scoring=text")
        if (lang, template) == ("tir", "t2"):  # the reference passes the untranslated proverb here
            want = want.replace(REFERENCE["rows"]["choice"]["Proverb"], REFERENCE["rows"]["choice"]["tranalste"])
    elif part[0] == "fill_blank":
        got = ours(reference_data, f"proverbeval-fill-blank:{part[1]}", f"{part[1]}|order=1")
    else:
        description, lang = part[1:]
        got = ours(reference_data, f"proverbeval-generation:{lang}", f"{lang}|description={description}")
        if lang == "gez":  # the reference asks for an English proverb and calls the Amharic description Geez
            want = want.replace("English Proverb:", "Geez Proverb:").replace("proverb in English", "proverb in Geez")
            if description == "native":
                want = want.replace("Geez Description", "Amharic Description").replace("undersatnding Geez", "undersatnding Amharic") \
                           .replace("provided in Geez", "provided in Amharic")
    assert got == want
