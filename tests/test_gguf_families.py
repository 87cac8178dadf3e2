"""GGUF files of the families people download them for beyond Llama/Qwen/Gemma: llama.cpp's
command-r (Aya 23, Command R/R+), cohere2 (Aya Expanse, Command R7B), olmo2, and the mixtures
of experts qwen2moe and qwen3moe (Qwen1.5/2-MoE, Qwen3-30B-A3B / 235B-A22B), olmoe and Mixtral
(a llama file with experts: its Q/K rows permuted for interleaved rotary), and gptneox (Pythia:
the fused qkv rows reordered from per-head blocks to queries, keys, values; partial rotary) and
phi3 (fused qkv and gate-up, LongRoPE's factors as tensors), gemma2 and gemma3 (no layer types in
the file: llama.cpp's fixed sliding patterns, norms stored with their 1 added). A tiny random model written as
llama.cpp lays such a file out (tests/gguf_writer.py: gguf-py's names, experts stacked per layer,
the shared expert's gate a vector, SmolLM2's BPE tokenizer) loads with the family's knobs and
gives transformers' logits of the same weights: drawn with std 0.2 (tiny_models.PARITY_STD), so that
rotary, windows and Q/K row orders show (a rotary theta, fraction or window set wrong moved the logits
by 1.5..10, the largest ~2..10; Pythia's rotary over the whole head, 0.007 at std 0.02), to within
1e-5 of the largest |logit| (the error is ~1e-6 of it)."""
import numpy as np
import pytest

from gguf_writer import write_gguf
from tiny_models import PARITY_STD, build_with_real_tokenizer

pytestmark = pytest.mark.full
GEMMA3 = dict(num_hidden_layers=6, layer_types=["sliding_attention"] * 5 + ["full_attention"])  # llama.cpp: 1 in 6
COHERE2 = dict(num_hidden_layers=4, layer_types=["sliding_attention"] * 3 + ["full_attention"])  # llama.cpp: 1 in 4 global
CASES = {  # tiny family -> (overrides, what the GGUF's config must say)
    "qwen3_moe": (dict(mlp_only_layers=[]), dict(num_experts=8, moe_norm_topk=True, shared_expert_size=0)),
    "qwen2_moe": (dict(mlp_only_layers=[]), dict(num_experts=4, moe_norm_topk=False, shared_expert_size=48)),
    "cohere": ({}, dict(norm="layer", logit_scale=0.25, qk_norm=False, tie_embeddings=True)),
    "cohere-qk-norm": ({}, dict(qk_norm=True, qk_norm_shape="per_head")),
    "cohere2": (COHERE2, dict(layer_types=("sliding",) * 3 + ("full",), sliding_window=4, rope_sliding_only=True)),
    "mixtral": ({}, dict(arch="mixtral", num_experts=4, moe_norm_topk=True)),  # a llama file with experts
    "olmoe": ({}, dict(num_experts=4, moe_norm_topk=False, qk_norm_shape="all")),
    "olmo2": ({}, dict(pre_norm=False, sandwich_norm=True, qk_norm_shape="all")),
    "gpt_neox": ({}, dict(rope_fraction=0.25, parallel_residual=True, norm="layer")),  # Pythia
    "gpt_neox-sequential": (dict(hidden_act="gelu"), dict(parallel_residual=False)),  # the file has no activation
    "phi3": ({}, dict(arch="phi3")),  # LongRoPE: 12+ tokens past the original context of 8 (long factors)
    "phi3-long-partial": ({}, dict(rope_fraction=0.75)),
    "gemma2": (dict(query_pre_attn_scalar=16), dict(layer_types=("sliding", "full", "sliding"), attn_softcap=50.0)),
    "gemma3": (GEMMA3, dict(layer_types=("sliding",) * 5 + ("full",), rope_local_theta=10000.0, qk_norm=True)),
}


@pytest.mark.parametrize("family", list(CASES))
def test_gguf_logits_equal_transformers(family, tmp_path):
    import torch

    from babeleval.engine.forward import decoder_logits
    from babeleval.loading import load_model

    overrides, expected = CASES[family]
    torch_model = build_with_real_tokenizer(family, tmp_path, initializer_range=PARITY_STD, **overrides)
    model = load_model(str(write_gguf(tmp_path, tmp_path / "model.gguf")))
    cfg = model.config
    assert {key: getattr(cfg, key) for key in expected} == expected
    tok = model.tokenizer
    ids = np.asarray([tok.with_prefix(tok.encode("Kila mtu ana haki ya kuishi, uhuru na usalama wa nafsi yake."))])
    assert ids.shape[1] > 16  # past the sliding window of 4
    with torch.no_grad():
        want = torch_model(input_ids=torch.tensor(ids)).logits.numpy()
    got = np.asarray(decoder_logits(model.params, ids, np.ones_like(ids), cfg))
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


@pytest.mark.parametrize("arch, layers, hidden, heads, head_dim, scalar", [
    ("gemma2", 46, 4608, 32, 128, 144), ("gemma3", 62, 5376, 32, 128, 168),  # the 27B models: hidden / heads
    ("gemma2", 42, 3584, 16, 256, 256), ("gemma3", 34, 2560, 8, 256, 256)])  # 9B, 4B: the head size
def test_gemma_query_scale_as_llama_cpp_picks_it(arch, layers, hidden, heads, head_dim, scalar, tmp_path):
    """llama.cpp scales Gemma 2/3 queries by 1/sqrt(head size), but by 1/sqrt(hidden / heads) for the
    27B models (told apart by their layer count), which is their config.json's query_pre_attn_scalar."""
    from babeleval.loading.gguf_file import gguf_config

    meta = {"general.architecture": arch, f"{arch}.attention.head_count": heads, f"{arch}.embedding_length": hidden,
            f"{arch}.block_count": layers, f"{arch}.attention.key_length": head_dim, f"{arch}.vocab_size": 256000}
    assert gguf_config(meta, {"token_embd.weight"}, tmp_path / "m.gguf")["query_pre_attn_scalar"] == scalar
