"""Translate a Hugging Face config.json (a dict) into a babeleval config.

Every supported architecture is one entry of FAMILY_FLAGS plus the shared reader
below; adding a Llama-like family is one line.
"""
from __future__ import annotations

from ..errors import BabelevalError
from ..models.config import DecoderConfig, EncoderConfig, Seq2SeqConfig
from .hub_quantized import hub_scheme

GEMMA = dict(norm_offset=1.0, activation="gelu_tanh", embed_scale=True, tie_embeddings=True)
# Cohere (Aya 23, Command R/R+): attention and MLP in parallel from one LayerNorm without bias,
# interleaved rotary, scaled logits; Cohere 2 (Aya Expanse, Command R7B) adds sliding layers
# and leaves the global ones without positions.
COHERE = dict(norm="layer", norm_bias=False, parallel_residual=True, shared_norm=True, rope_interleaved=True,
              qk_norm_shape="per_head", tie_embeddings=True)
FAMILY_FLAGS = {
    "llama": dict(),
    "mistral": dict(),
    "qwen2": dict(qkv_bias=True),
    "qwen3": dict(qk_norm=True),
    "gemma": dict(GEMMA),
    "gemma2": dict(GEMMA, sandwich_norm=True),
    "gemma3_text": dict(GEMMA, sandwich_norm=True, qk_norm=True),
    "cohere": dict(COHERE),
    "cohere2": dict(COHERE, rope_sliding_only=True),
    "olmo2": dict(qk_norm=True, qk_norm_shape="all", pre_norm=False, sandwich_norm=True),  # norms after each branch
    # mixtures of experts (models/moe.py; the expert fields come from _experts)
    "mixtral": dict(),
    "qwen2_moe": dict(),
    "qwen3_moe": dict(qk_norm=True),
    "olmoe": dict(qk_norm=True, qk_norm_shape="all"),
    "glm4_moe": dict(),  # GLM-4.5 / 4.6: sigmoid router with correction bias and groups, ungated shared experts
    "sarvam_moe": dict(qk_norm=True),  # Sarvam's Indic MoE: GLM-4-MoE's blocks under its own tensor names
    "phi3": dict(),  # Phi-3/3.5/4-mini: fused qkv and gate-up projections (loading/names.py), LongRoPE
}
SIGMOID_ROUTED = ("glm4_moe", "sarvam_moe")  # DeepSeek-V3's router (models/moe.py: router)
SLIDING_ALL = ("mistral", "mixtral", "phi3")  # a sliding_window, when set, applies to every layer
QWEN = ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe")  # use_sliding_window / max_window_layers
ENCODERS = ("bert", "xlm-roberta", "roberta")
T5 = ("t5", "mt5", "umt5")
DEFAULT_MAX_LENGTH = 2048  # lm-eval's when neither the config nor the tokenizer gives a length
SEQ2SEQ = T5 + ("m2m_100",)
# config.json model_type -> the checkpoints it covers (`babeleval models`, the README's table)
CHECKPOINTS = {
    "llama": "Llama 2/3/3.1/3.2, SmolLM2, TinyLlama", "mistral": "Mistral 7B", "qwen2": "Qwen2, Qwen2.5",
    "qwen3": "Qwen3 (dense)", "gemma": "Gemma", "gemma2": "Gemma 2", "gemma3_text": "Gemma 3 (text; gemma3 wrappers too)",
    "cohere": "Aya 23, Command R / R+", "cohere2": "Aya Expanse, Command R7B / A", "olmo2": "OLMo 2",
    "phi3": "Phi-3, Phi-3.5, Phi-4-mini", "gpt_neox": "Pythia, GPT-NeoX", "xglm": "XGLM", "gpt2": "GPT-2, mGPT",
    "bloom": "BLOOM, BLOOMZ", "mixtral": "Mixtral 8x7B / 8x22B (MoE)", "qwen2_moe": "Qwen1.5-MoE, Qwen2-57B-A14B (MoE)",
    "qwen3_moe": "Qwen3-30B-A3B, Qwen3-235B-A22B (MoE)", "olmoe": "OLMoE (MoE)",
    "glm4_moe": "GLM-4.5, GLM-4.6 (MoE)", "sarvam_moe": "Sarvam-MoE (Indic MoE)",
    "bert": "BERT, MiniLM (sentence-transformers)", "xlm-roberta": "XLM-R, multilingual-e5, LaBSE-style encoders",
    "roberta": "RoBERTa",
    "t5": "T5 v1.1, Flan-T5, MADLAD-400, Aya-101 (encoder-decoder)", "mt5": "mT5, mT0 (encoder-decoder)",
    "umt5": "umT5 (encoder-decoder)", "m2m_100": "NLLB-200 (dense), M2M100 (encoder-decoder)",
}
SUPPORTED = tuple(FAMILY_FLAGS) + ("gemma3", "gpt2", "bloom", "gpt_neox", "xglm") + ENCODERS + SEQ2SEQ
# What transformers' config classes assume when a hub config.json lacks a key (written before
# transformers stored it): read off transformers 5's configuration_<family>.py.
GEMMA_DEFAULTS = dict(hidden_activation="gelu_pytorch_tanh", sliding_window=4096, query_pre_attn_scalar=256)
HF_DEFAULTS = {
    "gemma": dict(hidden_act="gelu_pytorch_tanh"),
    "gemma2": dict(GEMMA_DEFAULTS, attn_logit_softcapping=50.0, final_logit_softcapping=30.0),
    "gemma3_text": dict(GEMMA_DEFAULTS, rope_theta=1_000_000.0, rope_local_base_freq=10_000.0, sliding_window_pattern=6),
    "qwen2": dict(sliding_window=4096, max_window_layers=28),
    "qwen3": dict(sliding_window=4096, max_window_layers=28),
    "qwen2_moe": dict(sliding_window=4096, max_window_layers=28, qkv_bias=True, decoder_sparse_step=1),
    "qwen3_moe": dict(sliding_window=4096, max_window_layers=28, decoder_sparse_step=1),
    "cohere": dict(logit_scale=0.0625, layer_norm_eps=1e-5),
    "cohere2": dict(logit_scale=0.0625, layer_norm_eps=1e-5, sliding_window=4096, sliding_window_pattern=4),
    "sarvam_moe": dict(routed_scaling_factor=2.5, n_group=1, topk_group=1, first_k_dense_replace=1, n_shared_experts=1,
                       norm_topk_prob=True),
    "glm4_moe": dict(routed_scaling_factor=1.0, n_group=1, topk_group=1, first_k_dense_replace=1, n_shared_experts=1,
                     norm_topk_prob=True),
}


