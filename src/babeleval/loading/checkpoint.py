"""babeleval's own checkpoint format: an orbax parameter tree beside babeleval.json
(the config) and a tokenizer folder; quantized weights stay quantized, described in
quantized.json (quantized_checkpoint.py). Restoring skips name mapping and dequantisation."""
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
from ..quant import is_quantized
from .quantized_checkpoint import QUANTIZED, as_saved, descriptions, read_quantized, with_quantized, write_quantized
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
    checkpointer.save(folder / "params", as_saved(model.params))
    checkpointer.wait_until_finished()
    described = descriptions(model.params)
    if described:
        write_quantized(folder, described, **model.quantized_by)
    save_config(model.config, folder / CONFIG)
    model.tokenizer.save(folder / "tokenizer")
    files = [*sorted((folder / "params").rglob("*")), folder / QUANTIZED]
    sizes = {str(f.relative_to(folder)): f.stat().st_size for f in files if f.is_file()}
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
    straight into its device shards (placement/sharding.py's load_placement; a quantized
    weight's fields where place_leaf puts them). Dense weights come back in dtype, quantized
    ones as the QArray or QStack saved, their fields as stored."""
    import orbax.checkpoint as ocp

    folder = Path(folder).absolute()
    config = load_config(folder / CONFIG)
    check_complete(folder)
    target = abstract_params(config, dtype)
    saved = ocp.StandardCheckpointer().metadata(folder / "params").item_metadata.tree
    described = (read_quantized(folder) or {}).get("weights", {})
    if set(saved) != set(target) or _groups(config, saved) != _groups(config, target):  # another layer layout
        return config, _restacked(folder, config, target, saved, described, sharding), load_tokenizer(folder / "tokenizer")
    try:
        target = with_quantized(target, described, jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype), saved))
    except KeyError as missing:
        raise BabelevalError(f"{folder}: {QUANTIZED} names a weight ({missing}) that params/ does not hold; "
                             "copy or convert it again") from None
    if sharding is not None:
        from ..placement.sharding import leaf_sharding, path_name

        target = jax.tree_util.tree_map_with_path(
            lambda p, x: _sharded(x, leaf_sharding(sharding, path_name(p), x)), target, is_leaf=is_quantized)
    try:
        params = ocp.StandardCheckpointer().restore(folder / "params", as_saved(target))
    except Exception as exc:  # noqa: BLE001  (orbax raises plain Exceptions for unreadable arrays)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BabelevalError(f"{folder}: a corrupt or partial babeleval checkpoint ({first[:200]}); "
                             "copy or convert it again") from None
    return config, with_quantized(params, described, params), load_tokenizer(folder / "tokenizer")


def _sharded(x, sharding):
    """x's abstract arrays (a dense one, or a QArray's fields) each with its target sharding."""
    return jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), x, sharding)


def _groups(config, tree: dict):
    """A decoder tree's layer groups (models/stack.py), None for other models."""
    from ..models.config import DecoderConfig
    from ..models.stack import saved_groups

    return saved_groups(tree) if isinstance(config, DecoderConfig) else None


def _restacked(folder: Path, config, target, saved: dict, described: dict, sharding):
    """A dense decoder checkpoint saved in other layer groups (one subtree per layer, layers_<i>,
    as before the stack was scanned; Gemma 3's period of 6 before sliding layers became a flag)
    restored as it was and stacked into this version's groups; other layouts refused in one line."""
    import orbax.checkpoint as ocp

    from ..models.decoder import decoder_groups
    from ..models.stack import per_layer, stacked

    groups = _groups(config, saved)
    old = {}
    if groups and not described:
        old = stacked(per_layer(target, decoder_groups(config)), groups, stack=_abstract_stack)
    if set(saved) != set(old):  # old is built from the saved groups: the names settle it
        raise BabelevalError(f"{folder}: a babeleval checkpoint whose parameters ({', '.join(sorted(saved)[:4])}, ...) "
                             f"are not this version's layout ({', '.join(sorted(target)[:4])}, ...); convert the model again")
    old = ocp.StandardCheckpointer().restore(folder / "params", old)
    params = stacked(per_layer(jax.tree.map(np.asarray, old), groups), decoder_groups(config))
    if sharding is None:
        return jax.tree.map(jnp.asarray, params)
    from ..placement.sharding import path_name, place_leaf

    return jax.tree_util.tree_map_with_path(lambda p, x: place_leaf(sharding, path_name(p), x), params)


def _abstract_stack(layers):
    return jax.ShapeDtypeStruct((len(layers),) + tuple(layers[0].shape), layers[0].dtype)
