"""From a generated answer to an option, as ProverbEval and MINERS read GPT-4o's answers:
the label it starts with (a letter or a native label such as ሀ ለ ሐ መ, in any case, with
or without punctuation: "B", "(b)", "B.", "Answer: B"), else the one option text it names,
else no answer (counted apart, and wrong)."""
from __future__ import annotations

import unicodedata

ANSWER_WORDS = ("answer", "the answer is", "መልስ", "መልሲ", "deebii", "አውሥዖት")


def _is_punct_or_space(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch)[0] in "PS"


def _strip(text: str) -> str:
    start, end = 0, len(text)
    while start < end and _is_punct_or_space(text[start]):
        start += 1
    while end > start and _is_punct_or_space(text[end - 1]):
        end -= 1
    return text[start:end]


def verbalise(text: str, labels: tuple[str, ...], options: tuple[str, ...]) -> int | None:
    """The index of the option `text` answers, or None when it names none (or several)."""
    answer = _strip(text.strip().splitlines()[0] if text.strip() else "").casefold()
    for word in ANSWER_WORDS:  # "Answer: B" -> "B"
        if answer.startswith(word) and len(answer) > len(word) and _is_punct_or_space(answer[len(word)]):
            answer = _strip(answer[len(word):])
            break
    folded = [label.casefold() for label in labels]
    for i, label in enumerate(folded):
        if answer == label or (answer.startswith(label) and _is_punct_or_space(answer[len(label)])):
            return i
    named = [i for i, option in enumerate(options) if _strip(option).casefold() and _strip(option).casefold() in answer]
    if len(named) == 1:
        return named[0]
    exact = [i for i in named if _strip(options[i]).casefold() == answer]
    return exact[0] if len(exact) == 1 else None