def _rope(raw: dict, layer_kind: str = "full_attention") -> tuple[float, tuple]:
    params = raw.get("rope_parameters") or {}
    if layer_kind in params:  # Gemma 3 keeps one entry per layer type
        params = params[layer_kind]
    params = dict(params or raw.get("rope_scaling") or {})
    theta = params.pop("rope_theta", raw.get("rope_theta", 10000.0))
    if "type" in params:  # the legacy spelling of rope_type (Llama 2 "linear" configs)
        params.setdefault("rope_type", params.pop("type"))
    if params.get("rope_type") in ("longrope", "llama3") and "original_max_position_embeddings" in raw:
        params.setdefault("original_max_position_embeddings", raw["original_max_position_embeddings"])
    if params.get("rope_type", "default") == "default":
        params = {}
    return float(theta), tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in params.items() if v is not None))


def _layer_types(raw: dict, model_type: str, n: int) -> tuple:
    """Per-layer "full" | "sliding": config.json's layer_types, else what transformers derives
    from the legacy keys (Gemma 2 alternates from a sliding first layer, Gemma 3 repeats
    sliding_window_pattern - 1 sliding layers and a global one, Qwen2/3 with use_sliding_window
    slide from max_window_layers on)."""
    kinds = raw.get("layer_types")
    if kinds:
        return tuple("sliding" if k == "sliding_attention" else "full" for k in kinds[:n])
    if model_type == "gemma2":
        return tuple("sliding" if (i + 1) % 2 else "full" for i in range(n))
    if model_type in ("gemma3_text", "cohere2"):
        pattern = raw["sliding_window_pattern"]
        return tuple("sliding" if (i + 1) % pattern else "full" for i in range(n))
    if model_type in QWEN and raw.get("use_sliding_window") and raw.get("sliding_window"):
        return tuple("sliding" if i >= raw["max_window_layers"] else "full" for i in range(n))
    return ()


