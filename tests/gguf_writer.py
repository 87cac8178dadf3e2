"""Write a tiny HF folder's model as a GGUF file laid out as llama.cpp's converter writes one
(gguf-py's tensor names, every expert of a layer stacked [experts, out, in], F32), with the
tokenizer fields of SmolLM2's packaged GGUF (a real BPE tokenizer): the GGUF loader's parity
tests read it and compare with transformers' model of the folder."""
from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

import numpy as np

# config.json model_type -> (GGUF architecture, gguf-py's MODEL_ARCH member)
ARCHS = {"qwen2_moe": ("qwen2moe", "QWEN2MOE"), "qwen3_moe": ("qwen3moe", "QWEN3MOE"),
         "cohere": ("command-r", "COMMAND_R"), "cohere2": ("cohere2", "COHERE2"), "mixtral": ("llama", "LLAMA"),
         "olmoe": ("olmoe", "OLMOE"), "olmo2": ("olmo2", "OLMO2"), "gpt_neox": ("gptneox", "GPTNEOX"),
         "phi3": ("phi3", "PHI3"), "gemma2": ("gemma2", "GEMMA2"), "gemma3_text": ("gemma3", "GEMMA3")}
TOKENIZER_KEYS = ("model", "pre", "tokens", "token_type", "merges", "bos_token_id", "eos_token_id",
                  "unknown_token_id", "padding_token_id", "add_bos_token")


def stacked(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-expert tensors (mlp.experts.N.gate_proj, Mixtral's block_sparse_moe.experts.N.w1)
    stacked into one per layer and projection."""
    out, experts = {}, {}
    for name, array in tensors.items():
        match = re.match(r"(.*\.experts)\.(\d+)\.(\w+\.weight)$", name)
        if match:
            experts.setdefault(f"{match[1]}.{match[3]}", {})[int(match[2])] = array
        else:
            out[name] = array
    out.update({name: np.stack([parts[i] for i in sorted(parts)]) for name, parts in experts.items()})
    return out


@functools.lru_cache(maxsize=1)
def tokenizer_fields() -> dict:
    """{key: (value, GGUF type, is an array)} of SmolLM2's GGUF tokenizer, read once."""
    import gguf

    from babeleval.loading import resolve

    fields = gguf.GGUFReader(str(resolve("smollm2-135m"))).fields
    return {key: (fields[f"tokenizer.ggml.{key}"].contents(), fields[f"tokenizer.ggml.{key}"].types[-1],
                  fields[f"tokenizer.ggml.{key}"].types[0] == gguf.GGUFValueType.ARRAY) for key in TOKENIZER_KEYS}


def write_gguf(folder: Path, path: Path) -> Path:
    import gguf
    from safetensors.numpy import load_file

    cfg = json.loads((folder / "config.json").read_text())
    arch, member = ARCHS[cfg["model_type"]]
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[member], cfg["num_hidden_layers"])
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(cfg["num_attention_heads"])
    writer.add_head_count_kv(cfg.get("num_key_value_heads") or cfg["num_attention_heads"])
    writer.add_key_length(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])
    rope = cfg.get("rope_parameters") or {}
    rope = rope.get("full_attention", rope)  # Gemma 3: the global layers' theta (the local one is llama.cpp's fixed 10,000)
    writer.add_rope_freq_base(rope.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    if rope.get("rope_type") == "longrope":  # Phi-3: factors as tensors, the rest as keys
        original = rope.get("original_max_position_embeddings") or cfg["original_max_position_embeddings"]
        factor = cfg["max_position_embeddings"] / original
        head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
        writer.add_rope_dimension_count(int(head_dim * rope.get("partial_rotary_factor", 1.0)))
        writer.add_rope_scaling_orig_ctx_len(original)
        writer.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(factor) / math.log(original)) if factor > 1 else 1.0)
        for kind in ("long", "short"):
            writer.add_tensor(f"rope_factors_{kind}.weight", np.asarray(rope[f"{kind}_factor"], np.float32))
    if arch == "gptneox":
        head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
        writer.add_rope_dimension_count(int(head_dim * rope.get("partial_rotary_factor", cfg.get("rotary_pct", 0.25))))
        writer.add_parallel_residual(cfg.get("use_parallel_residual", True))
    if "rms_norm_eps" in cfg:
        writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    else:  # Cohere's LayerNorm
        writer.add_layer_norm_eps(cfg["layer_norm_eps"])
    if cfg.get("logit_scale") is not None:
        writer.add_logit_scale(cfg["logit_scale"])
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):  # Gemma 2
        if cfg.get(key):
            getattr(writer, f"add_{key}")(cfg[key])
    if cfg.get("sliding_window"):
        writer.add_sliding_window(cfg["sliding_window"])
    if "num_experts_per_tok" in cfg:
        writer.add_expert_count(cfg.get("num_experts") or cfg["num_local_experts"])
        writer.add_expert_used_count(cfg["num_experts_per_tok"])
        if "moe_intermediate_size" in cfg:  # Mixtral's experts have the dense width (feed_forward_length)
            writer.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    if cfg.get("shared_expert_intermediate_size"):
        writer.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    for key, (value, kind, array) in tokenizer_fields().items():
        if array:
            writer.add_array(f"tokenizer.ggml.{key}", value)
        else:
            writer.add_key_value(f"tokenizer.ggml.{key}", value, kind)
    for name, array in stacked(load_file(folder / "model.safetensors")).items():
        target = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if target is None:
            raise KeyError(f"{name}: no GGUF name for {arch}")
        if arch.startswith("gemma") and "norm" in target:
            array = array + 1.0  # llama.cpp stores Gemma's norm weights with the 1 added
        if target.endswith("ffn_gate_inp_shexp.weight"):
            array = array.reshape(-1)  # llama.cpp keeps the shared expert's gate as a vector
        if arch == "gptneox" and "attn_qkv" in target:  # per-head [q, k, v] blocks -> all q, all k, all v
            heads = cfg["num_attention_heads"]
            array = array.reshape(heads, 3, -1, *array.shape[1:]).swapaxes(0, 1).reshape(array.shape)
        if arch == "llama" and target.endswith(("attn_q.weight", "attn_k.weight")):  # interleaved rotary rows
            heads = cfg["num_attention_heads"] if "attn_q" in target else cfg["num_key_value_heads"]
            array = array.reshape(heads, 2, array.shape[0] // heads // 2, -1).swapaxes(1, 2).reshape(array.shape)
        writer.add_tensor(target, np.ascontiguousarray(array, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
