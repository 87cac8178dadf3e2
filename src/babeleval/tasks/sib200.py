"""SIB-200 (Adelani et al. 2024) topic classification as 7-way multiple choice: the
sentence and a question about its topic are the shared context, the seven category
names (labels.txt) the options."""
from __future__ import annotations

import csv
from pathlib import Path

from ..errors import BabelevalError
from .multiple_choice import Question

PROMPT = "Text: {text}\nQuestion: Which topic is this text about: {labels}?\nAnswer:"


def load_sib200(folder: Path, split: str = "test") -> list[Question]:
    """folder: sib200/<language>, beside sib200/labels.txt."""
    labels_path = Path(folder).parent / "labels.txt"
    labels = tuple(l.strip() for l in labels_path.read_text(encoding="utf-8").splitlines() if l.strip())
    path = Path(folder) / f"{split}.tsv"
    if not path.exists():
        raise BabelevalError(f"{path}: no such SIB-200 file")
    questions = []
    with path.open(encoding="utf-8") as handle:
        for line_no, row in enumerate(csv.DictReader(handle, delimiter="\t"), start=2):
            try:
                gold = labels.index(row["category"])
                context = PROMPT.format(text=row["text"].strip(), labels=", ".join(labels))
                questions.append(Question(f"{Path(folder).name}-{row['index_id']}", context, labels, gold))
            except (KeyError, ValueError) as exc:
                raise BabelevalError(f"{path}:{line_no}: bad SIB-200 row ({type(exc).__name__}: {exc})") from None
    return questions
