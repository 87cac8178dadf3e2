"""babeleval's own checkpoint format: an orbax parameter tree beside babeleval.json
(the config) and a tokenizer folder. Restoring skips name mapping and dequantisation."""
from __future__ import annotations

import shutil
from pathlib import Path

import jax.numpy as jnp

from ..models import abstract_params
from ..models.config import load_config, save_config
from .tokenizer import load_tokenizer

CONFIG = "babeleval.json"


def is_checkpoint(path: Path) -> bool:
    return (path / CONFIG).exists() and (path / "params").exists()


def save_checkpoint(model, folder: Path, overwrite: bool = True) -> Path:
    import orbax.checkpoint as ocp

    folder = Path(folder).absolute()
    if folder.exists() and overwrite:
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(folder / "params", model.params)
    checkpointer.wait_until_finished()
    save_config(model.config, folder / CONFIG)
    model.tokenizer.save(folder / "tokenizer")
    return folder


def restore_params(folder: Path, dtype=jnp.float32):
    import orbax.checkpoint as ocp

    folder = Path(folder).absolute()
    config = load_config(folder / CONFIG)
    params = ocp.StandardCheckpointer().restore(folder / "params", abstract_params(config, dtype))
    return config, params, load_tokenizer(folder / "tokenizer")
