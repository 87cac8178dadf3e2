"""Turn a model spec (alias, HF folder, GGUF file, hub id, babeleval checkpoint), or the
ModelSource it resolves to (source.py), into config + params + tokenizer. Modelling code never
sees where weights came from."""
from __future__ import annotations

import dataclasses
import gc
import itertools
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import BabelevalError
from ..paths import cache_dir
from ..models import DTYPES, abstract_params, build_module
from ..models.config import ModelConfig, load_config
from ..quant import is_quantized
from ..quant.at_load import METHODS, quantize_leaf
from .checkpoint import CONFIG, restore_params, save_checkpoint
from .quantized_checkpoint import read_quantized
from .gguf_file import gguf_tokenizer, read_gguf
from .hf_config import config_from_hf
from .hub_quantized import quantized_tensors
from .hf_folder import hf_tokenizer, weight_items, tensor_names
from .names import to_param_tree
from .sentence_transformers import pipeline
from .source import ALIASES, ModelSource, model_source, resolve
from .tokenizer import HFTokenizer, Special, Tokenizer

DEFAULT_MODEL = "smollm2-135m"
QUANTIZE = ("keep", "none", *METHODS)  # load_model(quantize=...)


@dataclass
class LoadedModel:
    config: ModelConfig
    params: dict
    tokenizer: Tokenizer
    dtype: jnp.dtype
    source: str
    mesh: object = None  # the jax Mesh load_model(mesh=...) placed the weights on (engines default to it)
    quantize: str = "keep"  # load_model(quantize=...)
    recorded: dict | None = None  # a restored quantized checkpoint's {method, source}, as its save recorded them
    model_source: ModelSource | None = None  # what load_model loaded: the spec's one description (source.py)

    @property
    def module(self):
        return build_module(self.config, self.dtype)

    @property
    def num_params(self) -> int:
        return sum(x.size for x in jax.tree_util.tree_leaves(self.params, is_leaf=is_quantized))

    @property
    def params_by_part(self) -> dict:
        """Parameters per top-level part (an encoder-decoder: embed, encoder, decoder, lm_head)."""
        out: dict = {}
        for name, tree in self.params.items():
            part = name.split("_")[0] if name.startswith(("encoder", "decoder")) else name
            out[part] = out.get(part, 0) + sum(x.size for x in jax.tree_util.tree_leaves(tree, is_leaf=is_quantized))
        return out

    @property
    def quantization(self) -> dict | None:
        """None for dense weights; else how they are held (quant/summary.py)."""
        from ..quant.summary import summary

        return summary(self.params, self.quantized_by["source"], self.quantized_by["method"])

    @property
    def quantized_by(self) -> dict:
        """{method, source} of quantized weights: a restored checkpoint's as recorded at its save
        (gguf, int8 or int4, and the file they came from), else this load's."""
        return self.recorded or {"method": "gguf" if self.quantize == "keep" else self.quantize, "source": self.source}

    def save(self, folder: Path) -> Path:
        return save_checkpoint(self, folder)


