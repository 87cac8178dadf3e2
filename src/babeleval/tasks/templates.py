"""Jinja2 prompt templates and expressions over a document's fields.

A template renders text (the prompt); an expression yields a value (the choices list,
the target, a document id). Both are strict: a name the document lacks is an error that
names the template and the fields the document has, never an empty string in a prompt.
"""
from __future__ import annotations

import functools

import jinja2

from ..errors import BabelevalError

_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)


@jinja2.pass_context
def _render_nested(ctx, source: str, **extra) -> str:
    """render(t, name=value): a template held in a var (ProverbEval's per-language prompts),
    rendered with the same document and the extra names."""
    return _template(source).render({**ctx.get_all(), **extra})


_ENV.globals["render"] = _render_nested


@functools.lru_cache(maxsize=None)
def _template(source: str) -> jinja2.Template:
    return _ENV.from_string(source)


@functools.lru_cache(maxsize=None)
def _expression(source: str):
    return _ENV.compile_expression(source, undefined_to_none=False)


def _explain(exc: Exception, what: str, where: str, context: dict) -> BabelevalError:
    fields = ", ".join(sorted(k for k in context if not k.startswith("_")))
    if isinstance(exc, jinja2.UndefinedError):
        return BabelevalError(f"{where}: {what} refers to a missing field ({exc}); the document has: {fields}")
    return BabelevalError(f"{where}: {what} failed ({type(exc).__name__}: {exc})")


def value_of(source, variables: dict, what: str, where: str):
    """A setting given as an expression over the variant's vars (labels that depend on the
    prompt language): evaluated once per variant; a plain value is itself."""
    return evaluate(source, {**variables, "vars": variables}, what, where) if isinstance(source, str) else source


def check_syntax(source: str, what: str, where: str, expression: bool = False) -> None:
    """Fail at load time on a template that cannot parse (before any document is read)."""
    try:
        _expression(source) if expression else _template(source)
    except jinja2.TemplateSyntaxError as exc:
        raise BabelevalError(f"{where}: {what} does not parse: {exc.message} (line {exc.lineno})") from None


def render(source: str, context: dict, what: str, where: str) -> str:
    try:
        return _template(source).render(context)
    except Exception as exc:  # jinja raises whatever the template's own expressions raise
        raise _explain(exc, what, where, context) from None


def evaluate(source, context: dict, what: str, where: str):
    """An expression's value; a list of expressions gives the list of their values; a
    non-string (a number, a list of numbers) is its own value."""
    if isinstance(source, list):
        return [evaluate(s, context, what, where) for s in source]
    if not isinstance(source, str):
        return source
    try:
        value = _expression(source)(**context)
    except Exception as exc:
        raise _explain(exc, what, where, context) from None
    for part in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(part, jinja2.Undefined):  # a name the document lacks, inside the value
            try:
                str(part)
            except jinja2.UndefinedError as exc:
                raise _explain(exc, what, where, context) from None
    return value
