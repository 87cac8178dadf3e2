"""lm-evaluation-harness tasks inside babeleval's own runner: `--task lm-eval:NAME_OR_YAML`.

lm-eval builds everything a document needs with its own task objects (TaskManager: a
registered name, a group such as xcopa, or a YAML path with `include:` and `!function`):
its docs, few-shot contexts (same seed as `lm_eval.simple_evaluate`), requests, filters
and per-document metrics. babeleval only answers the requests with its engines, so the
records equal a plain lm-eval run's while the run gains what lm-eval lacks: records per
document with resume after a kill, stderr in results.json, `babeleval report`, and the
choice-order axis (lm_eval/orders.py). Each leaf lm-eval task is a subset (xcopa_sw,
xcopa_ta); a variant's signature hashes lm-eval's own config dump, so a changed YAML or
utils function never resumes into old records.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
from dataclasses import dataclass, field

import numpy as np

from ..errors import BabelevalError
from ..metrics.means import mean_and_stderr
from ..requests import LmEvalGenerate, Loglikelihood
from ..tasks.bad_rows import BadRowLog, lm_eval_problems
from ..tasks.config import BadRows, TaskConfig, parse_bad_rows, parse_chat
from ..tasks.order import expand_orders
from ..provenance import text_hash

PREFIX = "lm-eval:"
FEWSHOT_SEED = 1234  # lm_eval.simple_evaluate's fewshot_random_seed
ANSWERED = ("loglikelihood", "generate_until", "multiple_choice")
HFLM_MAX_GEN_TOKS = 256  # HFLM's default max_gen_toks


@dataclass(frozen=True)
class LmEvalVariant:
    """One lm-eval task (a subset) in one choice order; duck-types tasks.config.Variant
    where the runner reads it (key, subset, axes, signature)."""

    task: str
    subset: str
    language: str
    axes: tuple[tuple[str, str], ...]
    order: str
    config_hash: str
    num_fewshot: int
    lm_task: object = field(compare=False, repr=False)
    options: object = field(default=None, compare=False, repr=False)  # orders.OptionFields
    order_seed: int = 1234
    kind: str = "lm_eval"
    script: str = ""
    where: str = ""
    chat: object = None  # config.ChatSpec: lm-eval's apply_chat_template path, rendered by our ChatTemplate
    bad_rows: BadRows = field(default=BadRows(), compare=False)  # multiple choice (tasks/bad_rows.py)
    translation: object = None  # lm-eval tasks name no languages (HFLM prompts every model alike)

    @property
    def key(self) -> str:
        return "|".join([self.subset] + [f"{a}={v}" for a, v in self.axes])

    @property
    def scored(self) -> bool:
        """Answered by log-likelihood: its records follow the token boundary of engine/tokenize.py,
        lm-eval's own since issue 50 (a context's trailing newlines moved to the continuation
        too), which the signature names so that records of before are refused, not resumed."""
        return self.lm_task.get_config("output_type") != "generate_until"

    @property
    def signature(self) -> str:
        chat = self.chat and [getattr(self.chat.template, "identity", self.chat.template), self.chat.system,
                              self.chat.fewshot_as_multiturn]
        blob = json.dumps([self.config_hash, self.num_fewshot, FEWSHOT_SEED, self.order, self.order_seed,
                           self.options.signature if self.options else None] + ([chat] if chat else [])
                          + (["boundary: trailing whitespace"] if self.scored else []))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass
class LmEvalItem:
    id: str
    doc: dict  # the document as shown (options permuted in their fields when the order is not original)
    instances: list  # lm-eval Instances, answered in place
    order: tuple[int, ...]  # the original option shown at each position
    option_texts: tuple[str, ...] | None  # the original options' texts (what consistency compares)
    problems: tuple[str, ...] = ()  # a kept bad row's problems (tasks/bad_rows.py)


def _quiet_lm_eval() -> None:
    import logging

    logging.getLogger("lm_eval").setLevel(logging.ERROR)  # one warning per metric without aggregation: noise here


def load_lm_eval_tasks(spec: str) -> dict:
    """NAME[,NAME...] or a YAML path -> {leaf task name: lm-eval Task}; lm-eval's own loader,
    its errors in one line."""
    try:
        import lm_eval.tasks  # noqa: F401
    except ImportError:
        raise BabelevalError("lm-eval tasks need lm-evaluation-harness: pip install 'babeleval[lm-eval]'") from None
    from .task_index import task_manager  # lm-eval's folders of these names only (their index cached)
    _quiet_lm_eval()
    is_path = spec.endswith((".yaml", ".yml"))
    if is_path and not os.path.isfile(spec):
        raise BabelevalError(f"{spec}: no such lm-eval task file")
    names = [s for s in spec.split(",") if s]
    manager, names = _indexed_file(spec) if is_path else (task_manager(names), names)
    if not is_path:
        unknown = [n for n in names if n not in manager.all_tasks]
        if unknown:
            import difflib

            close = difflib.get_close_matches(unknown[0], manager.all_tasks, n=3)
            raise BabelevalError(f"lm-eval task {unknown[0]!r} is not registered in lm_eval's task library"
                                 + (f" (did you mean {', '.join(close)}?)" if close else "") + "; or give a .yaml path")
    try:
        loaded = manager.load(names)["tasks"]
    except Exception as exc:  # datasets/hub/YAML errors: one line, with the offline way out
        raise BabelevalError(f"lm-eval task {spec}: cannot load ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                             "offline, point the task at local files: dataset_path: json|csv|parquet with "
                             "dataset_kwargs.data_files (docs/lm-eval.md)") from None
    return _checked(loaded)


def _indexed_file(path: str):
    """A task file is indexed with its own folder (the siblings a group lists); a group is loaded
    by its name (lm-eval 0.4.13 cannot load a group by its path). lm-eval's library (~10k
    files, seconds) is indexed only for a group that lists tasks from it."""
    from lm_eval.tasks import TaskManager
    from lm_eval.tasks._yaml_loader import load_yaml

    try:
        raw = load_yaml(path, resolve_func=False)
    except Exception as exc:
        raise BabelevalError(f"{path}: not a readable lm-eval task file ({type(exc).__name__}: {exc})") from None
    folder = os.path.dirname(os.path.abspath(path))
    manager = TaskManager(include_defaults=False, include_path=folder)
    group = isinstance(raw.get("task"), list) and raw.get("group")
    if group and not all(t in manager.all_tasks for t in raw["task"] if isinstance(t, str)):
        manager = TaskManager(include_path=folder)
    return manager, [group or path]


def _checked(loaded: dict) -> dict:
    for name, task in loaded.items():
        output_type = task.get_config("output_type")
        if output_type not in ANSWERED:
            raise BabelevalError(f"lm-eval task {name}: output_type {output_type} is not run by `babeleval run` "
                                 "(perplexity windows): run it with `babeleval lm-eval`")
    return loaded


def _config_hash(task) -> str:
    from importlib.metadata import version

    blob = json.dumps([version("lm_eval"), task.dump_config()], sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def _num_fewshot(task, overrides: dict) -> int:
    """lm_eval.simple_evaluate's rule: --fewshot replaces the task's value unless the task fixes 0."""
    configured = task.get_config("num_fewshot")
    wanted = (overrides.get("fewshot") or {}).get("n")
    if wanted is not None and configured != 0:
        return int(wanted)
    return int(configured or 0)


def _task_name(spec: str, subsets: list[str]) -> str:
    if len(subsets) == 1:
        return f"lm-eval-{subsets[0]}"
    stem = os.path.splitext(os.path.basename(spec))[0] if spec.endswith((".yaml", ".yml")) else spec.replace(",", "+")
    return f"lm-eval-{stem}"


def _languages(subsets: list[str]) -> dict[str, str]:
    """xcopa_sw, xcopa_ta -> sw, ta (and xcopa_sw_local, xcopa_ta_local -> sw, ta): the part of
    the subset names that differs, cut at underscores."""
    if len(subsets) < 2:
        return {s: s for s in subsets}
    parts = [s.split("_") for s in subsets]
    head = len(os.path.commonprefix(parts))
    tail = len(os.path.commonprefix([p[head:][::-1] for p in parts]))
    return {s: "_".join(p[head: len(p) - tail]) or s for s, p in zip(subsets, parts)}


def load_lm_eval_task(spec: str, overrides: dict | None = None) -> TaskConfig:
    """`lm-eval:SPEC` -> a TaskConfig whose variants are LmEvalVariants (kind lm_eval)."""
    from .orders import option_fields

    overrides = overrides or {}
    where = f"{PREFIX}{spec}"
    tasks = load_lm_eval_tasks(spec)
    orders = expand_orders(overrides.get("choice_orders") or ["original"], where)
    seed = int(overrides.get("order_seed", 1234))
    chat, bad_rows = parse_chat(overrides.get("chat"), where), parse_bad_rows(overrides.get("bad_rows") or {}, where)
    subsets = list(tasks)
    name, languages, variants = _task_name(spec, subsets), _languages(subsets), []
    for subset, task in tasks.items():
        options = option_fields(task, subset) if orders != ["original"] else None
        config_hash, shots = _config_hash(task), _num_fewshot(task, overrides)
        for order in orders:
            axes = (("order", order),) if len(orders) > 1 else ()
            variants.append(LmEvalVariant(name, subset, languages[subset], axes, order, config_hash, shots, task,
                                          options, seed, where=f"{where} [{subset}]", chat=chat, bad_rows=bad_rows))
    first = next(iter(tasks.values()))
    main = metric_names(first)[0]
    return TaskConfig(name=name, kind="lm_eval", version=str(getattr(first, "VERSION", "")),
                      description=f"lm-evaluation-harness task {spec}", protocol="lm-evaluation-harness",
                      source=str(first.get_config("dataset_path") or ""), citation="", license="", main_metric=main,
                      subsets={s: {"language": languages[s], "script": ""} for s in subsets},
                      variants=tuple(variants), where=where)


def metric_names(task) -> list[str]:
    """lm-eval's metric keys as results name them: `acc` for the unfiltered run, `exact_match,strict-match`
    for a named filter (lm-eval writes `acc,none`)."""
    filters = [f.name for f in task._filters]
    return [m if f == "none" else f"{m},{f}" for f in filters for m in task._metric_fn_list]


def _selected(n: int, limit: int | None, sample: int | None) -> list[int]:
    """The document indices to run: the first `limit`, or `sample` drawn by a hash of their index
    (documents.load_documents' rule, with lm-eval's doc_id as the id)."""
    indices = list(range(n))
    if sample:
        indices = sorted(sorted(indices, key=lambda i: hashlib.sha256(f"sample|{i}".encode()).digest())[:sample])
    return indices[:limit] if limit else indices


def prepare_lm_eval(task: TaskConfig, limit: int | None = None, sample: int | None = None) -> list[tuple]:
    """Per variant: (variant, kind, items). The few-shot sampler is seeded again for every
    variant and every document of the split is visited in order, as simple_evaluate does, so
    every order (and a resumed run) sees the same demonstrations as a plain lm-eval run."""
    out = []
    for variant in task.variants:
        lm_task = variant.lm_task
        lm_task.set_fewshot_seed(seed=FEWSHOT_SEED)
        docs = lm_task.eval_docs
        kind, items = LmEvalKind(variant), []
        for i in _selected(len(docs), limit, sample):
            problems = _problems(variant, docs[i], kind.bad_rows, f"{variant.where} document {i}")
            if problems is not None:
                items.append(_item(variant, str(i), i, docs[i], problems))
            else:
                _draw_shots(lm_task, docs[i], variant.num_fewshot)
        out.append((variant, kind, items))
    return out


def _draw_shots(lm_task, doc: dict, n: int) -> None:
    """A skipped document still takes its draw from the seeded few-shot sampler (as in a plain
    lm-eval run, which scores it), so the documents after it get lm-eval's demonstrations."""
    if n > 0 and getattr(lm_task, "sampler", None) is not None:
        same_split = lm_task.fewshot_cfg.split == lm_task.config.test_split
        lm_task.sampler.sample(n=n, eval_doc=doc if same_split else None)


