"""Random-weight HF folders of bench shapes, with SmolLM2's tokenizer (so real benchmark text
tokenizes as it would for SmolLM2), for comparing families and backends on equal terms.

  python bench/random_models.py moe DIR     # Qwen3-MoE scaled down: 8 experts, top-2, hidden 512, 8 layers
  python bench/random_models.py llama DIR   # ~100M dense shapes, the same for every family:
  python bench/random_models.py cohere DIR  #   hidden 768, 12 layers, 12 heads (4 KV), MLP 2048
  python bench/random_models.py gpt_neox DIR
  python bench/random_models.py mt5-small DIR  # mT5-small's shapes and 250,112-row vocabulary, untied head,
                                               # with a real 32k SentencePiece tokenizer (tests/tiny_models.py)
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

DENSE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=2048,
             max_position_embeddings=2048)
SHAPES = {
    "moe": ("qwen3_moe", dict(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=4,
                              head_dim=64, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=1024,
                              norm_topk_prob=True, max_position_embeddings=2048)),
    "llama": ("llama", dict(DENSE, num_key_value_heads=4)),
    "cohere": ("cohere", dict(DENSE, num_key_value_heads=4, logit_scale=0.0625)),
    "gpt_neox": ("gpt_neox", dict(DENSE)),
}
# google/mt5-small's config.json: 8 + 8 layers, 6 heads of 64, gated-GELU 1,024, 32 buckets up to 128
MT5_SMALL = dict(d_model=512, d_kv=64, d_ff=1024, num_layers=8, num_decoder_layers=8, num_heads=6,
                 relative_attention_num_buckets=32, relative_attention_max_distance=128, vocab_size=250112)


def write(shape: str, folder: Path) -> Path:
    from tiny_models import build_with_real_tokenizer

    if shape == "mt5-small":
        from tiny_models import build_seq2seq

        model = build_seq2seq("mt5", Path(folder), real_tokenizer=True, **MT5_SMALL)
    else:
        family, overrides = SHAPES[shape]
        model = build_with_real_tokenizer(family, Path(folder), **overrides)
    print(f"{folder}: {shape}, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters")
    return Path(folder)


if __name__ == "__main__":
    write(sys.argv[1], Path(sys.argv[2]))
