"""The embedded default suite: CLDR month and weekday names (from the babel package,
so the data arrives with the install). A question asks for the word in a language and
offers that language's 12 months (or 7 weekdays): many options sharing one context,
across scripts (Latin, Ethiopic, Devanagari, Tamil ...)."""
from __future__ import annotations

from .multiple_choice import Question

LANGUAGES = ("fr", "sw", "id", "ha", "zu", "yo", "hi", "ta", "am", "bn")


def _names(kind: str, locale: str) -> list[str]:
    from babel.dates import get_day_names, get_month_names

    getter = get_month_names if kind == "months" else get_day_names
    table = getter("wide", context="format", locale=locale)
    return [table[k] for k in sorted(table)]


def load_cldr(kind: str, languages: tuple[str, ...] = LANGUAGES) -> list[Question]:
    from babel import Locale

    english = _names(kind, "en")
    questions = []
    for lang in languages:
        names = _names(kind, lang)
        language = Locale.parse(lang).get_display_name("en")
        for i, word in enumerate(english):
            context = f'The English word "{word}" in {language} is'
            questions.append(Question(f"{lang}-{i}", context, tuple(names), i))
    return questions
