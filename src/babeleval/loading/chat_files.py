"""A model's own chat template and named special tokens, read from its files: a GGUF's
tokenizer.chat_template and token table, or an HF folder's chat_template.jinja /
tokenizer_config.json (one string, or named templates) and special_tokens_map.json."""
from __future__ import annotations

import functools
import json
from pathlib import Path

from ..errors import BabelevalError

def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BabelevalError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None


def template_in_config(config: dict, path: Path) -> str | None:
    """tokenizer_config.json's chat_template: one string, or named templates (transformers uses "default")."""
    value = config.get("chat_template")
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        if "default" not in named:
            raise BabelevalError(f"{path}: chat_template lists templates {', '.join(map(str, named))} but none "
                                 "named 'default'")
        return named["default"]
    return value


def model_template(path: Path, names: tuple[str, ...]) -> tuple[str | None, str, dict]:
    """(template source or None, where it was found, its special tokens among `names`) of a model
    file or folder."""
    if path.suffix == ".gguf":
        return _gguf_template(str(path), path.stat().st_mtime)
    if path.is_dir():
        return _hf_folder_template(path, names)
    return None, str(path), {}


@functools.lru_cache(maxsize=8)
def _gguf_template(path: str, mtime: float) -> tuple[str | None, str, dict]:
    """Read once per file."""
    from .gguf_file import read_gguf_metadata

    value = read_gguf_metadata(Path(path)).get
    tokens = value("tokenizer.ggml.tokens") or []
    special = {}
    for name, key in (("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"), ("unk_token", "unknown_token_id"),
                      ("pad_token", "padding_token_id")):
        index = value(f"tokenizer.ggml.{key}")
        if index is not None and int(index) < len(tokens):
            special[name] = tokens[int(index)]
    return value("tokenizer.chat_template"), f"{path} (tokenizer.chat_template)", special


def _hf_folder_template(path: Path, names: tuple[str, ...]) -> tuple[str | None, str, dict]:
    config_file = path / "tokenizer_config.json"
    config = read_json(config_file) if config_file.exists() else {}
    jinja_file = path / "chat_template.jinja"  # where transformers >= 4.43 saves it; it wins over the config
    source, origin = ((jinja_file.read_text(encoding="utf-8"), str(jinja_file)) if jinja_file.exists()
                      else (template_in_config(config, config_file), f"{config_file} (chat_template)"))
    special_map = path / "special_tokens_map.json"
    tokens = {**(read_json(special_map) if special_map.exists() else {}), **config}
    special = {}
    for name in names:
        value = tokens.get(name)
        value = value.get("content") if isinstance(value, dict) else value
        if isinstance(value, str):
            special[name] = value
    return source, origin, special
