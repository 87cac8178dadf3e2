"""Write a tiny HF folder's model as a GGUF file laid out as llama.cpp's converter writes one
(gguf-py's tensor names, every expert of a layer stacked [experts, out, in], F32), with the
tokenizer fields of SmolLM2's packaged GGUF (a real BPE tokenizer): the GGUF loader's parity
tests read it and compare with transformers' model of the folder."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

ARCHS = {"qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe"}  # config.json model_type -> GGUF architecture
TOKENIZER_KEYS = ("model", "pre", "tokens", "token_type", "merges", "bos_token_id", "eos_token_id",
                  "unknown_token_id", "padding_token_id", "add_bos_token")


def stacked(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-expert tensors (mlp.experts.N.gate_proj) stacked into one per layer and projection."""
    out, experts = {}, {}
    for name, array in tensors.items():
        match = re.match(r"(.*\.mlp\.experts)\.(\d+)\.(\w+_proj\.weight)$", name)
        if match:
            experts.setdefault(f"{match[1]}.{match[3]}", {})[int(match[2])] = array
        else:
            out[name] = array
    out.update({name: np.stack([parts[i] for i in sorted(parts)]) for name, parts in experts.items()})
    return out


def write_gguf(folder: Path, path: Path) -> Path:
    import gguf
    from safetensors.numpy import load_file

    from babeleval.loading import resolve

    cfg = json.loads((folder / "config.json").read_text())
    arch = ARCHS[cfg["model_type"]]
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], cfg["num_hidden_layers"])
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(cfg["num_attention_heads"])
    writer.add_head_count_kv(cfg["num_key_value_heads"])
    writer.add_key_length(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])
    writer.add_rope_freq_base(cfg.get("rope_parameters", {}).get("rope_theta", cfg.get("rope_theta", 10000.0)))
    writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    writer.add_expert_count(cfg.get("num_experts") or cfg["num_local_experts"])
    writer.add_expert_used_count(cfg["num_experts_per_tok"])
    writer.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    if cfg.get("shared_expert_intermediate_size"):
        writer.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    source = gguf.GGUFReader(str(resolve("smollm2-135m")))
    for key in TOKENIZER_KEYS:
        field = source.fields[f"tokenizer.ggml.{key}"]
        value, kind = field.contents(), field.types[-1]
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            writer.add_array(f"tokenizer.ggml.{key}", value)
        else:
            writer.add_key_value(f"tokenizer.ggml.{key}", value, kind)
    for name, array in stacked(load_file(folder / "model.safetensors")).items():
        target = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if target is None:
            raise KeyError(f"{name}: no GGUF name for {arch}")
        if target.endswith("ffn_gate_inp_shexp.weight"):
            array = array.reshape(-1)  # llama.cpp keeps the shared expert's gate as a vector
        writer.add_tensor(target, np.ascontiguousarray(array, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
