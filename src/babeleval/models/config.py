"""Model configurations: one dataclass for every decoder, one for every encoder, one for every
encoder-decoder.

Families differ only by the flags set here (Gemma's 1+w norms, Qwen2's qkv bias,
BLOOM's ALiBi, GPT-2's learned positions ...); the modules read flags, never names.
Configs are frozen so that they can be static arguments of jitted functions.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import BabelevalError

CHOICES = {
    "norm": ("rms", "layer"),
    "mlp": ("gated", "plain"),
    "activation": ("silu", "gelu_tanh", "gelu", "relu"),
    "position": ("rope", "learned", "alibi", "sinusoidal", "relative"),
    "qk_norm_shape": ("head", "per_head", "all"),
    "pooling": ("cls", "mean", "pooler"),
    "moe_router": ("softmax", "sigmoid"),
    "attention": ("auto", "kernels", "xla", "cudnn"),  # models/attention.py: fused_implementation
    "moe_matmul": ("auto", "grouped", "ragged"),  # models/moe.py: expert_mlp
}


def check_choices(config) -> None:
    """A config string outside its choices is an error naming both (a typo must not
    silently pick LayerNorm or drop the position encoding)."""
    for name, choices in CHOICES.items():
        value = getattr(config, name, None)
        if value is not None and value not in choices:
            raise BabelevalError(f"{config.arch}: {name}={value!r} is not one of {', '.join(choices)}")
    for layer_type in getattr(config, "layer_types", ()):
        if layer_type not in ("full", "sliding"):
            raise BabelevalError(f"{config.arch}: layer type {layer_type!r} is not one of full, sliding")


@dataclass(frozen=True)
class DecoderConfig:
    arch: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    max_positions: int
    norm: str = "rms"  # "rms" | "layer"
    norm_eps: float = 1e-6
    norm_offset: float = 0.0  # Gemma scales by (1 + w)
    norm_bias: bool = True  # LayerNorm's bias (Cohere's has none)
    mlp: str = "gated"  # "gated" (gate*up -> down) | "plain" (up -> act -> down)
    activation: str = "silu"  # "silu" | "gelu_tanh" | "gelu"
    position: str = "rope"  # "rope" | "learned" | "alibi" | "sinusoidal" (XGLM, fairseq's table)
    position_offset: int = 0  # XGLM reads the sinusoid table at position + 2
    rope_theta: float = 10000.0
    rope_local_theta: float | None = None  # Gemma 3 local (sliding) layers
    rope_scaling: tuple = ()  # sorted (key, value) pairs of HF rope parameters
    rope_fraction: float = 1.0  # GPT-NeoX rotates the first rotary_pct of each head's dims
    rope_interleaved: bool = False  # Cohere pairs dims (2i, 2i+1), not (i, i+D/2)
    rope_sliding_only: bool = False  # Cohere 2: global layers have no positions at all
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    qk_norm_shape: str = "head"  # "head": one weight over head_dim (Qwen3, Gemma 3); "per_head": a weight
    # per head (Cohere); "all": one norm over all heads' projection (OLMo 2)
    pre_norm: bool = True  # False: norms after attention and MLP only (OLMo 2, with sandwich_norm)
    parallel_residual: bool = False  # x + attn(norm(x)) + mlp(norm'(x)): GPT-NeoX, Cohere
    shared_norm: bool = False  # with parallel_residual: the MLP reads the attention's norm (Cohere)
    sandwich_norm: bool = False  # Gemma 2/3: norms after attention and MLP too
    embed_scale: bool = False  # multiply embeddings by sqrt(hidden_size)
    embed_norm: bool = False  # BLOOM: LayerNorm right after the embedding
    attn_scale: float | None = None  # default head_dim ** -0.5
    attn_softcap: float | None = None
    final_softcap: float | None = None
    logit_scale: float | None = None  # Cohere multiplies the logits
    sliding_window: int | None = None
    layer_types: tuple = ()  # per layer "full" | "sliding"; empty = all full
    tie_embeddings: bool = False
    num_experts: int = 0  # mixture of experts (models/moe.py): experts per MoE layer
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    moe_norm_topk: bool = False  # renormalise the top-k router weights (Mixtral, Qwen3-MoE)
    shared_expert_size: int = 0  # an always-on expert: Qwen2-MoE's behind a sigmoid gate, GLM-4-MoE/Sarvam's not
    shared_expert_gated: bool = True
    moe_router: str = "softmax"  # "sigmoid": GLM-4-MoE / Sarvam-MoE (DeepSeek-V3's): sigmoid scores, a
    # correction bias for the choice only, group-limited top-k, weights renormalised and scaled
    moe_groups: int = 1  # experts in this many groups; the top moe_topk_groups groups (by their best 2) compete
    moe_topk_groups: int = 1
    moe_scale: float = 1.0  # routed_scaling_factor
    moe_matmul: str = "auto"  # the experts' MLP: auto (CPU blocks on CPU, ragged_dot elsewhere), grouped (the blocks), ragged
    moe_layers: tuple = ()  # per layer True (MoE) | False (dense MLP); empty = every layer when num_experts
    layer_period: int = 0  # layers in a scanned group's body (models/stack.py); 0: the layer kinds' own period
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    pad_token_id: int | None = None
    attention: str = "auto"  # how attention is computed (the run chooses: models/attention.py)
    kind: str = "decoder"

    def __post_init__(self):
        check_choices(self)

    @property
    def rope_dim(self) -> int:
        return int(self.head_dim * self.rope_fraction)

    def is_moe(self, layer: int) -> bool:
        return self.num_experts > 0 and (not self.moe_layers or bool(self.moe_layers[layer]))

    def is_sliding(self, layer: int) -> bool:
        return bool(self.layer_types) and self.layer_types[layer] == "sliding" and self.sliding_window is not None


@dataclass(frozen=True)
class EncoderConfig:
    arch: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_positions: int
    type_vocab_size: int = 2
    norm_eps: float = 1e-12
    activation: str = "gelu"
    position_offset: int = 0  # XLM-R counts positions from padding_idx + 1
    pad_token_id: int = 0
    pooling: str = "mean"  # "cls" | "mean" | "pooler"
    dense: tuple = ()  # sentence-transformers Dense modules after pooling: (in, out, bias, "tanh" | "identity")
    normalize: bool = False
    kind: str = "encoder"

    def __post_init__(self):
        check_choices(self)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


@dataclass(frozen=True)
class Seq2SeqConfig:
    """An encoder and a decoder that cross-attends to it (models/seq2seq.py): T5 v1.1, mT5, mT0,
    Aya-101, MADLAD-400 (relative position buckets in the first layer of each stack, shared by
    the rest; RMS norms; unscaled attention), umT5 (a bucket table per layer) and M2M100/NLLB
    (sinusoidal positions after the padding index, scaled embeddings, LayerNorm, biases)."""

    arch: str
    vocab_size: int
    hidden_size: int
    encoder_layers: int
    decoder_layers: int
    num_heads: int
    head_dim: int
    intermediate_size: int
    max_positions: int  # the longest input lm-eval and the engines give the encoder (and the decoder)
    norm: str = "rms"
    norm_eps: float = 1e-6
    mlp: str = "gated"
    activation: str = "gelu_tanh"
    position: str = "relative"  # "relative" (T5 buckets) | "sinusoidal" (M2M100: fairseq's table)
    relative_buckets: int = 32
    relative_max_distance: int = 128
    relative_per_layer: bool = False  # umT5: every layer has its own bucket table
    attn_scale: float | None = 1.0  # T5 does not scale q.k; None: head_dim ** -0.5
    attn_bias: bool = False  # M2M100: q, k, v, o with biases
    mlp_bias: bool = False
    embed_scale: bool = False  # M2M100 scale_embedding: embeddings times sqrt(hidden_size)
    head_scale: bool = False  # original T5 (tied): decoder output times hidden_size ** -0.5 before the head
    tie_embeddings: bool = False
    decoder_start_token_id: int = 0
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    pad_token_id: int | None = 0
    attention: str = "auto"
    kind: str = "seq2seq"

    def __post_init__(self):
        check_choices(self)

    @property
    def num_layers(self) -> int:  # the decoder's: its self-attention cache is what grows with tokens
        return self.decoder_layers

    @property
    def num_kv_heads(self) -> int:
        return self.num_heads

    def has_relative_bias(self, layer: int) -> bool:
        return self.position == "relative" and (self.relative_per_layer or layer == 0)


ModelConfig = DecoderConfig | EncoderConfig | Seq2SeqConfig
KINDS = {"decoder": DecoderConfig, "encoder": EncoderConfig, "seq2seq": Seq2SeqConfig}


def to_json(config: ModelConfig) -> str:
    return json.dumps(dataclasses.asdict(config), indent=1)


def from_json(text: str) -> ModelConfig:
    raw = json.loads(text)
    cls = KINDS[raw.get("kind", "decoder")]
    for key in ("rope_scaling", "layer_types", "moe_layers", "dense"):
        if key in raw:
            raw[key] = _tuples(raw[key])
    return cls(**raw)


def _tuples(value):
    """JSON lists back into the tuples a frozen (hashable) config holds, at every depth."""
    return tuple(_tuples(x) for x in value) if isinstance(value, list) else value


def save_config(config: ModelConfig, path: Path) -> None:
    path.write_text(to_json(config))


def load_config(path: Path) -> ModelConfig:
    return from_json(path.read_text())
