"""An 8B GGUF on this host (issue 49): a file of Llama-3-8B's shapes (32 layers, hidden 4096, MLP
14336, 32 heads / 8 KV heads of 128, vocabulary 128,256, untied head) written as Q4_K_M blocks,
loaded and scored with peak RSS <= 1.3 x its size + 1 GiB.

The weights are random but valid blocks (tests/gguf_writer.random_blocks: every code and sub-scale
byte random, float16 scales ~1e-4, so activations stay finite); the types are llama.cpp's for
Q4_K_M: Q4_K everywhere, Q6_K for output.weight and for attn_v and ffn_down in the layers its
use_more_bits picks (half of them), F32 norms. The tokenizer is SmolLM2's (real BPE) with unique
unreachable tokens appended up to 128,256 entries. Tensors are streamed to the file one at a time.

Each measurement runs in a fresh process: load_model alone (VmHWM after it), then the whole
`babeleval run --model FILE --task xcopa:LANG --limit N` (peak RSS from wait4, wall seconds, and
the scoring engine's tokens computed / its seconds from results.json, compiling included). XLA_FLAGS
in the environment reach the run and are recorded.

  python bench/gguf_8b.py [--layers 32] [--lang sw] [--limit 100] [--file PATH] [--write-only]
      [--skip-load] [--skip-run] [--mesh data=1,model=1]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

HIDDEN, INNER, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 4096, 14336, 32, 8, 128, 128256
GIB = 1 << 30


def use_more_bits(i: int, n: int) -> bool:
    """llama.cpp's choice of the layers whose attn_v / ffn_down Q4_K_M writes as Q6_K."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensor_plan(layers: int) -> list[tuple[str, tuple, str]]:
    """(GGUF name, dense [out, in] shape, type) in the order written."""
    plan = [("token_embd.weight", (VOCAB, HIDDEN), "Q4_K")]
    for i in range(layers):
        wide = "Q6_K" if use_more_bits(i, layers) else "Q4_K"
        at = f"blk.{i}."
        plan += [(at + "attn_norm.weight", (HIDDEN,), "F32"),
                 (at + "attn_q.weight", (HEADS * HEAD_DIM, HIDDEN), "Q4_K"),
                 (at + "attn_k.weight", (KV_HEADS * HEAD_DIM, HIDDEN), "Q4_K"),
                 (at + "attn_v.weight", (KV_HEADS * HEAD_DIM, HIDDEN), wide),
                 (at + "attn_output.weight", (HIDDEN, HEADS * HEAD_DIM), "Q4_K"),
                 (at + "ffn_norm.weight", (HIDDEN,), "F32"),
                 (at + "ffn_gate.weight", (INNER, HIDDEN), "Q4_K"),
                 (at + "ffn_up.weight", (INNER, HIDDEN), "Q4_K"),
                 (at + "ffn_down.weight", (HIDDEN, INNER), wide)]
    return plan + [("output_norm.weight", (HIDDEN,), "F32"), ("output.weight", (VOCAB, HIDDEN), "Q6_K")]


