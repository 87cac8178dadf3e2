"""Text for the fertility audit: {language: {unit id: text}}. Units with the same id in
two languages say the same thing (UDHR articles, NusaX-MT rows, SIB-200 index ids,
tokenizerbench sentences), which is what the token tax relative to English needs."""
from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

from ..errors import BabelevalError
from ..udhr import UDHR_LANGUAGES, udhr  # noqa: F401  (the audit's default corpus)


def tokenizerbench(languages: list[str] | None = None) -> dict[str, dict[str, str]]:
    """tokenizerbench's human-language sentences (PyPI tokenizerbench; language names such as 'hindi')."""
    spec = importlib.util.find_spec("tokenizerbench")
    if spec is None:
        raise BabelevalError("tokenizerbench is not installed (pip install tokenizerbench)")
    source = Path(spec.submodule_search_locations[0]) / "data" / "human_languages.py"
    namespace: dict = {}
    exec(compile(source.read_text(encoding="utf-8"), str(source), "exec"), namespace)
    data = {k: v for k, v in namespace.items() if isinstance(v, dict) and "english" in v}
    merged: dict[str, list[str]] = {}
    for table in data.values():
        for lang, sentences in table.items():
            merged.setdefault(lang, []).extend(sentences)
    missing = sorted(set(languages or ()) - set(merged))
    if missing:
        raise BabelevalError(f"tokenizerbench has no {', '.join(missing)} (it has {', '.join(sorted(merged))})")
    return {lang: {str(i): s for i, s in enumerate(merged[lang])} for lang in (languages or sorted(merged))}


def sib200(root: Path, languages: list[str]) -> dict[str, dict[str, str]]:
    out = {}
    for lang in languages:
        units = {}
        for split in ("train", "dev", "test"):
            path = root / "sib200" / lang / f"{split}.tsv"
            if not path.exists():
                raise BabelevalError(f"sib200: {path} does not exist")
            for row in csv.DictReader(path.open(encoding="utf-8"), delimiter="\t"):
                units[row["index_id"]] = row["text"]
        out[lang] = units
    return out


def nusax_mt(root: Path, languages: list[str] | None = None) -> dict[str, dict[str, str]]:
    path = root / "nusax" / "mt" / "test.csv"
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    langs = languages or [k for k in rows[0] if k]
    for lang in langs:
        if lang not in rows[0]:
            raise BabelevalError(f"{path}: no column {lang!r}")
    return {lang: {str(i): r[lang] for i, r in enumerate(rows)} for lang in langs}


def text_file(path: Path, language: str) -> dict[str, dict[str, str]]:
    """Any UTF-8 text file, one unit per non-empty line."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return {language: {str(i + 1): line for i, line in enumerate(lines) if line.strip()}}


CORPORA = ("udhr", "tokenizerbench", "sib200", "nusax")


def load_corpus(spec: str, languages: list[str] | None = None, data: Path | None = None) -> dict[str, dict[str, str]]:
    """A named corpus (CORPORA) or a UTF-8 text file (then exactly one language code);
    sib200 and nusax read the benchmark files under `data` (the data root)."""
    from ..paths import data_root

    if spec == "udhr":
        return udhr(languages)
    if spec == "tokenizerbench":
        return tokenizerbench(languages)
    if spec == "sib200":
        return sib200(data_root(data), languages or ["eng_Latn", "hin_Deva", "swh_Latn", "amh_Ethi"])
    if spec == "nusax":
        return nusax_mt(data_root(data), languages)
    path = Path(spec).expanduser()
    if not path.is_file():
        raise BabelevalError(f"corpus {spec!r}: not one of {', '.join(CORPORA)} nor a text file")
    if not languages or len(languages) != 1:
        raise BabelevalError(f"corpus {spec}: a text file needs exactly one --languages code")
    return text_file(path, languages[0])