def load_model(spec: str | ModelSource = DEFAULT_MODEL, dtype: str = "float32", pooling: str | None = None,
               normalize: bool | None = None, mesh=None, quantize: str = "keep") -> LoadedModel:
    """spec: a model spec, resolved here (source.py), or the ModelSource a run resolved it to once.
    dtype: float32, bfloat16, or auto (bfloat16 on GPU/TPU, float32 on CPU: placement/devices.py).
    quantize: keep (a GGUF file's quantized blocks stay quantized: quant/), none (every weight
    dequantized to dtype at load: the dense reference), int8 or int4 (the matmul weights of any
    family quantized at load, symmetric: quant/at_load.py).
    Tensors are read one at a time and each is placed on its devices before the next is read:
    on the first local device (mesh None), or split over a mesh ('auto', 'data=D,model=M',
    (D, M)) by placement/sharding.py's rules, which the engines then use as they are; a babeleval
    checkpoint is restored by orbax straight into that sharding (_restored: its quantized weights
    as saved)."""
    from ..placement.devices import default_dtype, prepare_cpu
    from ..placement.sharding import load_placement, place_leaf

    if quantize not in QUANTIZE:
        raise BabelevalError(f"--quantize {quantize!r}: expected one of {', '.join(QUANTIZE)}")
    prepare_cpu()  # the first arrays are made here: JAX gets its CPU devices and flags before them
    jdtype = DTYPES[default_dtype() if dtype == "auto" else dtype] if isinstance(dtype, str) else dtype
    source = model_source(spec)
    path = source.path
    if source.format == "checkpoint":
        return _restored(source, jdtype, mesh, quantize)
    recorded = None  # an import's quantization is this load's (LoadedModel.quantized_by), a hub scheme's its own
    if source.format == "gguf":
        raw, tensors, meta = read_gguf(path, keep_quantized=quantize == "keep")
        config = config_from_hf(raw, str(path))
        backend, add_bos = gguf_tokenizer(meta)
        tokenizer = HFTokenizer(backend, Special(config.bos_token_id, config.eos_token_id, config.pad_token_id, add_bos))
    elif source.format == "hf":
        raw = source.config
        config = config_from_hf(raw, str(path / "config.json"))
        if config.kind == "seq2seq" and config.arch != "m2m_100":  # T5's config says tied whatever the file holds
            config = dataclasses.replace(config, tie_embeddings="lm_head.weight" not in tensor_names(path))
        tensors, recorded = weight_items(path), None
        scheme = source.quantization
        if scheme:  # an FP8, GPTQ, AWQ or compressed-tensors checkpoint: its modules as QArrays
            tensors = quantized_tensors(tensors, tensor_names(path), scheme, str(path))
            tensors = tensors if quantize == "keep" else ((k, _host_dense(v)) for k, v in tensors)
            recorded = {"method": scheme.method, "source": str(path)} if quantize == "keep" else None
        tokenizer = hf_tokenizer(path, raw, add_bos=config.arch.startswith("gemma"))
    else:
        raise BabelevalError(f"{path}: expected a .gguf file, an HF model folder or a babeleval checkpoint")
    if config.kind == "encoder":  # a sentence-transformers folder's pooling, Dense modules and normalisation
        config, dense = pipeline(config, path, pooling, normalize)
        tensors = itertools.chain(tensors, dense)
    abstract = abstract_params(config, jdtype)
    placed_on, sharding = load_placement(config, abstract, mesh)
    if quantize in METHODS:
        place = lambda key, array: place_leaf(sharding, key, quantize_leaf(key, array, quantize))  # noqa: E731
    else:
        place = lambda key, array: place_leaf(sharding, key, array)  # noqa: E731
    params = to_param_tree(tensors, config, abstract, str(path), jdtype, place=place)
    gc.collect()  # the reading's host-side cycles go now, not at a later collection (an 8B GGUF: 0.4 GB)
    return LoadedModel(run_choices(config), params, tokenizer, jdtype, str(path), placed_on, quantize, recorded, source)


def _restored(source: ModelSource, jdtype, mesh, quantize: str) -> LoadedModel:
    """A babeleval checkpoint placed as load_model places an import. Its quantized weights come
    back as saved (keep, or the method they were saved with) or dequantized to dtype by the
    forward's own dequantizer, quant/blocks.py (none); int8/int4 quantize a dense checkpoint's weights at load and
    are refused in one line on a checkpoint quantized otherwise (codes are not rounded twice)."""
    from ..placement.sharding import load_placement, path_name, place_leaf

    path = source.path
    held = read_quantized(path)
    recorded = held and {"method": held["method"], "source": held["source"]}
    if held and quantize in METHODS and quantize != held["method"]:
        raise BabelevalError(f"{path}: a checkpoint quantized already ({held['method']}, from {held['source']}); "
                             f"--quantize {quantize} would round its codes again: use keep (as saved) or none (dequantized)")
    config = load_config(path / CONFIG)
    placed_on, sharding = load_placement(config, abstract_params(config, jdtype), mesh)
    config, params, tokenizer = restore_params(path, jdtype, sharding)
    change = None
    if held and quantize == "none":  # on the host, one weight at a time (no program compiled per shape)
        recorded, change = None, lambda key, x: jax.tree.map(np.asarray, x).dequantize(jdtype, np) if is_quantized(x) else x
    elif quantize in METHODS and not held:
        change = lambda key, x: quantize_leaf(key, np.asarray(x), quantize)  # noqa: E731
    if change:
        params = jax.tree_util.tree_map_with_path(
            lambda p, x: place_leaf(sharding, path_name(p), change(path_name(p), x)), params, is_leaf=is_quantized)
    return LoadedModel(run_choices(config), params, tokenizer, jdtype, str(path), placed_on, quantize, recorded, source)


def _host_dense(x):
    """A QArray dequantized on the host (float32 numpy), anything else as it is."""
    return x.dequantize(np.float32, xp=np) if is_quantized(x) else x


def run_choices(config):
    """The config with what the run chooses rather than the checkpoint: how attention is
    computed (BABELEVAL_ATTENTION: models/attention.py), for the models that attend."""
    from ..models.attention import attention_choice

    return dataclasses.replace(config, attention=attention_choice()) if hasattr(config, "attention") else config


__all__ = ["LoadedModel", "ModelSource", "load_model", "model_source", "resolve", "run_choices", "cache_dir",
           "DEFAULT_MODEL", "ALIASES"]
