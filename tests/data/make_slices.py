"""Writes the default tier's data slices (tests/data) from the full benchmark files.

  python tests/data/make_slices.py [SOURCE]      # SOURCE: ../shared/data by default

Each slice is the head of its original in the original's own format, bytes unchanged (line
endings included): the first N lines of a line-based file (a header counts as a line), the
first articles of a SQuAD JSON file written as the original is (indent 2, ASCII escapes).
Sources and licences: tests/data/README.md."""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# path under the data root -> lines kept (None: the whole file)
LINES = {
    "xcopa/sw/test.sw.jsonl": 100,
    "xcopa/sw/val.sw.jsonl": None,  # 100 questions: the few-shot pool, whole
    "xcopa/ta/test.ta.jsonl": 100,
    "xcopa/ta/val.ta.jsonl": 50,
    "sib200/labels.txt": None,
    **{f"sib200/{lang}/test.tsv": 101 for lang in ("eng_Latn", "hin_Deva", "swh_Latn")},
    "sib200/amh_Ethi/test.tsv": None,  # whole: its rows are sorted by topic, a sample of them spans all seven
    **{f"sib200/{lang}/dev.tsv": 21 for lang in ("eng_Latn", "amh_Ethi", "hin_Deva", "swh_Latn")},
    **{f"tatoeba/tatoeba.{lang}-eng.{side}": n for lang, n in (("fra", 500), ("deu", 100), ("swh", 100), ("cmn", 300),
                                                               ("hin", 300), ("tha", 200)) for side in (lang, "eng")},
    "nusax/mt/valid.csv": None,  # 100 rows in 12 languages
    "nusax/mt/train.csv": 400,  # 380 rows (some span lines): the byte-level GPT's training text
}
# SQuAD JSON -> articles kept
ARTICLES = {"xquad/xquad.hi.json": 2}  # 97 questions


def main(source: Path) -> None:
    for name, n in LINES.items():
        lines = (source / name).read_bytes().splitlines(keepends=True)
        out = HERE / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(b"".join(lines if n is None else lines[:n]))
    for name, n in ARTICLES.items():
        text = (source / name).read_text(encoding="utf-8")
        squad = json.loads(text)
        assert json.dumps(squad, indent=2) + "\n" == text, f"{name}: not written as this script writes it"
        (HERE / name).parent.mkdir(parents=True, exist_ok=True)
        (HERE / name).write_text(json.dumps({**squad, "data": squad["data"][:n]}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parents[2] / "shared" / "data")
