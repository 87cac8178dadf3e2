"""Hugging Face model folders: config.json, model.safetensors or a sharded index,
tokenizer.json; hub ids are fetched into the HF cache first."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import BabelevalError
from .safetensors_file import header, tensors
from .tokenizer import HFTokenizer, Special, Tokenizer, TransformersTokenizer


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise BabelevalError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise BabelevalError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None


def _safetensors_files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.exists():
        return [folder / name for name in sorted(set(read_json(index)["weight_map"].values()))]
    single = folder / "model.safetensors"
    if single.exists():
        return [single]
    found = sorted(folder.glob("*.safetensors"))
    if found:
        return found
    return []


def _torch_files(folder: Path) -> list[Path]:
    """pytorch_model.bin or its shards: many mT5, mT0 and NLLB repositories hold nothing else."""
    index = folder / "pytorch_model.bin.index.json"
    if index.exists():
        return [folder / name for name in sorted(set(read_json(index)["weight_map"].values()))]
    return [folder / "pytorch_model.bin"] if (folder / "pytorch_model.bin").exists() else []


def _weight_files(folder: Path) -> tuple[list[Path], str]:
    """(files, "safetensors" | "torch"): safetensors where the folder has them."""
    files = _safetensors_files(folder)
    if files:
        return files, "safetensors"
    files = _torch_files(folder)
    if files:
        return files, "torch"
    raise BabelevalError(f"{folder}: no model.safetensors (or index) and no pytorch_model.bin (or index)")


def tensor_names(folder: Path) -> set[str]:
    """The names of a folder's tensors, from the index or the files' headers (no tensor is read)."""
    for index in (folder / "model.safetensors.index.json", folder / "pytorch_model.bin.index.json"):
        if index.exists():
            return set(read_json(index)["weight_map"])
    files, kind = _weight_files(folder)
    if kind == "torch":  # memory-mapped: the keys without converting a tensor
        return {name for state in _torch_states(files) for name in state}
    return {name for file in files for name in header(file)}


def read_safetensors(folder: Path) -> dict[str, np.ndarray]:
    return {key: np.asarray(array, np.float32) for key, array in weight_items(folder)}


def weight_items(folder: Path):
    """(name, array in the file's dtype) for every tensor, read one at a time (a loader places
    each on its devices before the next is read: never the whole model on the host)."""
    files, kind = _weight_files(folder)
    if kind == "torch":
        yield from _torch_items(files)
        return
    for file in files:
        yield from tensors(file)


def _torch_states(files: list[Path]):
    """Each torch pickle's state dict, read with weights_only (no code runs) and memory-mapped
    (a tensor is read when it is used); needs torch."""
    try:
        import torch
    except ImportError:
        raise BabelevalError(f"{files[0]}: reading pytorch_model.bin needs torch (pip install torch), or convert "
                             "the folder to safetensors") from None
    for file in files:
        try:
            yield torch.load(str(file), map_location="cpu", weights_only=True, mmap=True)
        except Exception as exc:  # unpickling errors, truncated files
            raise BabelevalError(f"{file}: unreadable torch weights ({exc})") from None


def _torch_items(files: list[Path]):
    """(name, float32 or native numpy array) of every tensor in torch pickles."""
    import torch

    for state in _torch_states(files):
        for name, tensor in state.items():
            yield name, (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy()


def hf_tokenizer(folder: Path, raw_config: dict, add_bos: bool) -> Tokenizer:
    from tokenizers import Tokenizer as Backend

    file = folder / "tokenizer.json"
    backend = Backend.from_file(str(file)) if file.exists() else _converted_sentencepiece(folder)
    slow = None if isinstance(backend, Backend) else backend  # no tokenizers twin (M2M100)
    lookup = slow.get_vocab().get if slow is not None else backend.token_to_id
    tok_cfg = read_json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").exists() else {}

    def special_id(name):
        value = raw_config.get(f"{name}_token_id")
        value = value[0] if isinstance(value, list) else value
        token = tok_cfg.get(f"{name}_token")
        token = token.get("content") if isinstance(token, dict) else token
        return value if value is not None else (lookup(token) if token else None)

    special = Special(special_id("bos"), special_id("eos"), special_id("pad"), add_bos)
    return TransformersTokenizer(slow, special) if slow is not None else HFTokenizer(backend, special)


SENTENCEPIECE_FILES = ("spiece.model", "sentencepiece.bpe.model", "tokenizer.model")  # T5/mT5, NLLB/XLM-R, Llama


def _converted_sentencepiece(folder: Path):
    """A folder with a SentencePiece model but no tokenizer.json (mT5, mT0 and NLLB on the hub):
    transformers converts it, with the family's special tokens, into the fast tokenizer HF's
    own loading would use; a family with no fast tokenizer (M2M100) gets transformers' own."""
    if not any((folder / name).exists() for name in SENTENCEPIECE_FILES):
        raise BabelevalError(f"{folder}: no tokenizer.json (nor a SentencePiece model: {', '.join(SENTENCEPIECE_FILES)})")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise BabelevalError(f"{folder}: only a SentencePiece model: converting it needs transformers and sentencepiece "
                             "(pip install transformers sentencepiece protobuf)") from None
    tok = AutoTokenizer.from_pretrained(str(folder))
    return getattr(tok, "backend_tokenizer", None) or tok  # M2M100's has no fast twin: used as it is


def download(repo_id: str) -> Path:
    """Fetch a hub model (config, weights, tokenizer files only) into the HF cache: safetensors
    where the repository has them, else pytorch_model.bin (never both)."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, allow_patterns=["*.json", _weights_pattern(repo_id), *SENTENCEPIECE_FILES]))
    except Exception as exc:  # network, auth and missing-repo errors all end here
        raise BabelevalError(f"{repo_id}: could not download from the Hugging Face hub ({exc})") from None


def _weights_pattern(repo_id: str) -> str:
    """The repository's safetensors, or its torch pickles where it has no safetensors (offline:
    the cached snapshot is used whatever it holds)."""
    from huggingface_hub import list_repo_files

    try:
        files = list_repo_files(repo_id)
    except Exception:  # offline, or no such repository: snapshot_download says which
        return "*.safetensors"
    return "*.safetensors" if any(f.endswith(".safetensors") for f in files) else "pytorch_model*"
