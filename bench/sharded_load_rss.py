"""Peak host memory while loading a 1B-parameter checkpoint into device shards.

Writes a Llama-3.2-1B-shaped HF folder (its config.json; random bf16 weights, 1.24 B
parameters = 2.47 GB, as a 3-file sharded safetensors index) once, then loads it in a fresh
process with load_model(dtype="bfloat16", mesh=...) and reports the peak resident set size
(VmHWM: ru_maxrss would carry the writing parent's peak across exec) above the process's
size before loading, against the weights' bytes. On CPU the
"devices" live in the same process, so the placed weights themselves are in that figure
(1.0x weights is the floor); what streaming removes is the whole-model host copy before
placement (the loader before issue 23 held every tensor as float32 on the host first: 2x the
bf16 weights, then placed them: 3x in all).

  XLA_FLAGS=--xla_force_host_platform_device_count=8 nice -n 10 python bench/sharded_load_rss.py [--mesh data=1,model=8]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256, "hidden_size": 2048,
          "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
          "head_dim": 64, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
          "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 8192},
          "tie_word_embeddings": True, "bos_token_id": 128000, "eos_token_id": 128001, "torch_dtype": "bfloat16",
          "hidden_act": "silu", "attention_bias": False, "mlp_bias": False}


def shapes(c=CONFIG):
    d, i, kv = c["hidden_size"], c["intermediate_size"], c["num_key_value_heads"] * c["head_dim"]
    yield "model.embed_tokens.weight", (c["vocab_size"], d)
    yield "model.norm.weight", (d,)
    for n in range(c["num_hidden_layers"]):
        p = f"model.layers.{n}."
        yield from ((p + "self_attn.q_proj.weight", (d, d)), (p + "self_attn.k_proj.weight", (kv, d)),
                    (p + "self_attn.v_proj.weight", (kv, d)), (p + "self_attn.o_proj.weight", (d, d)),
                    (p + "mlp.gate_proj.weight", (i, d)), (p + "mlp.up_proj.weight", (i, d)),
                    (p + "mlp.down_proj.weight", (d, i)), (p + "input_layernorm.weight", (d,)),
                    (p + "post_attention_layernorm.weight", (d,)))


def write_folder(folder: Path, files: int = 3) -> None:
    import torch
    from safetensors.torch import save_file

    from babeleval.loading import resolve

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    shutil.copy(resolve("all-minilm-l6-v2") / "tokenizer.json", folder / "tokenizer.json")  # any tokenizer will do
    items = list(shapes())
    per_file, weight_map = -(-len(items) // files), {}
    generator = torch.Generator().manual_seed(0)
    for k in range(files):
        name = f"model-{k + 1:05d}-of-{files:05d}.safetensors"
        part = {key: (torch.randn(shape, generator=generator) * 0.02).to(torch.bfloat16)
                for key, shape in items[k * per_file:(k + 1) * per_file]}
        save_file(part, str(folder / name), metadata={"format": "pt"})
        weight_map.update({key: name for key in part})
        del part
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))


def high_water_mark() -> int:
    """Peak resident bytes of this process image (/proc/self/status VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def measure(folder: str, mesh: str) -> None:
    """In a fresh process: load and print the peak RSS above the size before loading."""
    import jax

    from babeleval.placement.sharding import bytes_per_device
    from babeleval.loading import load_model

    jax.devices()
    before = high_water_mark()
    model = load_model(folder, dtype="bfloat16", mesh=None if mesh == "none" else mesh)
    peak = high_water_mark()
    weights = sum(x.nbytes for x in jax.tree.leaves(model.params))
    per_device = bytes_per_device(model.params)
    print(json.dumps({"mesh": mesh, "params": model.num_params, "weight_bytes": weights,
                      "weight_bytes_per_device": max(per_device.values()), "devices": len(per_device),
                      "rss_before": before, "peak_rss": peak, "peak_above_before": peak - before,
                      "peak_above_before_over_weights": round((peak - before) / weights, 3)}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mesh", default="data=1,model=8")
    parser.add_argument("--folder", default=None, help="keep the written folder here (default: a temporary one)")
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        return measure(args.measure, args.mesh)
    folder = Path(args.folder or tempfile.mkdtemp(prefix="llama1b-"))
    try:
        if not (folder / "config.json").exists():
            write_folder(folder)
        subprocess.run([sys.executable, __file__, "--measure", str(folder), "--mesh", args.mesh], check=True)
    finally:
        if not args.folder:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
