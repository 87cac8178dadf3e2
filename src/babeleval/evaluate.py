"""One evaluation run, the call the CLI wraps:

    evaluate(model, ["xcopa:sw,ta", "path/to/my_task.yaml"], "results/run1", data="../shared/data")

Every task is loaded and its documents read, checked and rendered before the model loads
(a malformed row fails in a second, not after the model). Then, per task and variant:
documents -> requests -> the engine for that request type -> records, appended to
samples_<task>.jsonl and flushed as they are computed -> aggregates -> results.json
(written atomically). A run that is killed resumes: records already in the samples file
are not computed again. Each record carries its variant's signature (a hash of the
templates and settings): a samples file written with other templates is refused.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .engines import check_translations, Engines, is_embedder
from .lm_eval.tasks import PREFIX as LM_EVAL, load_lm_eval_task, prepare_lm_eval
from .retrieval.embedders import auxiliary_stats, embedder, is_embedder_spec
from .errors import BabelevalError
from .runlog import RunLog
from .results import SCHEMA_VERSION, cannot_write, summarise, write_json_atomic
from .tasks.bad_rows import report_bad_rows
from .tasks.chat_prompts import chat_summary, resolve_chat
from .tasks.config import TaskConfig, Variant
from .tasks.documents import load_documents, load_pool, load_shots
from .tasks import files
from .tasks.kinds import kind_for

CHUNK = 256  # documents between two appends to the samples file


@dataclass
class Unit:
    """One variant ready to run: its kind and its prepared items (questions, prompts, pairs)."""

    variant: Variant
    kind: object
    items: list


def find_tasks(spec: str, task_dirs=(), overrides: dict | None = None) -> list[TaskConfig]:
    """A babeleval task or suite (tasks/files.py), or an lm-evaluation-harness task named
    lm-eval:NAME or lm-eval:FILE.yaml (lm_eval/tasks.py)."""
    return files.find_tasks(spec, task_dirs, overrides, {LM_EVAL: load_lm_eval_task})


def prepare_task(task: TaskConfig, data: Path | None = None, limit: int | None = None,
                 sample: int | None = None) -> list[Unit]:
    if task.kind == "lm_eval":  # lm-evaluation-harness builds its own documents and requests
        return [Unit(*unit) for unit in prepare_lm_eval(task, limit, sample)]
    units = []
    for variant in task.variants:
        kind = kind_for(variant)
        docs = load_documents(variant, data, limit, sample)
        shots = load_pool(variant, data) if variant.pool is not None else load_shots(variant, data)
        units.append(Unit(variant, kind, kind.prepare(docs, shots)))
    return units


def _cut_torn_tail(path: Path) -> None:
    """A kill while a record was written leaves a last line without its newline: cut it, so
    the records appended next start on a line of their own (and are not lost with it)."""
    with path.open("rb+") as handle:
        size = handle.seek(0, 2)
        if size == 0:
            return
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return
        end = size
        while end > 0:
            step = min(1 << 16, end)
            handle.seek(end - step)
            block = handle.read(step)
            newline = block.rfind(b"\n")
            if newline >= 0:
                end = end - step + newline + 1
                break
            end -= step
        handle.truncate(max(end, 0))


def _read_samples(path: Path, variants: dict[str, Variant]) -> dict[tuple[str, str], dict]:
    done = {}
    if not path.exists():
        return done
    _cut_torn_tail(path)
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            record = json.loads(line)
            key, doc_id, signature = record["key"], record["id"], record["signature"]
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a line cut by a kill: that document is computed again
        if key in variants and signature != variants[key].signature:
            raise BabelevalError(f"{path}:{n}: written by another configuration of {key} (signature {signature}, "
                                 f"now {variants[key].signature}: a template, a setting or the task's version "
                                 "changed); use another --output or delete the file")
        done[(key, doc_id)] = record
    return done


def _append(sink, path: Path, lines: list[str]) -> None:
    """Records go to disk as soon as they are computed, one write per record line."""
    try:
        for line in lines:
            sink.write(line)
        sink.flush()
    except OSError as exc:
        raise cannot_write(path, exc) from None


class _DocumentBar:
    """Turns the engine's progress (requests answered) into documents on the run's bar (a
    tqdm bar, or None), with the requests per second of this run beside it."""

    def __init__(self, bar, documents: int, requests: int, started: float, answered_before: list):
        self.bar, self.documents, self.requests, self.answered, self.shown = bar, documents, requests, 0, 0
        self.started, self.total = started, answered_before  # [requests answered earlier in the task]

    def requests_done(self, n: int) -> None:
        self.answered += n
        self.total[0] += n
        self._show(min(self.documents, self.answered * self.documents // max(self.requests, 1)))

    def finish(self) -> None:
        self._show(self.documents)

    def _show(self, documents: int) -> None:
        if self.bar is not None and documents > self.shown:
            rate = self.total[0] / max(time.time() - self.started, 1e-9)
            self.bar.set_postfix_str(f"{rate:.1f} req/s", refresh=False)
            self.bar.update(documents - self.shown)
            self.shown = documents


def _chunks(units: list[Unit], todo: dict[str, list]):
    """Pieces of at most CHUNK documents, across variants (one engine call packs the
    questions of several languages or orders together); a kind that needs its whole set
    at once (bitext search) is one piece per variant."""
    piece, size = [], 0
    for unit in units:
        items = todo[unit.variant.key]
        if not unit.kind.chunked:
            if items:
                yield [(unit, items)]
            continue
        while items:
            take, items = items[: CHUNK - size], items[CHUNK - size:]
            piece.append((unit, take))
            size += len(take)
            if size >= CHUNK:
                yield piece
                piece, size = [], 0
    if piece:
        yield piece


def _samples_path(output: Path, task: TaskConfig) -> Path:
    return output / f"samples_{task.name}.jsonl"


def run_task(engines: Engines, task: TaskConfig, units: list[Unit], output: Path, bar=None, log=None,
             done: dict | None = None) -> dict:
    """bar: a tqdm bar (documents) or None; log: the run's RunLog (or None); done: the records
    already in the samples file, when the caller has read them."""
    log = log or (lambda message: None)
    samples = _samples_path(output, task)
    if done is None:
        done = _read_samples(samples, {u.variant.key: u.variant for u in units})
    todo = {u.variant.key: [item for item in u.items if (u.variant.key, item.id) not in done] for u in units}
    resumed = sum(len(u.items) - len(todo[u.variant.key]) for u in units)
    if bar is not None and resumed:
        bar.update(resumed)
    log(f"task {task.name}: {sum(len(u.items) for u in units)} documents in {len(units)} variants"
        + (f", {resumed} already in {samples.name}" if resumed else ""))
    start, answered, truncated_before = time.time(), [0], engines.truncated()
    with samples.open("a", encoding="utf-8") as sink:
        for piece in _chunks(units, todo):
            requests = [unit.kind.requests(items) for unit, items in piece]
            flat = [r for rs in requests for r in rs]
            shown = _DocumentBar(bar, sum(len(items) for _, items in piece), len(flat), start, answered)
            answers = engines.answer(flat, shown.requests_done)
            offset, lines = 0, []
            for (unit, items), rs in zip(piece, requests):
                v = unit.variant
                for record in unit.kind.score(items, answers[offset: offset + len(rs)]):
                    record.update(key=v.key, subset=v.subset, variant=dict(v.axes), signature=v.signature)
                    lines.append(json.dumps(record, ensure_ascii=False) + "\n")
                    done[(v.key, record["id"])] = record
                offset += len(rs)
            _append(sink, samples, lines)
            shown.finish()
    records = [done[(u.variant.key, item.id)] for u in units for item in u.items]
    aggregate = units[0].kind.aggregate if units else (lambda rs: {"n": 0})
    summary = summarise(records, aggregate, task.main_metric, task.axes, task.breakdown, task.axis_groups)
    metric_signatures = units[0].kind.signatures() if units and hasattr(units[0].kind, "signatures") else {}
    bad_rows = report_bad_rows(task.name, units)
    search = {u.variant.key: u.kind.report() for u in units if hasattr(u.kind, "report") and u.kind.report()}
    return {"task": task.name, "version": task.version, "kind": task.kind, "protocol": task.protocol,
            "signature": task.signature, "source": task.source, "license": task.license,
            "languages": {s: m for s, m in task.subsets.items()}, "main_metric": task.main_metric,
            **summary, "metric_signatures": metric_signatures, **({"search": search} if search else {}),
            **({"bad_rows": bad_rows} if bad_rows else {}), **({"chat": chat} if (chat := chat_summary(units)) else {}),
            **({"translations": pairs} if (pairs := translation_pairs(units)) else {}),
            "seconds": round(time.time() - start, 2), "resumed": resumed, "truncated": engines.truncated() - truncated_before}


def translation_pairs(units) -> dict:
    """Each variant's languages (FLORES-200 codes) where its task file names them."""
    return {u.variant.key: {"source": u.variant.translation.source, "target": u.variant.translation.target}
            for u in units if u.variant.translation is not None}


