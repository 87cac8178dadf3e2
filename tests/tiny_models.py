"""Tiny random Hugging Face models, built offline with transformers and saved to disk,
one per architecture babeleval supports. The parity tests load them through the same
path users take (an HF folder) and compare logits with transformers + torch."""
from __future__ import annotations

from pathlib import Path

VOCAB = 128
# The parity tests draw every tiny model with this std (initializer_range), not transformers'
# default 0.02: at 0.02 attention is nearly uniform, so a wrong rotary theta or fraction moved
# the logits by only 1e-4..1.5e-3 (1.1..15 times the old absolute tolerance of 1e-4); at 0.2
# attention depends on positions and the same errors move them by 1..4.5 (the largest logit ~5..10),
# while the fp32 parity error stays ~1e-6 of the logits' scale (test_parity_tiny.py's tolerance is
# relative to it).
PARITY_STD = 0.2
COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
              max_position_embeddings=128, pad_token_id=0, bos_token_id=1, eos_token_id=2)

CONFIGS = {
    "llama": ("LlamaConfig", dict(COMMON, num_key_value_heads=2, tie_word_embeddings=False)),
    "llama3-rope": ("LlamaConfig", dict(COMMON, num_key_value_heads=2, rope_parameters=dict(
        rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
        original_max_position_embeddings=16))),
    "mistral": ("MistralConfig", dict(COMMON, num_key_value_heads=2, sliding_window=4)),
    "qwen2": ("Qwen2Config", dict(COMMON, num_key_value_heads=2)),
    "qwen3": ("Qwen3Config", dict(COMMON, num_key_value_heads=2, head_dim=32)),
    "gemma": ("GemmaConfig", dict(COMMON, num_key_value_heads=1, head_dim=16)),
    "gemma2": ("Gemma2Config", dict(COMMON, num_key_value_heads=2, head_dim=16, sliding_window=4,
                                    query_pre_attn_scalar=24, attn_logit_softcapping=50.0, final_logit_softcapping=30.0)),
    "gemma3": ("Gemma3TextConfig", dict(COMMON, num_key_value_heads=1, head_dim=16, sliding_window=4,
                                         layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                                         query_pre_attn_scalar=16)),
    "gpt2": ("GPT2Config", dict(vocab_size=VOCAB, n_embd=64, n_layer=3, n_head=4, n_positions=128, bos_token_id=1,
                                eos_token_id=2)),
    "bloom": ("BloomConfig", dict(vocab_size=VOCAB, hidden_size=72, n_layer=3, n_head=6, bos_token_id=1,
                                  eos_token_id=2, pad_token_id=0)),
    "cohere": ("CohereConfig", dict(COMMON, num_key_value_heads=2, logit_scale=0.25)),
    "cohere-qk-norm": ("CohereConfig", dict(COMMON, num_key_value_heads=2, logit_scale=0.25, use_qk_norm=True)),
    "cohere2": ("Cohere2Config", dict(COMMON, num_key_value_heads=2, logit_scale=0.25, sliding_window=4,
                                      layer_types=["sliding_attention", "sliding_attention", "full_attention"])),
    "gpt_neox": ("GPTNeoXConfig", dict(COMMON, rope_parameters=dict(rope_type="default", rope_theta=10000.0,
                                                                    partial_rotary_factor=0.25))),
    "gpt_neox-sequential": ("GPTNeoXConfig", dict(COMMON, use_parallel_residual=False, hidden_act="gelu_new")),
    "olmo2": ("Olmo2Config", dict(COMMON, num_key_value_heads=2)),
    "xglm": ("XGLMConfig", dict(vocab_size=VOCAB, d_model=64, ffn_dim=128, num_layers=3, attention_heads=4,
                                max_position_embeddings=128, pad_token_id=5, bos_token_id=1, eos_token_id=2)),
    "mixtral": ("MixtralConfig", dict(COMMON, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)),
    "qwen2_moe": ("Qwen2MoeConfig", dict(COMMON, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                                         moe_intermediate_size=32, shared_expert_intermediate_size=48,
                                         decoder_sparse_step=1, mlp_only_layers=[1])),
    "qwen3_moe": ("Qwen3MoeConfig", dict(COMMON, num_key_value_heads=2, head_dim=16, num_experts=8, num_experts_per_tok=2,
                                         moe_intermediate_size=32, norm_topk_prob=True)),
    "olmoe": ("OlmoeConfig", dict(COMMON, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2)),
    # DeepSeek-V3's router: 8 experts in 2 groups, the best group's experts only; the first layer dense
    "glm4_moe": ("Glm4MoeConfig", dict(COMMON, num_key_value_heads=2, head_dim=16, n_routed_experts=8, num_experts_per_tok=2,
                                       moe_intermediate_size=32, n_group=2, topk_group=1, first_k_dense_replace=1,
                                       routed_scaling_factor=1.5, use_qk_norm=True, attention_bias=True,
                                       rope_parameters=dict(rope_type="default", rope_theta=10000.0,
                                                            partial_rotary_factor=0.5))),
    "sarvam_moe": ("SarvamMoEConfig", dict(COMMON, num_key_value_heads=2, head_dim=16, num_experts=8, num_experts_per_tok=2,
                                           moe_intermediate_size=32, n_group=2, topk_group=1, first_k_dense_replace=1)),
    "phi3": ("Phi3Config", dict(COMMON, num_key_value_heads=2, original_max_position_embeddings=64, rope_parameters=dict(
        rope_type="longrope", rope_theta=10000.0, short_factor=[1.0, 1.5, 2.0, 3.0, 1.0, 1.2, 4.0, 2.5],
        long_factor=[2.0, 3.0, 5.0, 8.0, 1.5, 2.0, 9.0, 4.0], partial_rotary_factor=1.0))),
    "phi3-long-partial": ("Phi3Config", dict(COMMON, num_key_value_heads=2, original_max_position_embeddings=8,
                                             rope_parameters=dict(rope_type="longrope", rope_theta=10000.0,
                                                                  short_factor=[1.0, 1.5, 2.0, 3.0, 1.0, 1.2],
                                                                  long_factor=[2.0, 3.0, 5.0, 8.0, 1.5, 2.0],
                                                                  partial_rotary_factor=0.75))),
    "bert": ("BertConfig", dict(COMMON)),
    "xlm-roberta": ("XLMRobertaConfig", dict(COMMON, pad_token_id=1)),
}
ENCODERS = ("bert", "xlm-roberta")
# Encoder-decoders: few buckets and a short max distance, so that 24-token inputs reach the
# log-spaced and the clipped buckets; 2 encoder and 3 decoder layers (a shared-vs-per-layer
# bucket table shows).
T5_COMMON = dict(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=3, num_heads=4,
                 relative_attention_num_buckets=8, relative_attention_max_distance=20, pad_token_id=0, eos_token_id=1,
                 decoder_start_token_id=0)
