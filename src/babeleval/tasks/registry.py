"""Task names -> (loader, metadata). Metadata sits beside the task, as in MTEB, and the
report reads it (languages, main metric, source)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import BabelevalError
from .cldr import LANGUAGES, load_cldr
from .sib200 import load_sib200
from .xcopa import CONNECTORS, load_xcopa


@dataclass(frozen=True)
class TaskSpec:
    name: str
    load: Callable[[], list]
    languages: tuple[str, ...]
    main_metric: str = "acc"
    source: str = ""


def data_root() -> Path:
    """Where benchmark files live: $BABELEVAL_DATA, else ../shared/data beside the checkout."""
    env = os.environ.get("BABELEVAL_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[4] / "shared" / "data"


def _xcopa(lang: str, split: str) -> TaskSpec:
    path = lambda: data_root() / "xcopa" / lang / f"{split}.{lang}.jsonl"
    return TaskSpec(f"xcopa-{lang}" + ("" if split == "test" else f"-{split}"), lambda: load_xcopa(path(), lang), (lang,),
                    source="XCOPA (Ponti et al. 2020), lm-evaluation-harness prompt")


TASKS = {
    "cldr-months": TaskSpec("cldr-months", lambda: load_cldr("months"), LANGUAGES,
                            source="CLDR month names via babel; 12 options per question"),
    "cldr-weekdays": TaskSpec("cldr-weekdays", lambda: load_cldr("weekdays"), LANGUAGES,
                              source="CLDR weekday names via babel; 7 options per question"),
}
TASKS.update({f"xcopa-{lang}": _xcopa(lang, "test") for lang in CONNECTORS})
SIB200_LANGUAGES = ("eng_Latn", "hin_Deva", "swh_Latn", "amh_Ethi", "tam_Taml", "yor_Latn", "zho_Hans", "arb_Arab")
TASKS.update({f"sib200-{lang}": TaskSpec(f"sib200-{lang}", lambda lang=lang: load_sib200(data_root() / "sib200" / lang),
                                         (lang,), source="SIB-200 test split as 7-way multiple choice")
              for lang in SIB200_LANGUAGES})
DEFAULT_SUITE = ("cldr-months", "cldr-weekdays")


def get_task(name: str) -> TaskSpec:
    if name not in TASKS:
        raise BabelevalError(f"unknown task {name!r}; available: {', '.join(sorted(TASKS))}")
    return TASKS[name]