def _local_theta(raw: dict, model_type: str) -> float | None:
    """Gemma 3's sliding layers rotate with their own theta (rope_parameters' sliding_attention
    entry, or the legacy rope_local_base_freq)."""
    if "sliding_attention" in (raw.get("rope_parameters") or {}):
        return _rope(raw, "sliding_attention")[0]
    if model_type == "gemma3_text":
        return float(raw["rope_local_base_freq"])
    return None


def _activation_name(raw: dict, model_type: str, flags: dict) -> str:
    """transformers' Gemma (1) reads hidden_act only and takes its legacy "gelu" for the tanh
    approximation; Gemma 2/3 read hidden_activation; the rest hidden_act."""
    if model_type == "gemma":
        return "gelu_pytorch_tanh" if raw["hidden_act"] == "gelu" else raw["hidden_act"]
    if model_type.startswith("gemma"):
        return raw["hidden_activation"]
    return raw.get("hidden_act") or flags.get("activation", "silu")


def _llama_like(raw: dict, model_type: str) -> DecoderConfig:
    flags = FAMILY_FLAGS[model_type]
    raw = {**HF_DEFAULTS.get(model_type, {}), **raw}
    hidden = raw["hidden_size"]
    heads = raw["num_attention_heads"]
    head_dim = raw.get("head_dim") or hidden // heads
    n = raw["num_hidden_layers"]
    theta, scaling = _rope(raw)
    rope_params = raw.get("rope_parameters") or {}
    fraction = rope_params.get("full_attention", rope_params).get("partial_rotary_factor") or raw.get("partial_rotary_factor", 1.0)
    layer_types = _layer_types(raw, model_type, n)
    window = raw.get("sliding_window")
    if model_type in SLIDING_ALL and window and not layer_types:
        layer_types = ("sliding",) * n
    if model_type in QWEN and not raw.get("use_sliding_window"):
        window, layer_types = None, ()
    scalar = raw.get("query_pre_attn_scalar")
    return DecoderConfig(
        arch=model_type,
        vocab_size=raw["vocab_size"],
        hidden_size=hidden,
        num_layers=n,
        num_heads=heads,
        num_kv_heads=raw.get("num_key_value_heads") or heads,
        head_dim=head_dim,
        intermediate_size=raw["intermediate_size"],
        max_positions=raw.get("max_position_embeddings", 8192),
        norm_eps=raw.get("rms_norm_eps", raw.get("layer_norm_eps", 1e-6)),
        rope_theta=theta,
        rope_local_theta=_local_theta(raw, model_type),
        rope_fraction=float(fraction),
        rope_scaling=scaling,
        out_bias=bool(raw.get("attention_bias")) and model_type not in ("qwen2",) + SIGMOID_ROUTED,
        mlp_bias=bool(raw.get("mlp_bias")),
        attn_scale=scalar ** -0.5 if scalar else None,
        attn_softcap=raw.get("attn_logit_softcapping"),
        final_softcap=raw.get("final_logit_softcapping"),
        sliding_window=window if layer_types else None,
        layer_types=layer_types,
        bos_token_id=_first(raw.get("bos_token_id")),
        eos_token_id=_first(raw.get("eos_token_id")),
        pad_token_id=_first(raw.get("pad_token_id")),
        **_experts(raw, model_type, n),
        **{**flags, "qkv_bias": flags.get("qkv_bias", False) or bool(raw.get("attention_bias") or raw.get("qkv_bias")),
           "activation": _activation(_activation_name(raw, model_type, flags)),
           "qk_norm": flags.get("qk_norm", False) or bool(raw.get("use_qk_norm")),
           "logit_scale": raw.get("logit_scale"), "tie_embeddings": raw.get("tie_word_embeddings", flags.get("tie_embeddings", False))},
    )


