"""CLDR month and weekday names from the babel package (the data arrives with the install):
the documents of the embedded default suite. One document per (language, English name):
its fields are the English word, the language's display name in English, the language's
names (the options) and the index of the right one."""
from __future__ import annotations

from .sources import Raw

KINDS = ("months", "weekdays")


def _names(kind: str, locale: str) -> list[str]:
    from babel.dates import get_day_names, get_month_names

    getter = get_month_names if kind == "months" else get_day_names
    table = getter("wide", context="format", locale=locale)
    return [table[k] for k in sorted(table)]


def cldr_documents(kind: str, language: str) -> list[Raw]:
    from babel import Locale

    english = _names(kind, "en")
    names = _names(kind, language)
    display = Locale.parse(language).get_display_name("en")
    return [Raw({"id": f"{language}-{i}", "english": word, "language_name": display, "names": names, "index": i},
                f"babel CLDR {kind} ({language}):{i + 1}")
            for i, word in enumerate(english)]
