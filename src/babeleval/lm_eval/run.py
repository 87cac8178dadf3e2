"""`babeleval lm-eval`: lm-eval's own run (simple_evaluate, its task files, its metrics, its
EvaluationTracker writing results_*.json and samples_*.jsonl as `lm_eval --output_path` does)
with BabelevalLM as the model, and the engine's work beside lm-eval's table."""
from __future__ import annotations

import time

from babeleval.errors import BabelevalError
from babeleval.lm_eval import require_lm_eval

LM_EVAL_SEEDS = (0, 1234, 1234, 1234)  # lm_eval's --seed default: python, numpy, torch, fewshot


def parse_seed(text: str | None) -> tuple[int | None, ...]:
    """lm-eval's --seed: one value for all four generators, or four comma-separated ('None' leaves one unset)."""
    if text is None:
        return LM_EVAL_SEEDS
    parts = [None if p.strip() == "None" else int(p) for p in text.split(",")]
    if len(parts) == 1:
        return tuple(parts * 4)
    if len(parts) != 4:
        raise BabelevalError(f"--seed {text}: one value or four (python,numpy,torch,fewshot)")
    return tuple(parts)


def run_lm_eval(model_spec: str, tasks: list[str], include_path: str | None = None, num_fewshot: int | None = None,
                limit: float | None = None, apply_chat_template: bool = False, fewshot_as_multiturn: bool = False,
                system_instruction: str | None = None, log_samples: bool = False, output_path: str | None = None,
                gen_kwargs: str | None = None, seed: str | None = None, dtype: str = "auto",
                batch_size: int | None = None, max_length: int | None = None, mesh=None,
                quantize: str = "keep") -> tuple[dict, dict]:
    """Returns lm-eval's results (samples taken out, as its CLI does) and the engine statistics;
    quantize: as load_model's (model_args and config.model_quantization record it)."""
    require_lm_eval()
    import lm_eval
    from lm_eval.loggers import EvaluationTracker
    from babeleval.lm_eval.model import BabelevalLM
    from babeleval.lm_eval.task_index import task_manager

    start = time.time()
    manager = task_manager(tasks, include_path)
    check_task_names(manager, tasks)
    lm = BabelevalLM(model_spec, dtype=dtype, batch_size=batch_size, max_length=max_length, mesh=mesh,
                     quantize=quantize)
    tracker = EvaluationTracker(output_path=output_path) if output_path else None
    seeds = parse_seed(seed)
    try:
        results = lm_eval.simple_evaluate(
            model=lm, model_args=f"pretrained={model_spec},dtype={dtype},quantize={quantize}", tasks=tasks,
            num_fewshot=num_fewshot, limit=limit, log_samples=log_samples, evaluation_tracker=tracker,
            system_instruction=system_instruction, apply_chat_template=apply_chat_template,
            fewshot_as_multiturn=fewshot_as_multiturn, gen_kwargs=gen_kwargs, task_manager=manager,
            random_seed=seeds[0], numpy_random_seed=seeds[1], torch_random_seed=seeds[2], fewshot_random_seed=seeds[3])
    except FileNotFoundError as exc:  # a task's data_files: relative paths are read from the working directory
        raise BabelevalError(f"{exc} (a task's dataset_kwargs.data_files are read relative to the directory "
                             "babeleval runs in)") from None
    samples = results.pop("samples", None)
    if tracker is not None:
        tracker.save_results_aggregated(results=results, samples=samples)
        for task_name in results["configs"] if samples else ():
            tracker.save_results_samples(task_name=task_name, samples=samples[task_name])
    stats = {**lm.engine_stats(), "total_seconds": round(time.time() - start, 2)}
    return results, stats


def check_task_names(task_manager, tasks: list[str]) -> None:
    """Every name a task, group or tag lm-eval knows (a pattern matching some, or a YAML file),
    else one line naming the closest, before the model loads."""
    import difflib
    from pathlib import Path

    unknown = [t for t in tasks if not Path(t).is_file() and not task_manager.match_tasks([t])]
    if unknown:
        known = task_manager.all_tasks
        hints = [f"{t!r}" + (f" (did you mean {', '.join(close)}?)" if (close := difflib.get_close_matches(t, known, n=3))
                             else "") for t in unknown]
        raise BabelevalError(f"unknown lm-eval task {'; '.join(hints)}; `lm_eval ls tasks` lists them"
                             " (--include-path adds a folder of task YAMLs)")


def stats_lines(stats: dict) -> list[str]:
    """The engine's work in a few lines, beside lm-eval's table."""
    s, g = stats["scoring"], stats["generation"]
    lines = [f"babeleval engine: {stats['seconds']:.1f} s in the model backend, {stats['total_seconds']:.1f} s in all"]
    if s["requests"]:
        saved = 1 - s["tokens_computed"] / max(s["tokens_without_sharing"], 1)
        lines.append(f"  scoring: {s['requests']} requests in {s['seconds']:.1f} s, tokens computed {s['tokens_computed']} "
                     f"vs {s['tokens_without_sharing']} by a no-sharing engine ({100 * saved:.0f}% saved; "
                     f"{s['prefixes']} shared prefixes reused for {s['prefix_tokens_reused']} tokens), "
                     f"{s['duplicates']} duplicates, {s['truncated']} truncated"
                     + (f", {s['contexts_encoded']} contexts encoded once each" if s.get("contexts_encoded") else ""))
    if g["requests"]:
        lines.append(f"  generation: {g['requests']} prompts in {g['seconds']:.1f} s, {g['prompt_tokens']} prompt tokens "
                     f"({g['prefix_tokens_reused']} not prefilled again: shared prefixes), {g['new_tokens']} new tokens, "
                     f"{g['truncated']} truncated")
    return lines


def report(results: dict, stats: dict) -> str:
    from lm_eval.utils import make_table

    text = make_table(results)
    if "groups" in results:
        text += "\n" + make_table(results, "groups")
    return text + "\n" + "\n".join(stats_lines(stats))

