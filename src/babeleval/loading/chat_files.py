"""A model's own chat template and named special tokens, read from its files: a GGUF's
tokenizer.chat_template and token table, or an HF folder's chat_template.jinja /
tokenizer_config.json (one string, or named templates) and special_tokens_map.json. Read once
per model by its ModelSource (source.py); chat.py picks the special tokens a template gets."""
from __future__ import annotations

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


def gguf_template(meta: dict, path: str) -> tuple[str | None, str, dict]:
    """(template source or None, where it was found, named special tokens) of a GGUF file's metadata."""
    tokens = meta.get("tokenizer.ggml.tokens") or []
    special = {}
    for name, key in (("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"), ("unk_token", "unknown_token_id"),
                      ("pad_token", "padding_token_id")):
        index = meta.get(f"tokenizer.ggml.{key}")
        if index is not None and int(index) < len(tokens):
            special[name] = tokens[int(index)]
    return meta.get("tokenizer.chat_template"), f"{path} (tokenizer.chat_template)", special


def hf_folder_template(path: Path) -> tuple[str | None, str, dict]:
    """(template source or None, where it was found, every named special token: bos_token, ...) of
    an HF folder (or a checkpoint's)."""
    config_file = path / "tokenizer_config.json"
    config = read_json(config_file) if config_file.exists() else {}
    jinja_file = path / "chat_template.jinja"  # where transformers >= 4.43 saves it; it wins over the config
    source, origin = ((jinja_file.read_text(encoding="utf-8"), str(jinja_file)) if jinja_file.exists()
                      else (template_in_config(config, config_file), f"{config_file} (chat_template)"))
    special_map = path / "special_tokens_map.json"
    tokens = {**(read_json(special_map) if special_map.exists() else {}), **config}
    special = {}
    for name, value in tokens.items():
        value = value.get("content") if isinstance(value, dict) else value
        if name.endswith("_token") and isinstance(value, str):
            special[name] = value
    return source, origin, special
