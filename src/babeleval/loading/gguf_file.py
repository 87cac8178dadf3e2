"""Read a GGUF file into what the Hugging Face path produces: a config.json-like dict,
a state dict under HF names, and a `tokenizers` tokenizer.

The header is read by gguf_reader (its metadata in one pass). Tensors of the block types in
quant/layouts.py (Q4_0/1, Q5_0/1, Q8_0, Q2_K-Q6_K) stay quantized (a QArray of the file's blocks,
dequantized inside the model's forward); F16/BF16/F32 become float32; any other type (IQ*, TQ*,
...) is dequantized to float32 by the gguf package, with one warning line naming the types. Names
and two llama.cpp conventions are undone here:
Q/K rows permuted for interleaved RoPE (llama arch) and Gemma norms stored as 1 + w; a mixture
of experts' stacked expert tensors keep their stacking (loading/names.py splits nothing).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import BabelevalError
from ..quant import LAYOUTS, QArray, from_blocks
from ..runlog import LOGGER
from .gguf_reader import UNDECODABLE, GGUFFile

ARCHS = {"llama": "llama", "mistral": "mistral", "qwen2": "qwen2", "qwen3": "qwen3", "gemma": "gemma",
         "gemma2": "gemma2", "gemma3": "gemma3_text", "qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe",
         "command-r": "cohere", "cohere2": "cohere2", "olmo2": "olmo2", "olmoe": "olmoe", "gptneox": "gpt_neox",
         "phi3": "phi3"}
# llama.cpp's MoE graphs renormalise the top-k router weights for Qwen3-MoE (and Mixtral, a llama
# file with experts), not for Qwen2-MoE or OLMoE
NORM_TOPK = {"qwen3moe": True, "qwen2moe": False, "olmoe": False, "llama": True}
NAMES = [
    (r"token_embd", "model.embed_tokens"),
    (r"output_norm", "model.norm"),
    (r"output", "lm_head"),
    (r"blk\.(\d+)\.attn_q", r"model.layers.\1.self_attn.q_proj"),
    (r"blk\.(\d+)\.attn_k", r"model.layers.\1.self_attn.k_proj"),
    (r"blk\.(\d+)\.attn_v", r"model.layers.\1.self_attn.v_proj"),
    (r"blk\.(\d+)\.attn_qkv", r"model.layers.\1.self_attn.qkv_proj"),  # Phi-3: rows q, k, v
    (r"blk\.(\d+)\.attn_output", r"model.layers.\1.self_attn.o_proj"),
    (r"blk\.(\d+)\.attn_q_norm", r"model.layers.\1.self_attn.q_norm"),
    (r"blk\.(\d+)\.attn_k_norm", r"model.layers.\1.self_attn.k_norm"),
    (r"blk\.(\d+)\.ffn_gate", r"model.layers.\1.mlp.gate_proj"),
    (r"blk\.(\d+)\.ffn_up", r"model.layers.\1.mlp.up_proj"),
    (r"blk\.(\d+)\.ffn_down", r"model.layers.\1.mlp.down_proj"),
    (r"blk\.(\d+)\.attn_norm", r"model.layers.\1.input_layernorm"),
    (r"blk\.(\d+)\.post_attention_norm", r"model.layers.\1.post_attention_layernorm"),
    (r"blk\.(\d+)\.post_ffw_norm", r"model.layers.\1.post_feedforward_layernorm"),
    # mixtures of experts: the router, the experts stacked [experts, out, in], Qwen2-MoE's shared expert
    (r"blk\.(\d+)\.ffn_gate_inp", r"model.layers.\1.mlp.gate"),
    (r"blk\.(\d+)\.ffn_(gate|up|down)_exps", r"model.layers.\1.mlp.experts.\2_proj"),
    (r"blk\.(\d+)\.ffn_gate_inp_shexp", r"model.layers.\1.mlp.shared_expert_gate"),
    (r"blk\.(\d+)\.ffn_(gate|up|down)_shexp", r"model.layers.\1.mlp.shared_expert.\2_proj"),
]
# GPT-NeoX (Pythia) keeps its own HF names; llama.cpp's converter reorders the fused qkv rows from
# per-head [q, k, v] blocks to all queries, then keys, then values
NEOX = r"gpt_neox.layers.\1."
GPTNEOX_NAMES = [
    (r"token_embd", "gpt_neox.embed_in"),
    (r"output_norm", "gpt_neox.final_layer_norm"),
    (r"output", "embed_out"),
    (r"blk\.(\d+)\.attn_norm", NEOX + "input_layernorm"),
    (r"blk\.(\d+)\.ffn_norm", NEOX + "post_attention_layernorm"),
    (r"blk\.(\d+)\.attn_qkv", NEOX + "attention.qkv_proj"),
    (r"blk\.(\d+)\.attn_output", NEOX + "attention.dense"),
    (r"blk\.(\d+)\.ffn_up", NEOX + "mlp.dense_h_to_4h"),
    (r"blk\.(\d+)\.ffn_down", NEOX + "mlp.dense_4h_to_h"),
]
GEMMA_27B_LAYERS = {"gemma2": 46, "gemma3": 62}  # how llama.cpp tells Gemma 2/3 27B (query_pre_attn_scalar 144/168)
SANDWICH = ("gemma2", "gemma3")  # their ffn_norm is the pre-feedforward norm


def _reader(path: Path) -> GGUFFile:
    try:
        return GGUFFile(path)
    except Exception as exc:  # ValueErrors/struct errors: a cut, corrupt or foreign file
        raise BabelevalError(f"{path}: not a readable GGUF file ({exc})") from exc


def _metadata(reader: GGUFFile) -> dict:
    return {key: value for key, value in reader.metadata.items() if value is not UNDECODABLE}  # text that is not UTF-8


def gguf_config(meta: dict, tensor_names: set, path: Path) -> dict:
    arch = meta.get("general.architecture")
    if arch not in ARCHS:
        raise BabelevalError(f"{path}: unsupported GGUF architecture {arch!r}; supported: {', '.join(ARCHS)}")
    get = lambda key, default=None: meta.get(f"{arch}.{key}", default)
    heads = get("attention.head_count")
    hidden = get("embedding_length")
    layers = get("block_count")
    head_dim = get("attention.key_length") or hidden // heads
    experts = get("expert_count")
    raw = {
        "model_type": "mixtral" if arch == "llama" and experts else ARCHS[arch],
        "vocab_size": get("vocab_size") or len(meta["tokenizer.ggml.tokens"]),
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "intermediate_size": get("feed_forward_length"),
        "num_attention_heads": heads,
        "num_key_value_heads": get("attention.head_count_kv", heads),
        "head_dim": head_dim,
        "max_position_embeddings": get("context_length", 8192),
        **({"layer_norm_eps": get("attention.layer_norm_epsilon")}  # a LayerNorm family (Cohere)
           if get("attention.layer_norm_epsilon") is not None
           else {"rms_norm_eps": get("attention.layer_norm_rms_epsilon", 1e-6)}),
        "rope_parameters": {"rope_type": "default", "rope_theta": get("rope.freq_base", 10000.0)},
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"),
        "attn_logit_softcapping": get("attn_logit_softcapping"),
        "final_logit_softcapping": get("final_logit_softcapping"),
        "tie_word_embeddings": "output.weight" not in tensor_names,
    }
    if arch == "gptneox":  # Pythia: partial rotary, parallel residual (exact GELU, as its HF config says)
        raw.update(rotary_pct=get("rope.dimension_count", head_dim // 4) / head_dim, hidden_act="gelu",
                   use_parallel_residual=bool(get("use_parallel_residual", True)))
    if arch == "phi3":  # a sliding window on every layer (Phi-3-mini-4k: 2,047) where the file has one
        raw["sliding_window"] = get("attention.sliding_window")
    if arch in ("command-r", "cohere2"):  # Aya 23, Command R/R+; Aya Expanse, Command R7B
        raw.update(logit_scale=get("logit_scale", 1.0), use_qk_norm="blk.0.attn_q_norm.weight" in tensor_names)
    if arch in ("cohere2", "gemma2", "gemma3"):
        # llama.cpp's fixed layer patterns (Gemma 2: alternating from a sliding first layer; Gemma 3:
        # five sliding then a global one; Cohere 2: three then one) and Gemma 3's local rotary base
        # (10,000) are transformers' legacy defaults: the layer types are derived in one place
        # (hf_config._layer_types), as for a hub config.json without layer_types
        raw["sliding_window"] = get("attention.sliding_window")
    if experts:  # every layer a mixture of experts
        raw.update(num_experts=experts, num_experts_per_tok=get("expert_used_count"),
                   moe_intermediate_size=get("expert_feed_forward_length"), norm_topk_prob=NORM_TOPK.get(arch, False),
                   shared_expert_intermediate_size=get("expert_shared_feed_forward_length", 0), mlp_only_layers=[])
    if arch in ("gemma2", "gemma3"):  # llama.cpp's query scale: by head size, but hidden / heads for the 27B models
        raw["query_pre_attn_scalar"] = hidden // heads if layers == GEMMA_27B_LAYERS[arch] else head_dim
    return raw


def _unpermute(w, heads: int):
    """Undo llama.cpp's row permutation of Q/K (interleaved -> rotate-half RoPE layout); a quantized
    tensor's rows move whole (its blocks run along the row)."""
    rows = w.shape[0]
    if isinstance(w, QArray):
        return w.rows(_unpermute(np.arange(rows), heads))
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_tensors(reader, meta: dict, raw: dict) -> dict[str, np.ndarray]:
    return dict(gguf_items(reader, meta, raw, keep_quantized=False))


