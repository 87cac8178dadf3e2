"""One evaluation run: for each task, questions -> requests -> engine -> per-question
records (appended to samples.jsonl as they are computed) -> aggregate -> results.json.

A run that is killed resumes: questions whose records are already in the task's
samples file are not scored again.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from .engine.scoring import Scorer
from .tasks.multiple_choice import aggregate, requests_for, score_questions
from .tasks.registry import get_task

CHUNK = 256  # questions scored between two appends to samples.jsonl


def _done_records(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    done = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
            done[record["id"]] = record
        except (json.JSONDecodeError, KeyError):
            continue  # a line cut by a kill: that question is scored again
    return done


def load_questions(task_name: str, limit: int | None = None) -> list:
    questions = get_task(task_name).load()
    return questions[:limit] if limit else questions


def run_task(model, task_name: str, output: Path, questions: list, scorer: Scorer | None = None,
             progress=None) -> dict:
    """Score `questions` (from load_questions) of task_name, appending to its samples file."""
    spec = get_task(task_name)
    samples = output / f"samples_{task_name}.jsonl"
    done = _done_records(samples)
    todo = [q for q in questions if q.id not in done]
    scorer = scorer or Scorer(model)
    start = time.time()
    with samples.open("a", encoding="utf-8") as sink:
        for i in range(0, len(todo), CHUNK):
            chunk = todo[i: i + CHUNK]
            for record in score_questions(chunk, scorer.loglikelihood(requests_for(chunk))):
                sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                done[record["id"]] = record
            sink.flush()
            if progress:
                progress(len(chunk))
    records = [done[q.id] for q in questions]
    metrics = aggregate(records)
    return {"task": task_name, "languages": list(spec.languages), "main_metric": spec.main_metric,
            "main_score": metrics[spec.main_metric], "metrics": metrics, "source": spec.source,
            "seconds": round(time.time() - start, 2), "resumed": len(questions) - len(todo)}


def write_results(output: Path, model, task_results: list[dict], scorer: Scorer) -> Path:
    stats = scorer.stats
    summary = {
        "model": {"source": model.source, "arch": model.config.arch, "params": model.num_params,
                  "dtype": np.dtype(model.dtype).name},
        "tasks": task_results,
        "engine": {"requests": stats.requests, "questions": stats.questions, "lines": stats.lines, "tokens_computed": stats.tokens_computed,
                   "tokens_padded": stats.tokens_padded, "compiled_programs": stats.compiles.count,
                   "seconds": round(stats.seconds, 2)},
    }
    path = output / "results.json"
    path.write_text(json.dumps(summary, indent=1, ensure_ascii=False))
    return path
