"""Translation models run as MT researchers run them: NLLB-200 and M2M100 read `[source
language] text </s>` and start their output with the target language's token, MADLAD-400 reads
`<2xx> text`; no prompt, no demonstrations. Tiny random models of each (tests/translation_models.py)
run sib200-translate's real FLORES sentences (tests/data/sib200) through `evaluate`, and every
prediction equals transformers' generate with the tokenizer's src_lang and forced_bos_token_id
(MADLAD: the tag in the text); the same sentence with the wrong target language, or none,
gives another output, so a convention broken on purpose fails here."""
import json

import pytest

from babeleval.errors import BabelevalError
from babeleval.requests import cut_at_stop
from translation_models import build_translation_model

# NLLB in the default tier; M2M100 (transformers' own slow tokenizer) and MADLAD in the full tier
FAMILIES = ("nllb", pytest.param("m2m100", marks=pytest.mark.full), pytest.param("madlad", marks=pytest.mark.full))
TASK = "sib200-translate:hin_Deva"
LIMIT = 3
NEW = 16  # new tokens (the task's 96: random models rarely stop, and transformers' uncached loop is slow)
SHORT = {"generation": {"stop": ["\n"], "max_new_tokens": NEW}}


@pytest.fixture(scope="module", params=FAMILIES)
def translated(request, tmp_path_factory):
    """A family's model, its transformers twin and tokenizer, and its sib200-translate run's records."""
    from babeleval.evaluate import evaluate
    from babeleval.loading import load_model

    folder = tmp_path_factory.mktemp(request.param)
    torch_model, tokenizer = build_translation_model(request.param, folder)
    model = load_model(str(folder))
    out = folder / "run"
    evaluate(model, [TASK], out, limit=LIMIT, progress=False, overrides=SHORT)
    records = [json.loads(line) for line in (out / "samples_sib200-translate.jsonl").read_text().splitlines()]
    return request.param, torch_model, tokenizer, model, out, records


def reference(family: str, torch_model, tokenizer, text: str, source: str | None, target: str | None,
              max_new: int = NEW) -> str:
    """transformers' greedy translation (None: a language left out), cut at the task's stop string."""
    import torch

    m2m = {"hin_Deva": "hi", "eng_Latn": "en", "swh_Latn": "sw"}
    if family == "madlad":
        ids = tokenizer((f"<2{m2m[target]}> " if target else "") + text).input_ids
        forced = {}
    else:
        if source:
            tokenizer.src_lang = source if family == "nllb" else m2m[source]
        ids = tokenizer(text).input_ids if source else tokenizer(text, add_special_tokens=False).input_ids + [2]
        lang = target if family == "nllb" else f"__{m2m.get(target)}__"
        forced = {"forced_bos_token_id": tokenizer.convert_tokens_to_ids(lang)} if target else {}
    out = torch_model.generate(torch.tensor([ids]), max_new_tokens=max_new, do_sample=False, num_beams=1,
                               use_cache=False, **forced)[0].tolist()[1 + bool(forced):]  # start (and language) token
    return cut_at_stop(tokenizer.decode(out, skip_special_tokens=True), ["\n"]).strip()


def test_translations_equal_transformers_with_the_languages_forced(translated):
    family, torch_model, tokenizer, _, _, records = translated
    assert len(records) == 2 * LIMIT  # both directions
    directions = set()
    for r in records:
        t = r["translation"]
        directions.add((t["source"], t["target"]))
        assert t["text"] and "Translate" not in t["text"]  # the source sentence alone, no prompt
        assert r["prediction"] == reference(family, torch_model, tokenizer, t["text"], t["source"], t["target"]), r["id"]
    assert directions == {("eng_Latn", "hin_Deva"), ("hin_Deva", "eng_Latn")}
    results = json.loads((translated[4] / "results.json").read_text())["tasks"]["sib200-translate"]
    assert results["translations"]["hin_Deva|direction=enxx"] == {"source": "eng_Latn", "target": "hin_Deva"}


def test_the_wrong_language_or_none_gives_another_translation(translated):
    """What the equality above rules out: this model's output depends on the language it is given."""
    family, torch_model, tokenizer, _, _, records = translated
    r = next(r for r in records if r["translation"]["target"] == "hin_Deva")
    t = r["translation"]
    right = reference(family, torch_model, tokenizer, t["text"], t["source"], t["target"])
    wrong = reference(family, torch_model, tokenizer, t["text"], t["source"], "swh_Latn")
    none = reference(family, torch_model, tokenizer, t["text"], None, None)
    assert r["prediction"] == right and right != wrong and right != none, (right, wrong, none)


def test_a_translation_model_refuses_a_task_without_languages(translated):
    from babeleval.engine.seq2seq_generate import Seq2SeqGenerator
    from babeleval.requests import Generate

    model = translated[3]
    with pytest.raises(BabelevalError, match="gives none: run a task with a translation: block") as error:
        Seq2SeqGenerator(model).generate([Generate("Translate to Hindi: Hello", ("\n",), 8)])
    assert "\n" not in str(error.value)