FLOAT_TYPES = ("F32", "F16", "BF16")


def tensor_value(tensor, dequantized: set | None = None, keep: bool = True):
    """A QArray of the tensor's blocks (a matrix of a type in quant/layouts.py, keep), else float32
    by gguf's own dequantizers (its type's name added to `dequantized` unless it is kept or a float)."""
    from gguf.quants import dequantize

    kind = tensor.tensor_type.name
    shape = tuple(reversed([int(x) for x in tensor.shape]))
    if kind in LAYOUTS and keep and len(shape) >= 2:
        return from_blocks(kind, tensor.data, shape)
    if kind in LAYOUTS:
        dequantized = None
    if kind not in FLOAT_TYPES and dequantized is not None:
        dequantized.add(kind)
    return np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32).reshape(shape)


def gguf_items(reader, meta: dict, raw: dict, keep_quantized: bool = True):
    """(HF name, QArray or float32 array) per tensor, read one at a time from the memory-mapped
    file (keep_quantized=False: every tensor dequantized to float32, the dense reference)."""
    arch = meta["general.architecture"]
    names = [(re.compile(rf"^{src}\.(weight|bias)$"), dst) for src, dst in (GPTNEOX_NAMES if arch == "gptneox" else NAMES)]
    ffn_norm = "pre_feedforward_layernorm" if arch in SANDWICH else "post_attention_layernorm"
    names.append((re.compile(r"^blk\.(\d+)\.ffn_norm\.(weight|bias)$"), rf"model.layers.\1.{ffn_norm}"))
    dequantized: set = set()
    for tensor in reader.tensors:
        if tensor.name.startswith("rope_factors_"):
            continue  # LongRoPE's factors: read into the config (_longrope)
        array = tensor_value(tensor, dequantized, keep_quantized)  # a copy: the file's pages can go
        reader.release(tensor.data)
        for regex, dst in names:
            match = regex.match(tensor.name)
            if match:
                name = f"{match.expand(dst)}.{match.groups()[-1]}"
                break
        else:
            name = tensor.name  # left for the name check to report
        if arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = raw["num_attention_heads"] if "q_proj" in name else raw["num_key_value_heads"]
            array = _unpermute(array, heads)
        if arch.startswith("gemma") and "norm" in name:
            array = array - 1.0
        if arch == "phi3" and name.endswith("mlp.up_proj.weight"):
            name = name.replace("up_proj", "gate_up_proj")  # Phi-3's ffn_up holds gate, then up
        if name.endswith("shared_expert_gate.weight"):
            array = array.reshape(1, -1)  # a [hidden] vector in the file, a [1, hidden] Linear in HF's
        yield name, array
    if dequantized:
        LOGGER.warning(f"{reader.path}: {', '.join(sorted(dequantized))} tensors dequantized to float32 at load "
                       f"(kept quantized: {', '.join(LAYOUTS)})")


