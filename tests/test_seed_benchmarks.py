"""The seed benchmarks' task files on fixtures written in the published schemas (MILU's
columns and splits, IndicGenBench's "examples"-keyed JSON files and names): rendered
prompts character for character, every accepted MILU answer format, the breakdown fields,
the 1-shot default and the direction axis."""
from pathlib import Path

import pytest

from babeleval.evaluate import prepare_task
from babeleval.tasks.files import find_task

FIXTURES = Path(__file__).parent / "fixtures"


def items(spec, **overrides):
    return {u.variant.key: u.items for u in prepare_task(find_task(spec, overrides=overrides or None), FIXTURES)}


def test_milu_prompt_targets_and_breakdown():
    questions = items("milu:Hindi")["Hindi"]
    assert questions[0].context == ("Question: भारत की राजधानी क्या है?\nChoices:\nA. मुंबई\nB. नई दिल्ली\nC. कोलकाता\n"
                                    "D. चेन्नई\nAnswer:")
    assert questions[0].choices == ("मुंबई", "नई दिल्ली", "कोलकाता", "चेन्नई")  # the option texts are scored
    assert [q.gold for q in questions] == [1, 0, 2, 0]  # "option2", "A", 3 (1-based), the literal text
    assert dict(questions[2].fields) == {"domain": "STEM", "subject": "Mathematics"}
    assert find_task("milu").breakdown == ("domain", "subject") and len(find_task("milu").subsets) == 11


def test_milu_five_shot_takes_the_first_five_validation_questions_in_order():
    question = items("milu-5shot:Tamil")["Tamil"][0]
    demos = question.context.split("\n\n")
    assert len(demos) == 6 and demos[0] == ("Question: प्रश्न 0?\nChoices:\nA. क0\nB. ख0\nC. ग0\nD. घ0\nAnswer: क0")
    assert demos[1].endswith("Answer: ख1") and demos[4].endswith("Answer: क4")
    assert demos[5].startswith("Question: தமிழ்நாட்டின் தலைநகரம் எது?")


def test_milu_choice_orders_reorder_the_listed_options():
    by_order = items("milu:Hindi", choice_orders=["original", "gold-last"])
    last = by_order["Hindi|order=gold-last"][0]
    assert last.context.endswith("D. नई दिल्ली\nAnswer:") and last.gold == 3


def test_indicgenbench_prompts_one_shot_and_directions():
    (xquad,) = items("indicgenbench-xquad:hi")["hi"]
    assert xquad.context == ("Context: ताजमहल आगरा में है।\nQuestion: ताजमहल कहाँ है?\nAnswer: आगरा\n\n"
                             "Context: गंगा हिमालय से निकलती है।\nQuestion: गंगा कहाँ से निकलती है?\nAnswer:")
    assert xquad.references == ("हिमालय", "हिमालय से")
    (xorqa,) = items("indicgenbench-xorqa:bn")["bn"]
    assert xorqa.context.endswith("Context: Kolkata lies on the Hooghly river.\nQuestion: কলকাতা কোন নদীর তীরে?\n"
                                  "Answer in Bengali:") and xorqa.references == ("হুগলি",)
    (summary,) = items("indicgenbench-crosssum:ta")["ta"]
    assert summary.context.endswith("Summarize the following English article in Tamil.\n"
                                    "Article: The festival drew large crowds.\nTamil summary:")
    flores = items("indicgenbench-flores:hi")
    assert flores["hi|direction=enxx"][0].context == ("Translate from English to Hindi.\nEnglish: Good morning.\n"
                                                      "Hindi: सुप्रभात।\n\nTranslate from English to Hindi.\n"
                                                      "English: The river is wide.\nHindi:")
    assert flores["hi|direction=xxen"][0].references == ("The river is wide.",)
    zero = items("indicgenbench-flores:hi", fewshot={"n": 0})
    assert zero["hi|direction=xxen"][0].context == "Translate from Hindi to English.\nHindi: नदी चौड़ी है।\nEnglish:"
    assert find_task("indicgenbench-flores").variants[0].metrics == ("chrf", "bleu")


def test_flores_style_translation_from_sib200_joins_languages_by_index_id(data_slices, tmp_path):
    units = {u.variant.key: u.items for u in prepare_task(find_task("sib200-translate:amh_Ethi"), data_slices, 2)}
    enxx, xxen = units["amh_Ethi|direction=enxx"][0], units["amh_Ethi|direction=xxen"][0]
    english = "Mutation adds new genetic variation, and selection removes it from the pool of expressed variation."
    amharic = "ሚውቴሽን አዲስ የዘረመል ልዩነትን ይጨምራል ፣ እናም ምርጫው ከተገለፀው የልዩነት ገንዳ ውስጥ ያስወግደዋል።"
    assert enxx.id == xxen.id == "1523" and enxx.references == (amharic,) and xxen.references == (english,)
    assert enxx.context.endswith(f"\n\nTranslate from English to Amharic.\nEnglish: {english}\nAmharic:")
    assert xxen.context.startswith("Translate from Amharic to English.\nAmharic: ") and "\nEnglish: With the change" in xxen.context
    (tmp_path / "sib200" / "eng_Latn").mkdir(parents=True)
    (tmp_path / "sib200" / "amh_Ethi").mkdir(parents=True)
    (tmp_path / "sib200" / "eng_Latn" / "test.tsv").write_text("index_id\tcategory\ttext\n7\ttravel\tHi\n", encoding="utf-8")
    (tmp_path / "sib200" / "amh_Ethi" / "test.tsv").write_text("index_id\tcategory\ttext\n8\ttravel\tሰላም\n", encoding="utf-8")
    with pytest.raises(Exception, match=r"eng_Latn/test\.tsv:2: no row with index_id='7' in sib200/amh_Ethi/test\.tsv"):
        prepare_task(find_task("sib200-translate:amh_Ethi", overrides={"fewshot": {"n": 0}}), tmp_path)


def test_milu_prompt_on_sib200_lists_seven_choices_after_five_shots(data_slices):
    (question,), = [u.items for u in prepare_task(find_task("sib200-milu:hin_Deva"), data_slices, 1)]
    blocks = question.context.split("\n\n")
    assert len(blocks) == 6 and all(b.startswith("Question: Which topic is this text about?\n") for b in blocks)
    assert blocks[-1].endswith("Choices:\nA. science/technology\nB. travel\nC. politics\nD. sports\nE. health\n"
                               "F. entertainment\nG. geography\nAnswer:")
    assert blocks[0].endswith("G. geography\nAnswer: " + blocks[0].split("Answer: ")[1]) and question.choices[question.gold] == "science/technology"