def _gpt2(raw: dict) -> DecoderConfig:
    hidden = raw["n_embd"]
    return DecoderConfig(
        arch="gpt2", vocab_size=raw["vocab_size"], hidden_size=hidden, num_layers=raw["n_layer"],
        num_heads=raw["n_head"], num_kv_heads=raw["n_head"], head_dim=hidden // raw["n_head"],
        intermediate_size=raw.get("n_inner") or 4 * hidden, max_positions=raw["n_positions"],
        norm="layer", norm_eps=raw.get("layer_norm_epsilon", 1e-5), mlp="plain",
        activation=_activation(raw.get("activation_function", "gelu_new")), position="learned",
        qkv_bias=True, out_bias=True, mlp_bias=True, tie_embeddings=True,
        bos_token_id=raw.get("bos_token_id"), eos_token_id=raw.get("eos_token_id"),
    )


def _experts(raw: dict, model_type: str, n: int) -> dict:
    """The mixture-of-experts fields: experts and top-k, the expert MLP's width, which layers
    are sparse (Qwen-MoE: every decoder_sparse_step-th, less mlp_only_layers), renormalised
    top-k weights (Mixtral always; the rest by norm_topk_prob) and Qwen2-MoE's shared expert."""
    experts = raw.get("num_local_experts") or raw.get("num_experts") or raw.get("n_routed_experts") or 0
    if not experts:
        return {}
    step, dense = raw.get("decoder_sparse_step") or 1, set(raw.get("mlp_only_layers") or ())
    layers = tuple(i not in dense and (i + 1) % step == 0 and i >= (raw.get("first_k_dense_replace") or 0)
                   for i in range(n))
    inner = raw.get("moe_intermediate_size") or raw["intermediate_size"]
    sigmoid = model_type in SIGMOID_ROUTED
    return dict(num_experts=experts, experts_per_token=raw["num_experts_per_tok"], moe_intermediate_size=inner,
                moe_norm_topk=model_type == "mixtral" or bool(raw.get("norm_topk_prob")),
                shared_expert_size=inner * (raw.get("n_shared_experts") or 0) if sigmoid
                else raw.get("shared_expert_intermediate_size") or 0,
                shared_expert_gated=not sigmoid, moe_router="sigmoid" if sigmoid else "softmax",
                moe_groups=raw.get("n_group") or 1, moe_topk_groups=raw.get("topk_group") or 1,
                moe_scale=float(raw.get("routed_scaling_factor") or 1.0), moe_layers=() if all(layers) else layers)


def _gpt_neox(raw: dict) -> DecoderConfig:
    """Pythia and GPT-NeoX: LayerNorms with bias, fused qkv, partial rotary (rotary_pct), the
    MLP beside the attention (use_parallel_residual) from a norm of its own."""
    hidden, heads = raw["hidden_size"], raw["num_attention_heads"]
    params = raw.get("rope_parameters") or {}
    return DecoderConfig(
        arch="gpt_neox", vocab_size=raw["vocab_size"], hidden_size=hidden, num_layers=raw["num_hidden_layers"],
        num_heads=heads, num_kv_heads=heads, head_dim=hidden // heads, intermediate_size=raw["intermediate_size"],
        max_positions=raw.get("max_position_embeddings", 2048), norm="layer", norm_eps=raw.get("layer_norm_eps", 1e-5),
        mlp="plain", activation=_activation(raw.get("hidden_act", "gelu")),
        rope_theta=float(params.get("rope_theta", raw.get("rotary_emb_base", 10000.0))),
        rope_fraction=float(params.get("partial_rotary_factor", raw.get("rotary_pct", 0.25))),
        qkv_bias=raw.get("attention_bias", True), out_bias=raw.get("attention_bias", True), mlp_bias=True,
        parallel_residual=raw.get("use_parallel_residual", True), tie_embeddings=raw.get("tie_word_embeddings", False),
        bos_token_id=_first(raw.get("bos_token_id")), eos_token_id=_first(raw.get("eos_token_id")),
        pad_token_id=_first(raw.get("pad_token_id")),
    )


