"""Real weights from registry packages, loaded once per test session by both sides."""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from babeleval.loading import load_model, resolve


@functools.lru_cache(maxsize=None)
def ours(alias: str):
    return load_model(alias)


@functools.lru_cache(maxsize=None)
def reference(alias: str):
    """transformers + torch on the same file (GGUF dequantised by transformers, or the HF folder)."""
    import torch
    import transformers

    path = resolve(alias)
    if path.suffix == ".gguf":
        model = transformers.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    else:
        model = transformers.AutoModel.from_pretrained(path, dtype=torch.float32)
    return model.eval()


@functools.lru_cache(maxsize=None)
def causal_lm(source: str):
    """transformers' causal LM of the weights babeleval loaded from `source` (a LoadedModel's
    source): a real GGUF's registry alias dequantised, or a random model's HF folder."""
    import torch
    import transformers

    if source.endswith(".gguf"):
        return reference(next(alias for alias in ("smollm2-135m", "gemma3-270m") if resolve(alias) == Path(source)))
    return transformers.AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).eval()


def pad(rows: list[list[int]], pad_id: int = 0, left: bool = False):
    width = max(map(len, rows))
    ids = np.full((len(rows), width), pad_id, np.int64)
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        sl = slice(width - len(row), width) if left else slice(0, len(row))
        ids[i, sl], mask[i, sl] = row, 1
    return ids, mask