def write_file(path: Path, layers: int, seed: int = 0) -> Path:
    """The Q4_K_M file, streamed tensor by tensor (the writer never holds more than one)."""
    import gguf
    from gguf.quants import quant_shape_to_byte_shape

    from gguf_writer import random_blocks, tokenizer_fields

    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part")
    writer = gguf.GGUFWriter(str(part), "llama")
    writer.add_name(f"random Llama-3-8B shapes, {layers} layers, Q4_K_M blocks")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    writer.add_block_count(layers)
    writer.add_context_length(8192)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(INNER)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_rope_freq_base(500000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(VOCAB)
    fields = tokenizer_fields()
    tokens, types = list(fields["tokens"][0]), list(fields["token_type"][0])
    extra = VOCAB - len(tokens)
    tokens += [f"<dummy_{i:06d}>" for i in range(extra)]  # normal tokens no merge reaches: never produced
    types += [int(gguf.TokenType.NORMAL)] * extra
    for key, (value, kind, array) in fields.items():
        value = {"tokens": tokens, "token_type": types}.get(key, value)
        if array:
            writer.add_array(f"tokenizer.ggml.{key}", value)
        else:
            writer.add_key_value(f"tokenizer.ggml.{key}", value, kind)
    plan = tensor_plan(layers)
    for name, shape, kind in plan:
        if kind == "F32":
            writer.add_tensor_info(name, shape, np.dtype(np.float32), 4 * shape[0])
        else:
            qtype = gguf.GGMLQuantizationType[kind]
            byte_shape = quant_shape_to_byte_shape(shape, qtype)
            writer.add_tensor_info(name, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    rng = np.random.default_rng(seed)
    for name, shape, kind in plan:
        if kind == "F32":
            writer.write_tensor_data((1 + rng.normal(0, 0.1, shape)).astype(np.float32))
        else:
            writer.write_tensor_data(random_blocks(shape, kind, rng))
    writer.close()
    part.rename(path)
    return path


def high_water_mark() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def resident() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def measure_load(path: str) -> None:
    """(fresh process) load_model's peak RSS and what it holds, as one JSON line."""
    import jax

    from babeleval.loading import load_model
    from babeleval.quant import is_quantized

    jax.devices()
    before = high_water_mark()
    start = time.perf_counter()
    model = load_model(path)
    seconds = time.perf_counter() - start
    leaves = jax.tree.leaves(model.params, is_leaf=is_quantized)
    kinds: dict = {}
    for x in leaves:
        kind = x.layout if is_quantized(x) else np.dtype(x.dtype).name
        kinds[kind] = kinds.get(kind, 0) + int(x.nbytes)
    print(json.dumps({"file_bytes": Path(path).stat().st_size, "params": model.num_params,
                      "weight_bytes": sum(kinds.values()), "weight_bytes_by_kind": kinds, "rss_before": before,
                      "peak_rss_load": high_water_mark(), "rss_after_load": resident(),
                      "load_seconds": round(seconds, 2)}), flush=True)


def measure_run(path: Path, lang: str, limit: int, data: str, mesh: str | None) -> dict:
    """The whole `babeleval run` in a child process: its peak RSS (wait4), wall seconds, and the
    scoring engine's tokens computed and seconds (results.json)."""
    output = Path(tempfile.mkdtemp(prefix="gguf8b-run-"))
    command = [sys.executable, "-m", "babeleval.cli.main", "run", "--model", str(path), "--task", f"xcopa:{lang}",
               "--limit", str(limit), "--data", data, "--output", str(output)] + (["--mesh", mesh] if mesh else [])
    flags = os.environ.get("XLA_FLAGS")
    print("$ " + (f"XLA_FLAGS='{flags}' " if flags else "") + "babeleval " + " ".join(command[3:]), flush=True)
    start = time.perf_counter()
    child = subprocess.Popen(command)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"babeleval run failed ({os.waitstatus_to_exitcode(status)})")
    results = json.loads((output / "results.json").read_text())
    scoring = results["engine"]["scoring"]
    task = results["tasks"]["xcopa"]
    return {"peak_rss_run": usage.ru_maxrss * 1024, "wall_seconds": round(wall, 1),
            "requests": scoring["requests"], "tokens_computed": scoring["tokens_computed"],
            "scoring_seconds": scoring["seconds"],
            "tokens_per_second": round(scoring["tokens_computed"] / scoring["seconds"], 2),
            "compiled_programs": scoring["compiled_programs"], "main_score": task["main_score"],
            "mesh": results["devices"].get("mesh"), "xla_flags": flags, "output": str(output)}


def main() -> None:
    from babeleval.paths import cache_dir

    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--lang", default="sw")
    parser.add_argument("--limit", type=int, default=100, help="XCOPA documents scored")
    parser.add_argument("--data", default=os.environ.get("BABELEVAL_DATA", str(Path(__file__).resolve().parents[2]
                                                                              / "shared" / "data")))
    parser.add_argument("--file", default=None, help="where the GGUF is (written there if absent)")
    parser.add_argument("--mesh", default=None, help="passed to babeleval run (default: its auto)")
    parser.add_argument("--write-only", action="store_true")
    parser.add_argument("--skip-load", action="store_true")
    parser.add_argument("--skip-run", action="store_true")
    parser.add_argument("--measure-load", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_load:
        return measure_load(args.measure_load)
    path = Path(args.file or cache_dir() / "bench" / f"llama3-8b-shapes-{args.layers}L-Q4_K_M.gguf")
    if not path.exists():
        start = time.perf_counter()
        write_file(path, args.layers)
        print(f"wrote {path} in {time.perf_counter() - start:.1f} s", flush=True)
    size = path.stat().st_size
    target = 1.3 * size + GIB
    print(json.dumps({"file": str(path), "layers": args.layers, "file_bytes": size, "target_peak_rss": int(target)}),
          flush=True)
    if args.write_only:
        return
    report = {}
    if not args.skip_load:
        out = subprocess.run([sys.executable, __file__, "--measure-load", str(path)], check=True,
                             capture_output=True, text=True).stdout
        report.update(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(report), flush=True)
    if not args.skip_run:
        report.update(measure_run(path, args.lang, args.limit, args.data, args.mesh))
    peak = max(report.get("peak_rss_load", 0), report.get("peak_rss_run", 0))
    print(json.dumps(report), flush=True)
    print(f"file {size / 1e9:.3f} GB, target 1.3 x file + 1 GiB = {target / 1e9:.3f} GB; peak RSS "
          f"load {report.get('peak_rss_load', 0) / 1e9:.3f} GB, run {report.get('peak_rss_run', 0) / 1e9:.3f} GB: "
          f"{'PASS' if peak <= target else 'FAIL'}"
          + (f"; {report['tokens_per_second']} tokens/s scored" if "tokens_per_second" in report else ""), flush=True)


if __name__ == "__main__":
    main()
