"""What a report says, as a list of blocks, rendered twice: as Markdown (report.md) and
as a static HTML page (report.html); the two never drift apart."""
from __future__ import annotations

import html
import math
from dataclasses import dataclass


@dataclass
class Heading:
    level: int
    text: str


@dataclass
class Paragraph:
    text: str


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]


@dataclass
class Figure:
    image: str  # file name of the PNG beside the report (an SVG of the same name is written too)
    caption: str


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(blocks: list) -> str:
    out = []
    for b in blocks:
        if isinstance(b, Heading):
            out += ["#" * b.level + " " + b.text, ""]
        elif isinstance(b, Paragraph):
            out += [b.text, ""]
        elif isinstance(b, Table):
            out += ["| " + " | ".join(map(_md_cell, b.header)) + " |", "|" + "---|" * len(b.header)]
            out += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in b.rows] + [""]
        elif isinstance(b, Figure):
            out += [f"![{b.caption}]({b.image})", "", f"*{b.caption}* ([SVG]({b.image.removesuffix('.png')}.svg))", ""]
    return "\n".join(out)


STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.85em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}th{background:#f0f3f7}
td:first-child,th:first-child{text-align:left}figure{margin:0 0 2em}img{max-width:100%}
figcaption{font-size:.85em;color:#555}h2{border-bottom:2px solid #dde;padding-bottom:.2em;margin-top:2em}"""


def html_page(title: str, blocks: list) -> str:
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{e(title)}</title>",
           f"<style>{STYLE}</style></head><body>"]
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{e(b.text)}</h{b.level}>")
        elif isinstance(b, Paragraph):
            out.append(f"<p>{e(b.text)}</p>")
        elif isinstance(b, Table):
            out.append("<table><thead><tr>" + "".join(f"<th>{e(str(h))}</th>" for h in b.header) + "</tr></thead><tbody>")
            out += ["<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in row) + "</tr>" for row in b.rows]
            out.append("</tbody></table>")
        elif isinstance(b, Figure):
            out.append(f'<figure><img src="{e(b.image)}" alt="{e(b.caption)}"><figcaption>{e(b.caption)} '
                       f'(<a href="{e(b.image.removesuffix(".png"))}.svg">SVG</a>)</figcaption></figure>')
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def number(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{2 if abs(value) >= 10 else digits}f}"