def _xglm(raw: dict) -> DecoderConfig:
    """XGLM: fairseq's sinusoidal positions read 2 rows on, embeddings scaled by sqrt(d_model),
    pre-LayerNorm blocks with biases, a plain GELU MLP, the head tied to the embedding."""
    hidden, heads = raw["d_model"], raw["attention_heads"]
    return DecoderConfig(
        arch="xglm", vocab_size=raw["vocab_size"], hidden_size=hidden, num_layers=raw["num_layers"], num_heads=heads,
        num_kv_heads=heads, head_dim=hidden // heads, intermediate_size=raw["ffn_dim"],
        max_positions=raw.get("max_position_embeddings", 2048), norm="layer", norm_eps=1e-5, mlp="plain",
        activation=_activation(raw.get("activation_function", "gelu")), position="sinusoidal", position_offset=2,
        embed_scale=raw.get("scale_embedding", True), qkv_bias=True, out_bias=True, mlp_bias=True,
        tie_embeddings=raw.get("tie_word_embeddings", True), bos_token_id=_first(raw.get("bos_token_id")),
        eos_token_id=_first(raw.get("eos_token_id")), pad_token_id=_first(raw.get("pad_token_id")),
    )


def _bloom(raw: dict) -> DecoderConfig:
    hidden = raw.get("hidden_size") or raw["n_embed"]
    heads = raw.get("n_head") or raw["num_attention_heads"]
    return DecoderConfig(
        arch="bloom", vocab_size=raw["vocab_size"], hidden_size=hidden, num_layers=raw.get("n_layer") or raw["num_hidden_layers"],
        num_heads=heads, num_kv_heads=heads, head_dim=hidden // heads, intermediate_size=4 * hidden,
        max_positions=raw.get("seq_length", 2048), norm="layer", norm_eps=raw.get("layer_norm_epsilon", 1e-5),
        mlp="plain", activation="gelu_tanh", position="alibi", qkv_bias=True, out_bias=True, mlp_bias=True,
        embed_norm=True, tie_embeddings=True, bos_token_id=raw.get("bos_token_id"),
        eos_token_id=raw.get("eos_token_id"), pad_token_id=raw.get("pad_token_id"),
    )


def _encoder(raw: dict, model_type: str) -> EncoderConfig:
    roberta = model_type in ("xlm-roberta", "roberta")
    pad = raw.get("pad_token_id", 1 if roberta else 0)
    return EncoderConfig(
        arch=model_type, vocab_size=raw["vocab_size"], hidden_size=raw["hidden_size"],
        num_layers=raw["num_hidden_layers"], num_heads=raw["num_attention_heads"],
        intermediate_size=raw["intermediate_size"], max_positions=raw["max_position_embeddings"],
        type_vocab_size=raw.get("type_vocab_size", 2), norm_eps=raw.get("layer_norm_eps", 1e-12),
        activation=_activation(raw.get("hidden_act", "gelu")), position_offset=pad + 1 if roberta else 0,
        pad_token_id=pad,
    )