def _devices() -> dict:
    from .placement.devices import describe

    return describe()


def _model_summary(model) -> dict:
    import numpy as np

    if is_embedder(model):
        return {"source": model.source, "arch": "embedder", "identity": model.identity}
    if getattr(model, "remote", False):
        return {"source": model.source, "arch": "http", "mode": model.mode}
    from .provenance import file_sha256
    from .quant.summary import recorded  # imports JAX: only once a model is loaded

    parts = {"params_by_part": model.params_by_part} if model.config.kind == "seq2seq" else {}
    return {"source": model.source, "arch": model.config.arch, "kind": model.config.kind, "params": model.num_params,
            **parts, "dtype": np.dtype(model.dtype).name, "sha256": file_sha256(model.source),
            "quantization": recorded(model.quantization)}


def evaluate(model, tasks: list, output: Path | str, *, data: Path | str | None = None, task_dirs=(),
             limit: int | None = None, dtype: str = "auto", batch_size: int | None = None, progress: bool = True,
             compile_cache: bool = True, overrides: dict | None = None, sample: int | None = None, log=None,
             mesh=None, quantize: str | list[str] = "keep") -> dict:
    """Run `tasks` (names, NAME:SUBSETS, .yaml paths or TaskConfig) on `model` (a spec that
    load_model accepts, resolved once here, its ModelSource, or a LoadedModel); write samples and
    results.json under `output`.
    overrides: task-file fields set for every named task, e.g. {"choice_orders": ["original",
    "shuffle:3", "gold-first", "gold-last"]} or {"fewshot": {"n": 0}}. mesh: 'auto', 'data=D,model=M'
    or (D, M) (placement/devices.py); dtype 'auto': bfloat16 on GPU/TPU, float32 on CPU; quantize: as
    load_model's (keep, none, int8, int4), or a list of them: the model loaded once per entry and
    run on the same prepared tasks into output/<entry>/ (compare/quantization.py compares them);
    returns {"runs": {entry: results}} then."""
    log = log or (lambda message: print(message, file=sys.stderr))
    output = Path(output)
    started, embedded_before = time.time(), auxiliary_stats()  # retrievers embed while tasks are prepared
    configs = [c for t in tasks for c in ([t] if isinstance(t, TaskConfig) else find_tasks(t, task_dirs, overrides))]
    model = resolved(model)  # the one description of the model every step below reads
    configs = [resolve_chat(c, model) for c in configs]  # before prompts are built and signatures compared
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise BabelevalError(f"task {next(n for n in names if names.count(n) > 1)!r} given twice: give it once, "
                             "with the subsets as NAME:A,B")
    prepared = [prepare_task(c, Path(data) if data is not None else None, limit, sample) for c in configs]
    settings = dict(started=started, embedded_before=embedded_before, limit=limit, sample=sample, dtype=dtype,
                    batch_size=batch_size, progress=progress, compile_cache=compile_cache, overrides=overrides, mesh=mesh)
    if not isinstance(quantize, str):
        if not _is_source(model) or len(set(quantize)) != len(quantize):
            raise BabelevalError("several --quantize choices need a model spec (loaded once per choice), each given once")
        return {"runs": {q: _evaluate_prepared(model, configs, prepared, output / q, log, quantize=q,
                                               **{**settings, "started": time.time()}) for q in quantize}}
    return _evaluate_prepared(model, configs, prepared, output, log, quantize=quantize, **settings)


