"""babeleval's own checkpoint format: an orbax parameter tree beside babeleval.json
(the config) and a tokenizer folder. Restoring skips name mapping and dequantisation."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import BabelevalError
from ..models import abstract_params
from ..models.config import load_config, save_config
from ..quant import dense, is_quantized
from .tokenizer import load_tokenizer

CONFIG = "babeleval.json"
MANIFEST = "files.json"  # parameter files and their sizes, written by save_checkpoint


def is_checkpoint(path: Path) -> bool:
    return (path / CONFIG).exists() and (path / "params").exists()


def save_checkpoint(model, folder: Path, overwrite: bool = True) -> Path:
    import orbax.checkpoint as ocp

    folder = Path(folder).absolute()
    if folder.exists() and overwrite:
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    checkpointer = ocp.StandardCheckpointer()
    # quantized weights (a GGUF's blocks) are saved dequantized to the model's dtype, for now
    params = jax.tree.map(lambda x: dense(x, model.dtype) if is_quantized(x) else x, model.params, is_leaf=is_quantized)
    checkpointer.save(folder / "params", params)
    checkpointer.wait_until_finished()
    save_config(model.config, folder / CONFIG)
    model.tokenizer.save(folder / "tokenizer")
    sizes = {str(f.relative_to(folder)): f.stat().st_size for f in sorted((folder / "params").rglob("*")) if f.is_file()}
    (folder / MANIFEST).write_text(json.dumps(sizes, indent=0))
    return folder


def check_complete(folder: Path) -> None:
    """Every parameter file the save wrote, at its size: a partial copy or a cut download is
    named here in one line, before orbax reads it (its errors come from worker threads)."""
    manifest = folder / MANIFEST
    if not manifest.exists():
        return  # written before manifests: orbax's own checks only
    for name, size in json.loads(manifest.read_text()).items():
        path = folder / name
        if not path.is_file():
            raise BabelevalError(f"{folder}: a partial babeleval checkpoint ({name} is missing); copy or convert it again")
        if path.stat().st_size != size:
            raise BabelevalError(f"{folder}: a corrupt babeleval checkpoint ({name} has {path.stat().st_size} bytes, "
                                 f"{size} were written); copy or convert it again")


def restore_params(folder: Path, dtype=jnp.float32, sharding=None):
    """sharding(path, shape) -> each parameter's target sharding: orbax reads every array
    straight into its device shards (placement/sharding.py's load_placement)."""
    import orbax.checkpoint as ocp

    folder = Path(folder).absolute()
    config = load_config(folder / CONFIG)
    check_complete(folder)
    target = abstract_params(config, dtype)
    saved = set(ocp.StandardCheckpointer().metadata(folder / "params").item_metadata.keys())
    if saved != set(target):  # saved before the layer stack was scanned (models/stack.py)
        return config, _restacked(folder, config, target, saved, sharding), load_tokenizer(folder / "tokenizer")
    if sharding is not None:
        from ..placement.sharding import path_name

        target = jax.tree_util.tree_map_with_path(
            lambda p, x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding(path_name(p), x.shape)), target)
    try:
        params = ocp.StandardCheckpointer().restore(folder / "params", target)
    except Exception as exc:  # noqa: BLE001  (orbax raises plain Exceptions for unreadable arrays)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BabelevalError(f"{folder}: a corrupt or partial babeleval checkpoint ({first[:200]}); "
                             "copy or convert it again") from None
    return config, params, load_tokenizer(folder / "tokenizer")


def _restacked(folder: Path, config, target, saved: set, sharding):
    """A decoder checkpoint with one subtree per layer (layers_<i>, as saved before the layer
    stack was scanned) restored as it was and stacked into the scanned groups; other layouts
    refused in one line."""
    import orbax.checkpoint as ocp

    from ..models.config import DecoderConfig
    from ..models.decoder import decoder_groups
    from ..models.stack import per_layer, stacked

    old = per_layer(target, decoder_groups(config)) if isinstance(config, DecoderConfig) else {}
    if saved != set(old):
        raise BabelevalError(f"{folder}: a babeleval checkpoint whose parameters ({', '.join(sorted(saved)[:4])}, ...) "
                             f"are not this version's layout ({', '.join(sorted(target)[:4])}, ...); convert the model again")
    old = ocp.StandardCheckpointer().restore(folder / "params", old)
    params = stacked(jax.tree.map(np.asarray, old), decoder_groups(config))
    if sharding is None:
        return jax.tree.map(jnp.asarray, params)
    from ..placement.sharding import path_name

    return jax.tree_util.tree_map_with_path(lambda p, x: jax.device_put(x, sharding(path_name(p), x.shape)), params)