def _problems(variant: LmEvalVariant, doc: dict, log: BadRowLog, origin: str) -> tuple[str, ...] | None:
    """A multiple-choice document's bad-row problems under the variant's policy (None: skipped)."""
    if variant.lm_task.get_config("output_type") != "multiple_choice":
        return ()
    problems, scorable = lm_eval_problems(variant.lm_task, doc)
    unknown = any(p == "unknown_target" for p, _ in problems)
    scorable = scorable and not (unknown and variant.order in ("gold-first", "gold-last"))
    if problems and not log.decide(variant.bad_rows, problems, origin, scorable):
        return None
    return tuple(p for p, _ in problems)


def _item(variant: LmEvalVariant, doc_id: str, index: int, doc: dict, problems: tuple[str, ...] = ()) -> LmEvalItem:
    from contextlib import nullcontext

    from .orders import permuted_document, shots_exclude

    lm_task, order, texts, original = variant.lm_task, None, None, doc
    if variant.options is not None:
        doc, order, texts = permuted_document(variant, doc_id, dict(doc))
    with shots_exclude(lm_task, original) if variant.options is not None else nullcontext():
        context = lm_task.fewshot_context(doc, num_fewshot=variant.num_fewshot, gen_prefix=lm_task.doc_to_prefix(doc),
                                          **lm_eval_chat_arguments(variant.chat))
    instances = lm_task.construct_requests(doc=doc, ctx=context, metadata=(lm_task.config.task, index, lm_task.config.repeats))
    instances = instances if isinstance(instances, list) else [instances]
    return LmEvalItem(doc_id, doc, instances, tuple(order or ()), tuple(texts) if texts else None, problems)