def resolved(model):
    """A model spec resolved once, at the run's edge, into its ModelSource (loading/source.py:
    path, format, config, chat template, quantization); a loaded, remote or embedder model as it is."""
    if isinstance(model, (str, Path)) and not is_embedder_spec(model):
        from .loading.source import model_source

        return model_source(model)
    return model


def _is_source(model) -> bool:
    if getattr(model, "remote", False) or is_embedder(model):
        return False  # (a remote run imports no model code)
    from .loading.source import ModelSource

    return isinstance(model, ModelSource)


def _evaluate_prepared(model, configs, prepared, output: Path, log, **settings) -> dict:
    """evaluate's run of tasks already prepared: the output folder, resume, the run log, _run."""
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BabelevalError(f"{output}: cannot create the output folder ({exc.strerror})") from None
    # read once, before the model loads: a samples file of other templates is refused at once
    previous = [_read_samples(_samples_path(output, c), {u.variant.key: u.variant for u in units})
                for c, units in zip(configs, prepared)]
    runlog = RunLog(output, log)
    runlog.info(f"babeleval run: {' '.join(sys.argv)}; tasks {', '.join(c.name for c in configs)}; output {output}")
    try:
        return _run(model, configs, prepared, previous, output, runlog, **settings)
    except BaseException as exc:
        runlog.info(f"stopped: {type(exc).__name__}: {exc}")
        raise
    finally:
        runlog.close()


