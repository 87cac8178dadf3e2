"""A sentence-transformers folder's pipeline after the transformer, as sentence-transformers
applies it: modules.json lists Pooling (cls or mean), Dense projections (LaBSE: 768 x 768, tanh)
and Normalize, each module in its own sub-folder. The encoder config says which (pooling, the
Dense shapes and activations, normalize); the Dense weights join the encoder's tensors as
`dense.N.*` (loading/names.py)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from ..errors import BabelevalError
from .hf_folder import read_json, weight_items

ACTIVATIONS = {"torch.nn.modules.activation.Tanh": "tanh", "torch.nn.modules.linear.Identity": "identity"}
POOLING = {"cls": "cls", "mean": "mean"}  # sentence-transformers' pooling_mode -> ours


def _pooling(folder: Path) -> str:
    """The Pooling module's mode: `pooling_mode` (sentence-transformers 5+) or the older flags."""
    raw = read_json(folder / "config.json")
    mode = raw.get("pooling_mode") or next((m for m in ("cls", "mean", "max") if raw.get(f"pooling_mode_{m}_token")
                                           or raw.get(f"pooling_mode_{m}_tokens")), "mean")
    if mode not in POOLING:
        raise BabelevalError(f"{folder / 'config.json'}: pooling_mode {mode!r} is not supported (cls, mean)")
    return POOLING[mode]


def _dense(folder: Path) -> tuple:
    raw = read_json(folder / "config.json")
    activation = raw.get("activation_function", "torch.nn.modules.linear.Identity")
    if activation not in ACTIVATIONS:
        raise BabelevalError(f"{folder / 'config.json'}: activation_function {activation!r} is not supported "
                             f"({', '.join(ACTIVATIONS)})")
    return raw["in_features"], raw["out_features"], bool(raw.get("bias", True)), ACTIVATIONS[activation]


def pipeline(config, path: Path, pooling: str | None, normalize: bool | None):
    """(config with the folder's pooling, Dense modules and normalisation, (name, array) pairs
    of the Dense weights). pooling / normalize given by the caller win over the folder's."""
    modules = read_json(path / "modules.json") if (path / "modules.json").exists() else []
    found_pooling, dense, found_normalize, folders = None, [], False, []
    for module in modules:
        kind = module.get("type", "").rsplit(".", 1)[-1]
        folder = path / module.get("path", "")
        if kind == "Pooling":
            found_pooling = _pooling(folder)
        elif kind == "Dense":
            dense.append(_dense(folder))
            folders.append(folder)
        elif kind == "Normalize":
            found_normalize = True
    if not modules and (path / "1_Pooling" / "config.json").exists():
        found_pooling = _pooling(path / "1_Pooling")
    config = dataclasses.replace(config, pooling=pooling or found_pooling or config.pooling, dense=tuple(dense),
                                 normalize=found_normalize if normalize is None else bool(normalize))
    return config, _dense_items(folders)


def _dense_items(folders: list[Path]):
    for i, folder in enumerate(folders):
        for name, array in weight_items(folder):
            yield f"dense.{i}.{name.split('.')[-1]}", array