SEQ2SEQ = {
    "t5": ("T5Config", dict(T5_COMMON, feed_forward_proj="relu")),  # original T5: tied head, scaled outputs
    "t5-gated": ("T5Config", dict(T5_COMMON, feed_forward_proj="gated-gelu", tie_word_embeddings=False)),  # v1.1
    "mt5": ("MT5Config", dict(T5_COMMON, feed_forward_proj="gated-gelu", tie_word_embeddings=False)),
    "umt5": ("UMT5Config", dict(T5_COMMON, feed_forward_proj="gated-gelu", tie_word_embeddings=False)),
    "m2m_100": ("M2M100Config", dict(vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=3,
                                     encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                     decoder_ffn_dim=128, max_position_embeddings=128, pad_token_id=1, bos_token_id=0,
                                     eos_token_id=2, decoder_start_token_id=2)),
}
UNTIED = ("t5-gated", "mt5", "umt5")  # real T5 v1.1, mT5/mT0/Aya-101 and umT5 files hold their own lm_head


def word_tokenizer(folder: Path) -> None:
    """A whitespace word-level tokenizer over tokens 'w0'..'w127' (enough to load the folder)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {f"w{i}": i for i in range(VOCAB)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="w3"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))


def build(name: str, folder: Path, **overrides):
    """Save a seeded random model of family `name` (CONFIGS, with overrides) into folder; return
    the torch model (eval mode)."""
    import torch
    import transformers

    cls_name, kwargs = CONFIGS[name]
    config = getattr(transformers, cls_name)(**{**kwargs, **overrides})
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    auto = transformers.AutoModel if name in ENCODERS else transformers.AutoModelForCausalLM
    model = auto.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():  # random norms and biases, so that a wrong offset or a dropped bias shows
        for pname, p in model.named_parameters():
            if "norm" in pname.lower() or pname.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
        for pname, b in model.named_buffers():  # a sigmoid router's correction bias (zeros at init)
            if pname.endswith("correction_bias"):
                b.add_(torch.randn_like(b) * 0.1)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    word_tokenizer(folder)
    return model


def build_seq2seq(name: str, folder: Path, real_tokenizer: bool = False, **overrides):
    """A seeded random encoder-decoder of family `name` (SEQ2SEQ, with overrides: e.g. bench
    shapes) saved into folder, with an untied lm_head.weight written where real checkpoints have
    one (transformers 5 ties every T5's head in a fresh model); returns transformers' model
    loaded back from the folder (eval mode). real_tokenizer: a real SentencePiece model beside
    it (sentencepiece_t5_tokenizer), the vocabulary and special tokens set to match."""
    import torch
    import transformers
    from safetensors.torch import load_file, save_file

    folder.mkdir(parents=True, exist_ok=True)
    if real_tokenizer:
        tok = sentencepiece_t5_tokenizer(folder)
        overrides = {**dict(vocab_size=32128, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                            decoder_start_token_id=tok.pad_token_id), **overrides}
    cls_name, kwargs = SEQ2SEQ[name]
    config = getattr(transformers, cls_name)(**{**kwargs, **overrides})
    torch.manual_seed(0)
    model = transformers.AutoModelForSeq2SeqLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" in pname.lower() or pname.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(folder)
    if name in UNTIED:
        file = folder / "model.safetensors"
        tensors = load_file(file)
        tensors["lm_head.weight"] = torch.randn(config.vocab_size, config.d_model, generator=torch.Generator().manual_seed(1))
        save_file(tensors, file, metadata={"format": "pt"})
    if not real_tokenizer:
        word_tokenizer(folder)
    return transformers.AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()


def sentencepiece_t5_tokenizer(folder: Path):
    """A real SentencePiece model (mistral-common's 32k Llama/Mistral model, the one installed
    here) as a T5 tokenizer: spiece.model, tokenizer.json and tokenizer_config.json in folder,
    </s> closing every encoded text, a <pad> and 100 sentinels added. Returns transformers' tokenizer."""
    import importlib.util
    import shutil

    import transformers

    data = Path(importlib.util.find_spec("mistral_common").submodule_search_locations[0]) / "data"
    shutil.copy(data / "tokenizer.model.v1", folder / "spiece.model")
    tok = transformers.T5Tokenizer.from_pretrained(str(folder))
    tok.save_pretrained(folder)
    return tok


# Hub config.json layouts written before transformers 5 stored layer_types and rope_parameters:
# family -> (tiny family to build, keys to drop, keys to set). transformers derives the layer
# types, local RoPE theta, scaling type and activation from these legacy keys.
LEGACY = {
    "gemma2": ("gemma2", ("layer_types",), {}),
    "gemma3": ("gemma3", ("layer_types", "rope_parameters"),
               dict(sliding_window_pattern=3, rope_theta=1_000_000.0, rope_local_base_freq=10_000.0)),
    "gemma": ("gemma", ("hidden_activation",), dict(hidden_act="gelu")),
    "qwen2-sliding": ("qwen2", ("layer_types",), dict(use_sliding_window=True, sliding_window=4, max_window_layers=1)),
    "cohere2": ("cohere2", ("layer_types",), dict(sliding_window_pattern=3)),
    "gpt_neox": ("gpt_neox", ("rope_parameters",), dict(rotary_pct=0.5, rotary_emb_base=1000.0)),
    "llama-linear-rope": ("llama", ("rope_parameters",), dict(rope_theta=10000.0, rope_scaling={"type": "linear", "factor": 4.0})),
}


def build_legacy(name: str, folder: Path, **overrides):
    """A tiny model whose config.json is rewritten in the legacy hub layout (build's overrides
    passed on); returns transformers' model loaded back from that folder (what a user of the hub
    checkpoint gets)."""
    import json

    import transformers

    family, drop, extra = LEGACY[name]
    build(family, folder, **overrides)
    path = folder / "config.json"
    raw = {k: v for k, v in json.loads(path.read_text()).items() if k not in drop}
    path.write_text(json.dumps({**raw, **extra}, indent=1))
    return transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()


def build_with_real_tokenizer(name: str, folder: Path, **overrides):
    """A random model of family `name` (CONFIGS, with overrides: e.g. bench shapes) that reads real
    text: SmolLM2's tokenizer (49,152 tokens, from its GGUF) saved beside it, the vocabulary sized
    to match. Returns the torch model."""
    import transformers

    from babeleval.loading import resolve

    path = resolve("smollm2-135m")
    tokenizer = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    cls_name, kwargs = CONFIGS[name]
    special = dict(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                   pad_token_id=tokenizer.eos_token_id)
    config = getattr(transformers, cls_name)(**{**kwargs, **special, "vocab_size": len(tokenizer), **overrides})
    import torch

    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model


# The attention shapes of the real models the engine tests were first written on (SmolLM2-135M: 9
# query and 3 KV heads, which divide no model axis of 2, 4 or 8, tied embeddings; Gemma 3 270M: 4
# query heads and 1 KV head), 3 layers, SmolLM2's tokenizer and vocabulary, and weights drawn with
# std 0.2 so that greedy choices are far from ties. Meshes, batching and shared prefixes work the
# same on them as on the real weights, compiled in a fraction of the time.
SHAPED = {
    "smollm2": ("llama", dict(num_attention_heads=9, num_key_value_heads=3, hidden_size=72, head_dim=8,
                              intermediate_size=96, tie_word_embeddings=True)),
    "gemma3": ("gemma3", dict(num_attention_heads=4, num_key_value_heads=1, head_dim=16, hidden_size=64,
                              sliding_window=512, layer_types=["sliding_attention", "sliding_attention", "full_attention"])),
}


def build_shaped(name: str, folder: Path, layers: int = 3):
    """A random model shaped as SHAPED[name] says, saved to `folder`; returns the torch model."""
    family, shape = SHAPED[name]
    return build_with_real_tokenizer(family, folder, num_hidden_layers=layers, max_position_embeddings=8192,
                                     initializer_range=0.2, **shape)