def gguf_tokenizer(meta: dict):
    """Build the tokenizer the file describes with transformers' GGUF converters (no torch import)."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer

    fields = {name: meta[f"tokenizer.{key}"] for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items()
              if f"tokenizer.{key}" in meta}
    tokenizer, _ = convert_gguf_tokenizer(meta["general.architecture"], fields)
    add_bos = meta.get("tokenizer.ggml.add_bos_token", fields.get("tokenizer_type") == "llama")
    return tokenizer, bool(add_bos)


def read_gguf(path: Path, keep_quantized: bool = True):
    """(config.json-like dict, (name, array) pairs read lazily, metadata)."""
    reader = _reader(path)
    meta = _metadata(reader)
    raw = gguf_config(meta, {t.name for t in reader.tensors}, path)
    _longrope(reader, meta, raw)
    return raw, gguf_items(reader, meta, raw, keep_quantized), meta


def _longrope(reader, meta: dict, raw: dict) -> None:
    """Phi-3's LongRoPE: llama.cpp keeps the long and short factors as tensors and the original
    context and attention factor as keys; they go back into HF's rope parameters."""
    factors = {t.name: t for t in reader.tensors if t.name.startswith("rope_factors_")}
    if not factors:
        return
    from gguf.quants import dequantize

    arch = meta["general.architecture"]
    get = lambda key, default=None: meta.get(f"{arch}.{key}", default)
    read = lambda name: np.asarray(dequantize(factors[name].data, factors[name].tensor_type), np.float64).ravel().tolist()
    head_dim = raw["head_dim"]
    raw["original_max_position_embeddings"] = get("rope.scaling.original_context_length")
    raw["rope_parameters"] = {
        "rope_type": "longrope", "rope_theta": raw["rope_parameters"]["rope_theta"],
        "long_factor": read("rope_factors_long.weight"), "short_factor": read("rope_factors_short.weight"),
        "partial_rotary_factor": get("rope.dimension_count", head_dim) / head_dim,
        "original_max_position_embeddings": raw["original_max_position_embeddings"],
        "attention_factor": get("rope.scaling.attn_factor"),
    }


def read_gguf_metadata(path: Path) -> dict:
    """The key/value metadata only (tokenizer, architecture), without dequantising tensors."""
    return _metadata(_reader(path))