def _run(model, configs, prepared, previous, output: Path, log, *, started, embedded_before, limit, sample, dtype, batch_size,
         progress, compile_cache, overrides, mesh=None, quantize="keep") -> dict:
    remote = getattr(model, "remote", False)
    if not remote:
        from . import engine  # noqa: F401  (JAX gets its CPU devices before the model is loaded)
    if not remote:
        from .engine.compile_cache import enable_compilation_cache, skip_compilation_cache

        enable_compilation_cache() if compile_cache else skip_compilation_cache()
    if isinstance(model, str) and is_embedder_spec(model):
        model = embedder(model)
    if _is_source(model):
        from .loading import load_model

        log(f"loading {model.spec} ...")
        model = load_model(model, dtype=dtype, mesh=mesh, quantize=quantize)  # each tensor straight into its shards
    check_translations(model, configs)  # a translation model's refusals, before any task runs
    engines = Engines(model, batch_size, mesh=mesh)
    task_results = {}
    for config, units, done in zip(configs, prepared, previous):
        total = sum(len(u.items) for u in units)
        if progress:
            from tqdm import tqdm

            with tqdm(total=total, desc=config.name, unit="doc", file=sys.stderr) as bar:
                task_results[config.name] = run_task(engines, config, units, output, bar, log.info, done)
        else:
            task_results[config.name] = run_task(engines, config, units, output, None, log.info, done)
        result = task_results[config.name]
        log.info(f"task {config.name}: {result['main_metric']} {result['main_score']} over {result['metrics'].get('n')} "
                 f"records in {result['seconds']} s ({result['resumed']} resumed, {result['truncated']} truncated)")
    from . import __version__
    from .provenance import run_provenance

    summary = {"schema_version": SCHEMA_VERSION, "babeleval": __version__, **run_provenance(),
               "seconds": round(time.time() - started, 2), "model": _model_summary(model), "limit": limit, "sample": sample,
               "overrides": overrides, "devices": None if remote else {**_devices(), **engines.placement()}, "tasks": task_results,
               "engine": {**engines.stats(), **({"other_embedders": other} if (other := auxiliary_stats(embedded_before)) else {})}}
    write_json_atomic(output / "results.json", summary)
    log.info(f"wrote {output / 'results.json'}")
    return summary
