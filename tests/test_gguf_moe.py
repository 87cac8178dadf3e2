"""Mixture-of-experts GGUF files (llama.cpp's qwen2moe and qwen3moe: Qwen1.5/2-MoE, Qwen3-30B-A3B
and -235B-A22B as most people download them): a tiny random model written as llama.cpp lays
such a file out (tests/gguf_writer.py: experts stacked per layer, the shared expert's gate a
vector, SmolLM2's BPE tokenizer) loads with its experts, router normalisation and shared expert,
and gives transformers' logits of the same weights."""
import numpy as np
import pytest

from gguf_writer import write_gguf
from tiny_models import build_with_real_tokenizer

pytestmark = pytest.mark.full


@pytest.mark.parametrize("family, experts, norm_topk, shared", [("qwen3_moe", 8, True, 0), ("qwen2_moe", 4, False, 48)])
def test_moe_gguf_logits_equal_transformers(family, experts, norm_topk, shared, tmp_path):
    import torch

    from babeleval.engine.forward import decoder_logits
    from babeleval.loading import load_model

    torch_model = build_with_real_tokenizer(family, tmp_path, mlp_only_layers=[])  # llama.cpp: every layer MoE
    model = load_model(str(write_gguf(tmp_path, tmp_path / "model.gguf")))
    cfg = model.config
    assert (cfg.arch, cfg.num_experts, cfg.moe_norm_topk, cfg.shared_expert_size) == (family, experts, norm_topk, shared)
    tok = model.tokenizer
    ids = np.asarray([tok.with_prefix(tok.encode("Kila mtu ana haki ya kuishi, uhuru na usalama wa nafsi yake."))])
    with torch.no_grad():
        want = torch_model(input_ids=torch.tensor(ids)).logits.numpy()
    got = np.asarray(decoder_logits(model.params, ids, np.ones_like(ids), cfg))
    assert np.abs(got - want).max() <= 1e-4
