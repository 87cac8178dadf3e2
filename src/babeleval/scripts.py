"""Writing systems by Unicode block: which script a text is in, and which scripts are written
without spaces between words (their word segmentation needs a dictionary, see
babeleval.fertility.segment)."""
from __future__ import annotations

import functools

import numpy as np

from .kernels.encoding import code_point_table, encode

SCRIPTS: dict[str, tuple[tuple[int, int], ...]] = {
    "Latin": ((0x41, 0x5A), (0x61, 0x7A), (0xC0, 0x24F), (0x1E00, 0x1EFF)),
    "Greek": ((0x370, 0x3FF),),
    "Cyrillic": ((0x400, 0x52F),),
    "Armenian": ((0x530, 0x58F),),
    "Hebrew": ((0x590, 0x5FF),),
    "Arabic": ((0x600, 0x6FF), (0x750, 0x77F), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF)),
    "Syriac": ((0x700, 0x74F),),
    "Thaana": ((0x780, 0x7BF),),
    "Nko": ((0x7C0, 0x7FF),),
    "Devanagari": ((0x900, 0x97F),),
    "Bengali": ((0x980, 0x9FF),),
    "Gurmukhi": ((0xA00, 0xA7F),),
    "Gujarati": ((0xA80, 0xAFF),),
    "Oriya": ((0xB00, 0xB7F),),
    "Tamil": ((0xB80, 0xBFF),),
    "Telugu": ((0xC00, 0xC7F),),
    "Kannada": ((0xC80, 0xCFF),),
    "Malayalam": ((0xD00, 0xD7F),),
    "Sinhala": ((0xD80, 0xDFF),),
    "Thai": ((0xE00, 0xE7F),),
    "Lao": ((0xE80, 0xEFF),),
    "Tibetan": ((0xF00, 0xFFF),),
    "Myanmar": ((0x1000, 0x109F), (0xAA60, 0xAA7F)),
    "Georgian": ((0x10A0, 0x10FF),),
    "Hangul": ((0x1100, 0x11FF), (0x3130, 0x318F), (0xAC00, 0xD7AF)),
    "Ethiopic": ((0x1200, 0x139F), (0x2D80, 0x2DDF)),
    "Cherokee": ((0x13A0, 0x13FF),),
    "Canadian Aboriginal": ((0x1400, 0x167F),),
    "Khmer": ((0x1780, 0x17FF), (0x19E0, 0x19FF)),
    "Mongolian": ((0x1800, 0x18AF),),
    "Ol Chiki": ((0x1C50, 0x1C7F),),
    "Tifinagh": ((0x2D30, 0x2D7F),),
    "Kana": ((0x3040, 0x30FF), (0x31F0, 0x31FF)),
    "Han": ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2FA1F)),
    "Yi": ((0xA000, 0xA4CF),),
    "Vai": ((0xA500, 0xA63F),),
}
# Written without spaces between words.
NO_SPACE = ("Thai", "Lao", "Khmer", "Myanmar", "Kana", "Han")
_NAMES = list(SCRIPTS)


def no_space_table() -> np.ndarray:
    """True on the code points of the scripts written without spaces."""
    return code_point_table(tuple(r for name in NO_SPACE for r in SCRIPTS[name]))


@functools.lru_cache(maxsize=1)
def _script_ids() -> np.ndarray:
    """Code point -> 1 + index into SCRIPTS (0: none)."""
    table = np.zeros(max(hi for ranges in SCRIPTS.values() for _, hi in ranges) + 1, np.int16)
    for i, ranges in enumerate(SCRIPTS.values()):
        for lo, hi in ranges:
            table[lo:hi + 1] = i + 1
    return table


def script_of(text: str) -> str:
    """The script most of the text's letters belong to ("Other" when none is known)."""
    codes, _ = encode([text])
    table = _script_ids()
    counts = np.bincount(table[codes[codes < len(table)]], minlength=len(SCRIPTS) + 1)
    counts[0] = 0
    return _NAMES[int(counts.argmax()) - 1] if counts.any() else "Other"
