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
ARCHS = {"llama": ("llama", "LLAMA"), "qwen2_moe": ("qwen2moe", "QWEN2MOE"), "qwen3_moe": ("qwen3moe", "QWEN3MOE"),
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
    """{key: (value, GGUF type, is an array)} of SmolLM2's GGUF tokenizer, read once (babeleval's
    one-pass header reader: gguf.GGUFReader takes ~20 s over its 49k-token vocabulary)."""
    import gguf

    from babeleval.loading import resolve
    from babeleval.loading.gguf_reader import GGUFFile

    meta = GGUFFile(resolve("smollm2-135m")).metadata
    scalar = lambda v: (gguf.GGUFValueType.BOOL if isinstance(v, bool) else gguf.GGUFValueType.STRING
                        if isinstance(v, str) else gguf.GGUFValueType.UINT32)
    return {key: (value, scalar(value), isinstance(value, list))
            for key in TOKENIZER_KEYS if (value := meta.get(f"tokenizer.ggml.{key}")) is not None}


def random_llama(folder: Path, hidden: int, inner: int, heads: int, kv_heads: int, layers: int, experts: int = 0,
                 tied: bool = False, seed: int = 0) -> Path:
    """A random llama (experts > 0: Mixtral) HF folder with SmolLM2's vocabulary, written with numpy
    alone (config.json, model.safetensors: no torch, for files only babeleval reads)."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    vocab, head_dim = 49152, hidden // heads
    w = lambda *shape: (rng.normal(0, 0.05, shape)).astype(np.float32)
    norm = lambda: (1 + rng.normal(0, 0.1, hidden)).astype(np.float32)
    tensors = {"model.embed_tokens.weight": w(vocab, hidden), "model.norm.weight": norm()}
    if not tied:
        tensors["lm_head.weight"] = w(vocab, hidden)
    for i in range(layers):
        at = f"model.layers.{i}."
        tensors.update({at + "input_layernorm.weight": norm(), at + "post_attention_layernorm.weight": norm(),
                        at + "self_attn.q_proj.weight": w(heads * head_dim, hidden),
                        at + "self_attn.k_proj.weight": w(kv_heads * head_dim, hidden),
                        at + "self_attn.v_proj.weight": w(kv_heads * head_dim, hidden),
                        at + "self_attn.o_proj.weight": w(hidden, heads * head_dim)})
        if experts:
            tensors[at + "block_sparse_moe.gate.weight"] = w(experts, hidden)
            for e in range(experts):
                for name, shape in (("w1", (inner, hidden)), ("w3", (inner, hidden)), ("w2", (hidden, inner))):
                    tensors[f"{at}block_sparse_moe.experts.{e}.{name}.weight"] = w(*shape)
        else:
            tensors.update({at + "mlp.gate_proj.weight": w(inner, hidden), at + "mlp.up_proj.weight": w(inner, hidden),
                            at + "mlp.down_proj.weight": w(hidden, inner)})
    config = dict(model_type="mixtral" if experts else "llama", vocab_size=vocab, hidden_size=hidden,
                  intermediate_size=inner, num_hidden_layers=layers, num_attention_heads=heads,
                  num_key_value_heads=kv_heads, max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0,
                  tie_word_embeddings=tied, bos_token_id=1, eos_token_id=2,
                  **(dict(num_local_experts=experts, num_experts_per_tok=2) if experts else {}))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


# Where each block type holds its float16 scale (and minimum): bytes into the block, from
# ggml-common.h's block_q4_0 ... block_q6_K (written here, not read from babeleval's table)
FLOAT16_AT = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,),
              "Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}
K_QUANTS = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")  # gguf-py has no quantizer for these


def random_blocks(shape: tuple, qtype: str, rng, scale: float = 1e-4) -> np.ndarray:
    """Random `qtype` blocks for a float tensor of `shape` (rows of whole blocks): every code and
    sub-scale byte random, the float16 scales (and minimums) about `scale`. As stored: [..., row bytes]."""
    import gguf
    from gguf.quants import quant_shape_to_byte_shape

    kind = gguf.GGMLQuantizationType[qtype]
    byte_shape = quant_shape_to_byte_shape(shape, kind)
    block_bytes = gguf.GGML_QUANT_SIZES[kind][1]
    blocks = rng.integers(0, 256, (*byte_shape[:-1], byte_shape[-1] // block_bytes, block_bytes), dtype=np.uint8)
    for at in FLOAT16_AT[qtype]:
        value = np.abs(rng.normal(scale, scale / 3, blocks.shape[:-1])).astype(np.float16)
        blocks[..., at:at + 2] = value.view(np.uint8).reshape(*blocks.shape[:-1], 2)
    return blocks.reshape(byte_shape)


def quantized_bytes(array: np.ndarray, qtype: str, rng) -> np.ndarray:
    """A float32 [out, in] tensor as `qtype` blocks: gguf's quantizer where it has one, else
    (K-quants) random blocks with float16 scales of about 1e-4 (values up to ~0.1)."""
    import gguf

    if qtype not in K_QUANTS:
        return gguf.quants.quantize(array, gguf.GGMLQuantizationType[qtype])
    return random_blocks(array.shape, qtype, rng)


def write_gguf(folder: Path, path: Path, qtype: str | None = None, types: dict | None = None) -> Path:
    """qtype (Q4_0 ... Q6_K): every matrix (and stacked experts) written as such blocks; types: GGUF
    tensor names written in another type (a Q4_K_M file's few layers held wider)."""
    import gguf
    from safetensors.numpy import load_file

    cfg = json.loads((folder / "config.json").read_text())
    arch, member = ARCHS[cfg["model_type"]]
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[member], cfg["num_hidden_layers"])
    writer = gguf.GGUFWriter(str(path), arch)
    rng = np.random.default_rng(0)
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
        kind = (types or {}).get(target, qtype)
        if kind and array.ndim >= 2:
            data = quantized_bytes(np.ascontiguousarray(array, dtype=np.float32), kind, rng)
            writer.add_tensor(target, data, raw_dtype=gguf.GGMLQuantizationType[kind])
            continue
        writer.add_tensor(target, np.ascontiguousarray(array, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