def _t5(raw: dict, model_type: str) -> Seq2SeqConfig:
    """T5 v1.1 / mT5 / umT5. feed_forward_proj is "gated-<act>" or "<act>" ("gated-gelu" is the
    tanh GELU); the decoder output is scaled before the head as transformers 5 does: T5 and umT5
    as scale_decoder_outputs says (transformers 5 writes it), else unless tie_word_embeddings is
    false (hub configs), mT5 never. Whether the head is tied is read from the
    weights (loading/__init__.py): transformers 5 writes tie_word_embeddings true for every T5."""
    proj = raw.get("feed_forward_proj", "gated-gelu" if model_type != "t5" else "relu")
    gated, act = proj.startswith("gated-"), proj.split("-")[-1]
    heads = raw["num_heads"]
    return Seq2SeqConfig(
        arch=model_type, vocab_size=raw["vocab_size"], hidden_size=raw["d_model"], encoder_layers=raw["num_layers"],
        decoder_layers=raw.get("num_decoder_layers") or raw["num_layers"], num_heads=heads,
        head_dim=raw.get("d_kv", raw["d_model"] // heads), intermediate_size=raw["d_ff"],
        max_positions=raw.get("n_positions") or raw.get("max_position_embeddings") or DEFAULT_MAX_LENGTH,
        norm_eps=raw.get("layer_norm_epsilon", 1e-6), mlp="gated" if gated else "plain",
        activation="gelu_tanh" if proj == "gated-gelu" else _activation(act),
        relative_buckets=raw.get("relative_attention_num_buckets", 32),
        relative_max_distance=raw.get("relative_attention_max_distance", 128), relative_per_layer=model_type == "umt5",
        head_scale=model_type != "mt5" and raw.get("scale_decoder_outputs", raw.get("tie_word_embeddings")) is not False,
        decoder_start_token_id=_start_token(raw, 0), bos_token_id=raw.get("bos_token_id"),
        eos_token_id=_first(raw.get("eos_token_id", 1)), pad_token_id=raw.get("pad_token_id", 0),
    )


def _m2m_100(raw: dict) -> Seq2SeqConfig:
    """M2M100 / NLLB-200: pre-norm LayerNorm blocks with biases, sinusoidal positions counted
    after the padding index, embeddings scaled by sqrt(d_model), a tied head."""
    heads = raw.get("encoder_attention_heads", 16)
    if raw.get("decoder_attention_heads", heads) != heads or raw.get("decoder_ffn_dim") != raw.get("encoder_ffn_dim"):
        raise BabelevalError("m2m_100: encoder and decoder with different heads or MLP widths are not supported")
    return Seq2SeqConfig(
        arch="m2m_100", vocab_size=raw["vocab_size"], hidden_size=raw["d_model"], encoder_layers=raw["encoder_layers"],
        decoder_layers=raw["decoder_layers"], num_heads=heads, head_dim=raw["d_model"] // heads,
        intermediate_size=raw["encoder_ffn_dim"], max_positions=raw.get("max_position_embeddings", 1024),
        norm="layer", norm_eps=1e-5, mlp="plain", activation=_activation(raw.get("activation_function", "relu")),
        position="sinusoidal", attn_scale=None, attn_bias=True, mlp_bias=True,
        embed_scale=raw.get("scale_embedding", True), tie_embeddings=raw.get("tie_word_embeddings", True) is not False,
        decoder_start_token_id=_start_token(raw, 2), bos_token_id=raw.get("bos_token_id", 0),
        eos_token_id=_first(raw.get("eos_token_id", 2)), pad_token_id=raw.get("pad_token_id", 1),
    )


def _start_token(raw: dict, default: int) -> int:
    value = raw.get("decoder_start_token_id")
    return default if value is None else value


def _activation(name: str) -> str:
    table = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_new": "gelu_tanh", "relu": "relu",
             "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh", "gelu_tanh": "gelu_tanh"}
    if name not in table:
        raise BabelevalError(f"unsupported activation {name!r}; supported: {', '.join(sorted(table))}")
    return table[name]


def _first(value):
    return value[0] if isinstance(value, list) and value else value


def config_from_hf(raw: dict, source: str = "config.json") -> DecoderConfig | EncoderConfig | Seq2SeqConfig:
    hub_scheme(raw, source)  # a quantization_config babeleval does not read is refused
    model_type = raw.get("model_type")
    if model_type == "gemma3" and "text_config" in raw:  # multimodal wrapper: take the text tower
        raw = {**raw["text_config"], "model_type": "gemma3_text"}
        model_type = "gemma3_text"
    if model_type in FAMILY_FLAGS:
        return _llama_like(raw, model_type)
    if model_type == "gpt2":
        return _gpt2(raw)
    if model_type == "bloom":
        return _bloom(raw)
    if model_type == "gpt_neox":
        return _gpt_neox(raw)
    if model_type == "xglm":
        return _xglm(raw)
    if model_type in ENCODERS:
        return _encoder(raw, model_type)
    if model_type in T5:
        return _t5(raw, model_type)
    if model_type == "m2m_100":
        return _m2m_100(raw)
    raise BabelevalError(
        f"{source}: unsupported architecture {model_type!r} ({raw.get('architectures')}); supported: {', '.join(SUPPORTED)}"
    )
