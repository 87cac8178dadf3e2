"""Prompt building, in one place for every task kind: the demonstrations (question, answer)
and the prompt a model continues, as plain text or through a chat template.

Plain: the few-shot header, the demonstrations (each question, the target delimiter, its
answer) joined by the separator, the last separator, the prompt. Chatted (task field `chat:`):
the prompt is the user's turn and the model answers in its own turn: the demonstrations are
alternating user/assistant turns (fewshot_as_multiturn, lm_eval.simple_evaluate's default)
or all in the one user turn with the question, as lm-eval builds them; the system text, if
any, is the system turn (what the template does with it is the template's business: Gemma 3
puts it at the top of the first user turn). The rendered text ends with the generation
prompt, so a choice is scored, or an answer generated, as the assistant's reply. A template
that writes BOS itself (Gemma's `{{ bos_token }}`) gets no second one from the engine.
"""
from __future__ import annotations

from ..chat import ChatTemplate
from ..errors import BabelevalError
from .config import Variant


def with_shots(variant: Variant, demos: list[str], prompt: str) -> str:
    shot = variant.fewshot
    if not demos:
        return shot.header + prompt
    last = shot.separator if shot.last_separator is None else shot.last_separator
    return shot.header + shot.separator.join(demos) + last + prompt


def plain_context(variant: Variant, demos: list[tuple[str, str]], prompt: str) -> str:
    """The demonstrations, each answer after the target delimiter, then the prompt."""
    return with_shots(variant, [question + variant.target_delimiter + answer for question, answer in demos], prompt)


def prompt_context(variant: Variant, demos: list[tuple[str, str]], prompt: str) -> str:
    """The text a model continues: plain, or rendered through the variant's chat template."""
    return plain_context(variant, demos, prompt) if variant.chat is None else chat_context(variant, demos, prompt)


def chat_context(variant: Variant, demos: list[tuple[str, str]], prompt: str) -> str:
    chat, header = variant.chat, variant.fewshot.header
    if not isinstance(chat.template, ChatTemplate):
        raise BabelevalError(f"{variant.where}: chat template {chat.template!r} is not resolved for a model "
                             "(evaluate() resolves it; resolve_chat(task, model) does it by hand)")
    messages = [{"role": "system", "content": chat.system}] if chat.system else []
    if chat.fewshot_as_multiturn and demos:
        for i, (question, answer) in enumerate(demos):
            messages += [{"role": "user", "content": (header if i == 0 else "") + question},
                         {"role": "assistant", "content": answer}]
        messages.append({"role": "user", "content": prompt})
    else:
        messages.append({"role": "user", "content": plain_context(variant, demos, prompt)})
    return chat.template.render(messages, add_generation_prompt=True)