@pytest.mark.full
def test_an_llm_run_and_an_mt_run_compare_per_direction(tiny_smollm2, tmp_path):
    """The LLM is prompted with the same task (its 1-shot prompt), NLLB reads the sentences alone;
    compare pairs the two runs' sentences per language and direction by the paired bootstrap on
    chrF's statistics (20 sentences each: compare's minimum)."""
    from babeleval.compare import compare
    from babeleval.compare import MIN_SHARED
    from babeleval.evaluate import evaluate

    build_translation_model("nllb", tmp_path / "nllb")
    runs = {}
    for name, model in (("llm", str(tiny_smollm2)), ("nllb", str(tmp_path / "nllb"))):
        runs[name] = tmp_path / f"run-{name}"
        evaluate(model, [TASK], runs[name], limit=MIN_SHARED, progress=False, overrides=SHORT)
    records = {name: [json.loads(line) for line in (folder / "samples_sib200-translate.jsonl").open()]
               for name, folder in runs.items()}
    assert [r["prompt_hash"] for r in records["llm"]] == [r["prompt_hash"] for r in records["nllb"]]  # one task
    assert all("translation" in r for r in records["llm"])
    task = compare([runs["llm"], runs["nllb"]])["tasks"]["sib200-translate"]
    assert {d["cell"] for d in task["differences"]} == {"hin_Deva|direction=enxx", "hin_Deva|direction=xxen"}
    for d in task["differences"]:
        assert d["test"] == "paired bootstrap (corpus statistics)" and d["n"] == MIN_SHARED, d


def test_language_codes_from_flores_codes():
    from babeleval.engine.translation import language_codes

    assert language_codes("npi_Deva") == ("ne", "npi", "npi_Deva")
    assert language_codes("hin_Deva") == ("hi", "hin", "hin_Deva")
    assert language_codes("bjn_Latn") == ("bjn", "bjn_Latn")  # no ISO 639-1 code


def test_translation_blocks_of_the_builtin_tasks():
    from babeleval.tasks.files import find_task

    flores = find_task("indicgenbench-flores")
    pairs = {(v.subset, dict(v.axes)["direction"]): (v.translation.source, v.translation.target) for v in flores.variants}
    assert len(pairs) == 58
    assert pairs[("hi", "enxx")] == ("eng_Latn", "hin_Deva") and pairs[("ne", "xxen")] == ("npi_Deva", "eng_Latn")
    pair = lambda task, subset: {(v.translation.source, v.translation.target) for v in find_task(task).variants
                                 if v.subset == subset}
    assert pair("tatoeba", "hin") == pair("sib200-bitext", "hin_Deva") == {("hin_Deva", "eng_Latn")}
    nusax = find_task("nusax-mt")
    assert {(v.translation.source, v.translation.target) for v in nusax.variants if v.subset == "javanese"} == \
        {("ind_Latn", "jav_Latn"), ("jav_Latn", "ind_Latn")}


@pytest.mark.parametrize("block, message", [
    ({"source": "eng_Latn", "target": "hindi", "text": "text"}, "'hindi' is not a FLORES-200 code"),
    ({"source": "eng_Latn", "target": "{flores}", "text": "text"}, "names 'flores', which the subset does not define"),
    ({"source": "eng_Latn", "target": "hin_Deva"}, "translation needs text"),
    ({"source": "eng_Latn", "target": "hin_Deva", "text": "text", "via": 1}, "unknown field 'via' in translation"),
])
def test_a_bad_translation_block_names_the_field(block, message):
    from babeleval.tasks.config import parse_task

    raw = {"name": "t", "kind": "generation", "data": {"path": "x.jsonl"}, "prompt": "{{ text }}", "target": "text",
           "translation": block}
    with pytest.raises(BabelevalError, match=message):
        parse_task(raw, "t.yaml")


def test_the_cli_refuses_a_task_without_languages_in_one_line(translated, tmp_path):
    from click.testing import CliRunner

    from babeleval.cli.main import cli

    if translated[0] != "nllb":
        pytest.skip("the refusal is the engine's, alike for every family")
    folder = translated[4].parent
    result = CliRunner().invoke(cli, ["run", "--quiet", "--task", "xquad-hi", "--limit", "1", "--model", str(folder),
                                      "--output", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "translation: block" in lines[0], result.output


def test_languages_a_model_lacks_are_named_before_anything_runs(translated):
    """NLLB has no token for Toba Batak, Madurese or Ngaju: the run stops at once, naming them and
    the subsets it can run."""
    from babeleval.engines import check_translations
    from babeleval.tasks.files import find_task

    if translated[0] != "nllb":
        pytest.skip("the check reads the conventions' lookup, alike for every family")
    with pytest.raises(BabelevalError) as error:
        check_translations(translated[3], [find_task("nusax-mt")])
    message = str(error.value)
    assert "no token for bbc_Latn, mad_Latn, nij_Latn" in message and "subsets madurese, ngaju, toba_batak" in message
    assert "run --task nusax-mt:acehnese,balinese,banjarese,buginese,english,javanese,minangkabau,sundanese" in message
    check_translations(translated[3], [find_task("nusax-mt:javanese,english")])  # these it can run


def test_results_name_no_languages_for_lm_eval_tasks():
    from babeleval.evaluate import find_tasks, prepare_task, translation_pairs

    units = prepare_task(find_tasks("lm-eval:tests/fixtures/lm_eval_run/xcopa_sw_local.yaml")[0], limit=2)
    assert translation_pairs(units) == {}
