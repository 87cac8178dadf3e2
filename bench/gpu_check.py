"""ONE prepared device check for a GPU machine, under 8 minutes, writing one JSON; nothing to
carry but the tree and bench/.gpu/ (bench/gpu_prepare.sh fills it here; bench/gpu_run.sh runs
this there). No real weights travel: every model is random, of a real shape, built on the device.

  bash bench/gpu_run.sh [--budget-s 420]           (on the device; writes $OUT/gpu.json)
  python bench/gpu_check.py --dry-run --budget-s 60  (CPU: tiny shapes; tests/test_gpu_check.py)
  python bench/gpu_check.py --write-reference       (CPU: bench/reference/tiny_random_fp32.json)

Parts, in order, each skipped (named in "skipped") once the time budget is spent:
  reference   a tiny random model's fp32 log-probs against the file computed on CPU
  <shape>     per model shape (SmolLM2-135M, Gemma 3 270M, Llama-3.2-1B, Llama-3-8B, a scaled-down
              Qwen3-MoE, mT5-base: the encoder-decoder engines, each context encoded once): scoring tokens/s and MFU on XCOPA sw+ta (plain) and 5-shot SIB-200 in
              MILU's prompt (the demonstrations prefix-cached), generation prompts/s and new
              tokens/s on XQuAD-hi (32 new tokens), each with its first call's seconds (compiles
              included) and programs, bf16 against fp32 log-probs of the same random weights
              (shapes up to 1B), peak device memory; an 80-layer narrow Llama: compile vs depth;
              the 8B shape again with its matmul weights int8 and int4 (`--quantize`'s rules,
              quantized on the device: "<shape>@int8"), its weight bytes and MFU on dequantized FLOPs
  milu_projection  full MILU 5-shot (79,600 questions) at the 8B shape's prefix-cached rate
Requests are real benchmark text (bench/.gpu/data, else ../shared/data) through SmolLM2's
tokenizer (bench/.gpu/tokenizer, else the packaged GGUF's): the same tokens for every shape.
MFU = 2 x active parameters x tokens/s / peak (default: H100 dense BF16, 989 TFLOP/s).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREPARED = ROOT / "bench" / ".gpu"
REFERENCE = ROOT / "bench" / "reference" / "tiny_random_fp32.json"
MILU_QUESTIONS = 79_600
# Tokens computed per MILU question once its subject's 5 demonstrations are cached: the question
# (~60 SmolLM2 tokens in Indic scripts, more in Latin ones) plus 4 options (~8 each) after it.
MILU_TOKENS_PER_QUESTION = 100

LLAMA = dict(model_type="llama", hidden_act="silu", rms_norm_eps=1e-5, tie_word_embeddings=False)
SHAPES = {  # config.json fields of the real checkpoints (random weights)
    "smollm2-135m": dict(LLAMA, vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                         rope_theta=100000.0, tie_word_embeddings=True),
    "gemma3-270m": dict(model_type="gemma3_text", vocab_size=262144, hidden_size=640, intermediate_size=2048,
                        num_hidden_layers=18, num_attention_heads=4, num_key_value_heads=1, head_dim=256,
                        max_position_embeddings=32768, sliding_window=512, query_pre_attn_scalar=256,
                        rope_theta=1_000_000.0, rope_local_base_freq=10_000.0, sliding_window_pattern=6),
    "llama-3.2-1b": dict(LLAMA, vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
                         rope_theta=500000.0, tie_word_embeddings=True),
    "llama-3-8b": dict(LLAMA, vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192, rope_theta=500000.0),
    "qwen3-moe-small": dict(model_type="qwen3_moe", vocab_size=49152, hidden_size=512, intermediate_size=1024,
                            moe_intermediate_size=1024, num_hidden_layers=8, num_attention_heads=8,
                            num_key_value_heads=4, head_dim=64, num_experts=8, num_experts_per_tok=2,
                            norm_topk_prob=True, max_position_embeddings=8192, rms_norm_eps=1e-6),
    # depth without width (issue 51): the layer stack scanned, its programs compile as a 2-layer one's
    "llama-narrow-80l": dict(LLAMA, vocab_size=49152, hidden_size=256, intermediate_size=512, num_hidden_layers=80,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192),
    "mt5-base": dict(model_type="mt5", vocab_size=250112, d_model=768, d_kv=64, d_ff=2048, num_layers=12,
                     num_heads=12, feed_forward_proj="gated-gelu", tie_word_embeddings=False),
}
TINY_T5 = dict(d_model=64, d_kv=16, d_ff=128, num_layers=1, num_heads=4, vocab_size=49152)
TINY = dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=64, num_hidden_layers=1,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=49152)
FP32_COMPARED = ("smollm2-135m", "gemma3-270m", "llama-3.2-1b", "mt5-base")
QUANTIZED_RUNS = ("llama-3-8b@int8", "llama-3-8b@int4")  # "<shape>@<--quantize method>" (issue 49)
RUNS = (*SHAPES, *QUANTIZED_RUNS)


def config(name: str, dry_run: bool):
    from babeleval.loading.hf_config import config_from_hf

    tiny = TINY_T5 if "d_model" in SHAPES[name] else TINY
    raw = dict(SHAPES[name], **(tiny if dry_run else {}))
    if dry_run and raw.get("sliding_window"):
        raw["sliding_window"] = 16
    return config_from_hf(raw, name)


def tokenizer():
    """SmolLM2's tokenizer: the carried tokenizer.json, else the packaged GGUF's."""
    from babeleval.loading.tokenizer import HFTokenizer, Special

    folder = PREPARED / "tokenizer"
    if (folder / "tokenizer.json").exists():
        from tokenizers import Tokenizer

        special = json.loads((folder / "special.json").read_text())
        return HFTokenizer(Tokenizer.from_file(str(folder / "tokenizer.json")), Special(**special))
    from babeleval.loading import load_model

    return load_model("smollm2-135m").tokenizer


def random_model(cfg, dtype, tok, portable: bool = False):
    """Random weights made on the device by the model's own initialisers; portable: drawn by
    numpy instead (the same numbers whatever the jax or flax version: the reference's model)."""
    import jax
    import numpy as np

    from babeleval.loading import LoadedModel
    from babeleval.models import abstract_params, init_params

    if portable:
        rng = np.random.default_rng(0)
        draw = lambda path, leaf: np.asarray(  # noqa: E731  (norm scales near 1, the rest near 0)
            (1.0 if jax.tree_util.keystr(path).endswith("['scale']") else 0.0) + rng.normal(0, 0.05, leaf.shape), dtype)
        params = jax.tree_util.tree_map_with_path(draw, abstract_params(cfg, dtype))
    else:
        params = jax.jit(lambda key: init_params(cfg, key, dtype))(jax.random.PRNGKey(0))
    return LoadedModel(cfg, params, tok, dtype, f"random {cfg.arch}")


def quantized(model, method: str):
    """The model with its matmul weights quantized as `--quantize method` does at load
    (quant/at_load.py), on the device in one program; the dense weights dropped."""
    import dataclasses

    import jax
    import jax.numpy as jnp

    from babeleval.placement.sharding import path_name
    from babeleval.quant.at_load import quantize_leaf

    change = jax.jit(lambda params: jax.tree_util.tree_map_with_path(
        lambda p, x: quantize_leaf(path_name(p), x, method, jnp), params), donate_argnums=0)
    return dataclasses.replace(model, params=change(model.params), quantize=method)


def weight_bytes(model) -> int:
    import jax

    from babeleval.quant import is_quantized

    return sum(x.nbytes for x in jax.tree.leaves(model.params, is_leaf=is_quantized))


def active_params(model) -> float:
    """Parameters one token runs through (a quantized weight: the dense one's): a mixture of
    experts counts k of its experts."""
    import jax

    from babeleval.quant import is_quantized

    total = 0
    for path, leaf in jax.tree_util.tree_flatten_with_path(model.params, is_leaf=is_quantized)[0]:
        share = model.config.experts_per_token / model.config.num_experts if "experts_" in jax.tree_util.keystr(path) else 1
        total += leaf.size * share
    return total


def peak_memory() -> int | None:
    import jax

    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def timed(make, call):
    """(engine, seconds of a second, warm call, seconds of the first: its compiles included)."""
    start = time.perf_counter()
    call(make())
    first = time.perf_counter() - start
    engine = make()
    start = time.perf_counter()
    call(engine)
    return engine, time.perf_counter() - start, first


def scoring(model, requests, peak: float) -> dict:
    from babeleval.engines import scorer_for

    engine, seconds, first = timed(lambda: scorer_for(model), lambda e: e.loglikelihood(requests))
    s = engine.stats
    tokens = s.tokens_computed / seconds
    return {"requests": len(requests), "seconds": round(seconds, 3), "first_call_seconds": round(first, 3),
            "programs": getattr(getattr(s, "compiles", None), "count", None), "tokens_per_s": round(tokens),
            "tokens_without_sharing_per_s": round(s.tokens_alone / seconds), "mfu": 2 * active_params(model) * tokens / peak,
            "prefix_tokens_reused": s.prefix_tokens_reused, "contexts_encoded": s.contexts_encoded}


def generation(model, prompts) -> dict:
    from babeleval.engines import generator_for

    engine, seconds, first = timed(lambda: generator_for(model), lambda e: e.generate(prompts))
    return {"prompts": len(prompts), "seconds": round(seconds, 3), "first_call_seconds": round(first, 3),
            "prompts_per_s": len(prompts) / seconds,
            "new_tokens_per_s": engine.stats.new_tokens / seconds}


def logprobs(model, requests):
    import numpy as np

    from babeleval.engines import scorer_for

    return np.asarray([r.logprob for r in scorer_for(model).loglikelihood(requests)])


def bf16_vs_fp32(cfg, tok, requests) -> dict:
    import jax.numpy as jnp
    import numpy as np

    fp32, bf16 = (logprobs(random_model(cfg, d, tok), requests) for d in (jnp.float32, jnp.bfloat16))
    diff = np.abs(fp32 - bf16)
    return {"max_abs_diff": float(diff.max()), "mean_abs_diff": float(diff.mean()),
            "max_rel_diff": float((diff / np.maximum(np.abs(fp32), 1e-9)).max())}


def reference_requests(data: Path):
    """The reference's requests: the dry run's XCOPA requests (8 documents each of sw, ta), first 24."""
    return workloads(data, True)[0][:24]


def check_reference(tok, data: Path) -> dict:
    import jax.numpy as jnp
    import numpy as np

    want = json.loads(REFERENCE.read_text())
    got = logprobs(random_model(config(want["shape"], True), jnp.float32, tok, portable=True), reference_requests(data))
    diff = np.abs(got - np.asarray(want["logprob"]))
    return {"requests": len(got), "max_abs_diff": float(diff.max()), "within_1e-3": bool(diff.max() <= 1e-3)}


def workloads(data: Path, dry_run: bool):
    from babeleval.evaluate import prepare_task
    from babeleval.requests import Generate
    from babeleval.tasks.files import find_task

    limit = 8 if dry_run else None
    xcopa = [r for u in prepare_task(find_task("xcopa:sw,ta"), data, limit=limit) for r in u.kind.requests(u.items)]
    sib = [r for u in prepare_task(find_task("sib200-milu:swh_Latn"), data, limit=4 if dry_run else 100)
           for r in u.kind.requests(u.items)]
    xquad = json.loads((data / "xquad" / "xquad.hi.json").read_text(encoding="utf-8"))
    prompts = [f"Context: {p['context']}\nQuestion: {qa['question']}\nAnswer:"
               for art in xquad["data"] for p in art["paragraphs"] for qa in p["qas"][:1]][: 4 if dry_run else 256]
    return xcopa, sib, [Generate(p, ("\n",), 4 if dry_run else 32) for p in prompts]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("gpu.json"))
    parser.add_argument("--peak-tflops", type=float, default=989.0)
    parser.add_argument("--budget-s", type=float, default=420.0)
    parser.add_argument("--data", type=Path, default=None, help="default: bench/.gpu/data, else ../shared/data")
    parser.add_argument("--shapes", default=",".join(RUNS))
    parser.add_argument("--dry-run", action="store_true", help="tiny versions of every shape (a CPU check of the script)")
    parser.add_argument("--write-reference", action="store_true", help="write the tiny fp32 reference (on CPU)")
    args = parser.parse_args()
    data = args.data or (PREPARED / "data" if (PREPARED / "data").exists() else ROOT.parent / "shared" / "data")
    start, peak = time.perf_counter(), args.peak_tflops * 1e12

    import jax
    import jax.numpy as jnp

    from babeleval.loading import run_choices
    from babeleval.models.attention import attention_choice, fused_implementation

    tok = tokenizer()
    xcopa, sib, prompts = workloads(data, args.dry_run)
    if args.write_reference:
        shape = "smollm2-135m"
        lp = logprobs(random_model(config(shape, True), jnp.float32, tok, portable=True), reference_requests(data))
        REFERENCE.write_text(json.dumps({"shape": shape, "tiny": TINY, "logprob": lp.tolist()}))
        print(f"wrote {REFERENCE}")
        return
    dtype = jnp.float32 if jax.default_backend() == "cpu" else jnp.bfloat16
    report = {"device": str(jax.devices()[0].device_kind), "platform": jax.default_backend(),
              "jax": jax.__version__, "dtype": jnp.dtype(dtype).name,
              "attention": fused_implementation(attention_choice()) or "babeleval kernels", "budget_s": args.budget_s,
              "dry_run": args.dry_run, "models": {}, "skipped": [], "errors": {}}

    def part(name, fn, into=None):
        if time.perf_counter() - start > args.budget_s:
            report["skipped"].append(name)
            return
        try:
            (report if into is None else into)[name.split("/")[-1]] = fn()
        except Exception as exc:  # noqa: BLE001  (one JSON whatever fails: the rest still runs)
            report["errors"][name] = f"{type(exc).__name__}: {exc}"[:500]
        args.out.write_text(json.dumps(report, indent=1))

    part("reference", lambda: check_reference(tok, data))
    for name in args.shapes.split(","):
        if time.perf_counter() - start > args.budget_s:
            report["skipped"].append(name)
            continue
        shape, _, method = name.partition("@")
        cfg = run_choices(config(shape, args.dry_run))
        entry = report["models"][name] = {"arch": cfg.arch}
        try:
            model = random_model(cfg, dtype, tok)
            entry["params"], entry["active_params"] = model.num_params, int(active_params(model))
            model = quantized(model, method) if method else model
        except Exception as exc:  # noqa: BLE001
            report["errors"][name] = f"{type(exc).__name__}: {exc}"[:500]
            continue
        entry["weight_bytes"] = weight_bytes(model)
        part(f"{name}/scoring", lambda: scoring(model, xcopa, peak), entry)
        part(f"{name}/scoring_5shot", lambda: scoring(model, sib, peak), entry)
        part(f"{name}/generation", lambda: generation(model, prompts), entry)
        if name in FP32_COMPARED:
            part(f"{name}/bf16_vs_fp32", lambda: bf16_vs_fp32(cfg, tok, xcopa), entry)
        entry["peak_memory_bytes"] = peak_memory()
        model = None  # one model's weights on the device at a time
    rate = report["models"].get("llama-3-8b", {}).get("scoring_5shot", {}).get("tokens_per_s")
    if rate:
        seconds = MILU_QUESTIONS * MILU_TOKENS_PER_QUESTION / rate
        report["milu_projection"] = {"questions": MILU_QUESTIONS, "tokens_per_question": MILU_TOKENS_PER_QUESTION,
                                     "tokens_per_s": rate, "seconds": round(seconds), "hours": round(seconds / 3600, 2)}
        print(f"MILU 5-shot on Llama-3-8B shapes: {MILU_QUESTIONS} questions x {MILU_TOKENS_PER_QUESTION} tokens "
              f"at {rate} tokens/s = {seconds / 60:.1f} min")
    report["seconds"] = round(time.perf_counter() - start, 1)
    args.out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