def _request(instance, where: str):
    if instance.request_type == "loglikelihood":
        context, continuation = instance.args[:2]
        return Loglikelihood(context, continuation)
    context, gen_kwargs = instance.args[:2]
    return greedy_request(context, gen_kwargs, HFLM_MAX_GEN_TOKS, where)


def greedy_request(context: str, gen_kwargs: dict | None, max_gen_toks: int, where: str) -> LmEvalGenerate:
    """A generate_until request as HFLM reads its arguments (lm-eval's normalize_gen_kwargs:
    until, max_gen_toks); one asking for sampling is refused, this engine decodes greedily."""
    from lm_eval.models.utils import normalize_gen_kwargs

    kwargs = normalize_gen_kwargs(copy.deepcopy(gen_kwargs or {}), max_gen_toks)
    if kwargs.get("do_sample") or float(kwargs.get("temperature") or 0) > 0:
        raise BabelevalError(f"{where}: generation asks for sampling ({gen_kwargs}); babeleval's engine decodes greedily "
                             "only: set do_sample: false / temperature: 0 in the task's generation_kwargs (or pass "
                             "--gen_kwargs do_sample=false,temperature=0 to babeleval lm-eval)")
    until = kwargs.get("until") or []
    return LmEvalGenerate(context, tuple([until] if isinstance(until, str) else until), int(kwargs["max_gen_toks"]))


