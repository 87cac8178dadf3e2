"""A model's chat template, rendered the way transformers' `apply_chat_template` renders it.

Instruction-tuned models are evaluated through the conversation format they were tuned on;
the template is the model's own (GGUF `tokenizer.chat_template`, an HF folder's
`chat_template.jinja` or tokenizer_config.json `chat_template`) or a file of the user's.
Rendering follows transformers (utils/chat_template_utils.py) so a prompt is the same text,
character for character, as `tokenizer.apply_chat_template(..., tokenize=False)` gives: a
sandboxed Jinja2 environment with trim_blocks and lstrip_blocks, the loop-controls
extension, `raise_exception`, `strftime_now`, a `tojson` that does not escape HTML, and the
tokenizer's named special tokens (bos_token, eos_token, ...) as variables. Templates come
from the hub: they are untrusted code, hence the sandbox. Importing this module starts no JAX.
"""
from __future__ import annotations

import functools
import json
from datetime import datetime
from pathlib import Path

from .errors import BabelevalError
from .provenance import text_hash

SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _raise_exception(message):
    import jinja2

    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format):
    return datetime.now().strftime(format)


@functools.lru_cache(maxsize=None)
def _environment():
    import jinja2
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        """`{% generation %}...{% endgeneration %}` marks assistant text for training masks; rendering keeps the text."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
    return env


@functools.lru_cache(maxsize=64)
def _compile(source: str):
    return _environment().from_string(source)


class ChatTemplate:
    """source: the Jinja2 text; the special tokens are the strings the template may use
    (transformers passes every named special token the tokenizer has); origin names where
    the template came from, for messages."""

    def __init__(self, source: str, bos_token: str | None = None, eos_token: str | None = None,
                 origin: str = "chat template", **special_tokens):
        unknown = [k for k in special_tokens if k not in SPECIAL_TOKENS]
        if unknown:
            raise TypeError(f"unknown special token {unknown[0]!r}; known: {', '.join(SPECIAL_TOKENS)}")
        if not isinstance(source, str) or not source.strip():
            raise BabelevalError(f"{origin}: the chat template is empty")
        self.source = source
        self.origin = origin
        self.special_tokens = {k: v for k, v in {"bos_token": bos_token, "eos_token": eos_token, **special_tokens}.items()
                               if v is not None}
        try:
            _compile(source)
        except Exception as exc:  # jinja2.TemplateSyntaxError, or a sandbox refusal
            raise BabelevalError(f"{origin}: the chat template does not parse ({exc})") from None

    @property
    def bos_token(self) -> str | None:
        return self.special_tokens.get("bos_token")

    @property
    def eos_token(self) -> str | None:
        return self.special_tokens.get("eos_token")

    @property
    def hash(self) -> str:
        return text_hash(self.source)

    @property
    def identity(self) -> dict:
        """What a task signature holds of a template: the text's hash and the special tokens it is
        rendered with (not where the file lies)."""
        return {"hash": self.hash, "special_tokens": self.special_tokens}

    def render(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """messages: [{"role": "system"|"user"|"assistant", "content": str}, ...] (keys whose
        value is None are dropped, as transformers does)."""
        if not messages:
            raise BabelevalError(f"{self.origin}: cannot render an empty conversation")
        chat = [{k: v for k, v in m.items() if v is not None} for m in messages]
        try:
            return _compile(self.source).render(messages=chat, tools=None, documents=None,
                                                add_generation_prompt=add_generation_prompt, **self.special_tokens)
        except Exception as exc:  # raise_exception in the template, or an error in its expressions
            raise BabelevalError(f"{self.origin}: {type(exc).__name__}: {exc} "
                                 f"(roles: {', '.join(m.get('role', '?') for m in chat)})") from None

    @classmethod
    def from_file(cls, path, model=None) -> "ChatTemplate":
        """A template file of the user's (.jinja, or a tokenizer_config.json-style .json),
        with the special tokens of `model` (a ModelSource, a loaded model or a spec) where given."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise BabelevalError(f"{path}: cannot read the chat template ({exc.strerror})") from None
        except UnicodeDecodeError as exc:
            raise BabelevalError(f"{path}: the chat template is not UTF-8 ({exc.reason} at byte {exc.start})") from None
        from .loading.chat_files import read_json, template_in_config  # reading model files: loading/

        if path.suffix == ".json":
            text = template_in_config(read_json(path), path)
            if not text:
                raise BabelevalError(f"{path}: no chat_template field")
        special = _carried(model)[2] if model is not None else {}
        return cls(text, origin=str(path), **special)

    @classmethod
    def from_model(cls, model) -> "ChatTemplate | None":
        """The template the model carries, or None. model: a ModelSource (loading/source.py: the
        run resolves its spec once), a loaded model, or a spec load_model accepts."""
        source, origin, special = _carried(model)
        return cls(source, origin=origin, **special) if source else None


def _carried(model) -> tuple[str | None, str, dict]:
    """(template, origin, the special tokens a template gets) as the model's ModelSource read them."""
    from .loading.source import model_source  # a spec is resolved there (imports JAX, starts no backend)

    source, origin, special = model_source(model).chat
    return source, origin, {k: v for k, v in special.items() if k in SPECIAL_TOKENS}
