"""Hugging Face model folders: config.json, model.safetensors or a sharded index,
tokenizer.json; hub ids are fetched into the HF cache first."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import BabelevalError
from .tokenizer import HFTokenizer, Special


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
    raise BabelevalError(f"{folder}: no model.safetensors or model.safetensors.index.json (only safetensors weights are read)")


def tensor_names(folder: Path) -> set[str]:
    """The names of a folder's tensors, from the index or the files' headers (no tensor is read)."""
    from safetensors import safe_open

    index = folder / "model.safetensors.index.json"
    if index.exists():
        return set(read_json(index)["weight_map"])
    names = set()
    for file in _safetensors_files(folder):
        with safe_open(str(file), framework="numpy") as handle:
            names.update(handle.keys())
    return names


def read_safetensors(folder: Path) -> dict[str, np.ndarray]:
    return {key: np.asarray(array, np.float32) for key, array in safetensors_items(folder)}


def safetensors_items(folder: Path):
    """(name, array in the file's dtype) for every tensor, read one at a time (a loader places
    each on its devices before the next is read: never the whole model on the host)."""
    from safetensors import safe_open

    for file in _safetensors_files(folder):
        try:
            with safe_open(str(file), framework="numpy") as handle:
                for key in handle.keys():
                    yield key, handle.get_tensor(key)
        except (OSError, ValueError) as exc:
            raise BabelevalError(f"{file}: unreadable safetensors file ({exc})") from None
        except Exception as exc:  # safetensors raises its own SafetensorError on corrupt headers
            raise BabelevalError(f"{file}: unreadable safetensors file ({exc})") from None


def hf_tokenizer(folder: Path, raw_config: dict, add_bos: bool) -> HFTokenizer:
    from tokenizers import Tokenizer as Backend

    file = folder / "tokenizer.json"
    if file.exists():
        backend = Backend.from_file(str(file))
    else:
        backend = _converted_sentencepiece(folder)
    tok_cfg = read_json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").exists() else {}

    def special_id(name):
        value = raw_config.get(f"{name}_token_id")
        value = value[0] if isinstance(value, list) else value
        token = tok_cfg.get(f"{name}_token")
        token = token.get("content") if isinstance(token, dict) else token
        return value if value is not None else (backend.token_to_id(token) if token else None)

    return HFTokenizer(backend, Special(special_id("bos"), special_id("eos"), special_id("pad"), add_bos))


SENTENCEPIECE_FILES = ("spiece.model", "sentencepiece.bpe.model", "tokenizer.model")  # T5/mT5, NLLB/XLM-R, Llama


def _converted_sentencepiece(folder: Path):
    """A folder with a SentencePiece model but no tokenizer.json (mT5, mT0 and NLLB on the hub):
    transformers converts it, with the family's special tokens, into the fast tokenizer HF's
    own loading would use."""
    if not any((folder / name).exists() for name in SENTENCEPIECE_FILES):
        raise BabelevalError(f"{folder}: no tokenizer.json (nor a SentencePiece model: {', '.join(SENTENCEPIECE_FILES)})")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise BabelevalError(f"{folder}: only a SentencePiece model: converting it needs transformers and sentencepiece "
                             "(pip install transformers sentencepiece protobuf)") from None
    return AutoTokenizer.from_pretrained(str(folder)).backend_tokenizer


def download(repo_id: str) -> Path:
    """Fetch a hub model (config, safetensors, tokenizer files only) into the HF cache."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, allow_patterns=["*.json", "*.safetensors", *SENTENCEPIECE_FILES]))
    except Exception as exc:  # network, auth and missing-repo errors all end here
        raise BabelevalError(f"{repo_id}: could not download from the Hugging Face hub ({exc})") from None