class LmEvalKind:
    """The runner's task kind for lm-eval tasks: lm-eval's requests out, lm-eval's
    filters and process_results over our answers back in."""

    chunked = True

    def __init__(self, variant: LmEvalVariant):
        self.variant = variant
        self.task = variant.lm_task
        self.names = metric_names(self.task)
        self.bad_rows = BadRowLog()  # filled by prepare_lm_eval

    def requests(self, items: list[LmEvalItem]) -> list:
        return [_request(inst, self.variant.where) for item in items for inst in item.instances]

    def score(self, items: list[LmEvalItem], results: list) -> list[dict]:
        answers = iter(results)
        for item in items:
            for inst in item.instances:
                answer = next(answers)
                inst.resps = [(answer.logprob, answer.is_greedy)] if hasattr(answer, "logprob") else [answer.text]
                inst.filtered_resps = {}
        instances = [inst for item in items for inst in item.instances]
        for ensemble in self.task._filters:
            ensemble.apply(instances)
        return [self._record(item) for item in items]

    def _record(self, item: LmEvalItem) -> dict:
        first = item.instances[0]
        record = {"id": item.id, "prompt_hash": text_hash(str(first.args[0])), "fields": {}}
        names = []
        for ensemble in self.task._filters:
            resps = [inst.filtered_resps[ensemble.name] for inst in item.instances]
            for metric, value in self.task.process_results(item.doc, resps).items():
                key = metric if ensemble.name == "none" else f"{metric},{ensemble.name}"
                record[key] = _jsonable(value)
                names.append(key)
        record["lm_eval_metrics"] = names
        if self.task.get_config("output_type") == "multiple_choice":
            record.update(self._choices(item))
        elif first.request_type == "generate_until":
            record["generation"] = first.resps[0]
        else:
            record["loglikelihoods"] = [inst.resps[0][0] for inst in item.instances]
        return {**record, "bad_row": list(item.problems)} if item.problems else record

    def _choices(self, item: LmEvalItem) -> dict:
        """What our own multiple-choice records say: gold, prediction, the option chosen (its
        original text, so consistency compares the same option across orders)."""
        task, doc = self.task, item.doc
        choices = task.doc_to_choice(doc)
        lls = [inst.resps[0][0] for inst in item.instances][: len(choices)]
        gold = task.doc_to_text(doc) if task.multiple_input else task.doc_to_target(doc)
        gold = choices.index(gold) if isinstance(gold, str) and gold in choices else gold
        prediction = int(np.argmax(lls))
        order = list(item.order) or list(range(len(choices)))
        texts = item.option_texts or tuple(choices)
        return {"gold": gold, "order": order, "loglikelihoods": lls,
                "is_greedy": [bool(inst.resps[0][1]) for inst in item.instances][: len(choices)],
                "prediction": prediction, "chosen": texts[order[prediction]],
                "target": texts[order[gold]] if isinstance(gold, int) and 0 <= gold < len(order) else None}

    def aggregate(self, records: list[dict]) -> dict:
        """lm-eval's aggregation per metric; a mean gets its stderr as lm-eval computes it, a
        corpus metric (f1, bleu) its value only (lm-eval bootstraps those)."""
        from lm_eval.api.metrics import mean

        aggregations, out = self.task.aggregation(), {}
        names = list(dict.fromkeys([*self.names, *(n for r in records for n in r.get("lm_eval_metrics", ()))]))
        for name in names:
            values = [r[name] for r in records if name in r]
            if not values:
                continue
            fn = aggregations.get(name.split(",")[0], mean)
            out.update(mean_and_stderr(name, values) if fn is mean else {name: float(fn(values)), f"{name}_stderr": None})
        out["n"] = len(records)
        return out


def _jsonable(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def lm_eval_chat_arguments(chat) -> dict:
    """lm-eval's Task.fewshot_context keywords for a chatted `lm-eval:` task: lm-eval builds the
    turns (its --apply_chat_template path, system instruction, multi-turn few-shot) and our
    ChatTemplate renders them, as transformers would."""
    if chat is None:
        return {}
    return {"system_instruction": chat.system, "apply_chat_template": True,
            "fewshot_as_multiturn": chat.fewshot_as_multiturn, "chat_template": chat.template.render}
