"""Task prompts through a chat template (task field `chat:`, `--chat-template` / `--system`).

The prompt is the user's turn and the model answers in its own turn: the demonstrations are
alternating user/assistant turns (fewshot_as_multiturn, lm_eval.simple_evaluate's default)
or all in the one user turn with the question, as lm-eval builds them; the system text, if
any, is the system turn (what the template does with it is the template's business: Gemma 3
puts it at the top of the first user turn). The rendered text ends with the generation
prompt, so a choice is scored, or an answer generated, as the assistant's reply. A template
that writes BOS itself (Gemma's `{{ bos_token }}`) gets no second one from the engine.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from ..chat import ChatTemplate
from ..errors import BabelevalError
from .config import TaskConfig, Variant


def chat_context(variant: Variant, demos: list[tuple[str, str]], prompt: str) -> str:
    from .documents import with_shots

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
        plain = with_shots(variant, [question + variant.target_delimiter + answer for question, answer in demos], prompt)
        messages.append({"role": "user", "content": plain})
    return chat.template.render(messages, add_generation_prompt=True)


def resolve_chat(task: TaskConfig, model) -> TaskConfig:
    """Every chatted variant's template ("model", or a file: absolute, relative to the working
    folder, or to the task file's) as the ChatTemplate it is for `model` (a spec or a loaded
    model); one read per template."""
    templates: dict[str, ChatTemplate] = {}
    local = None if getattr(model, "remote", False) else model

    def template(spec: str) -> ChatTemplate:
        if spec not in templates:
            if spec == "model":
                found = ChatTemplate.from_model(model) if local is not None else None
                if found is None:
                    name = getattr(model, "source", model)
                    raise BabelevalError(f"{name}: the model carries no chat template (no tokenizer.chat_template in "
                                         "its GGUF, no chat_template in its tokenizer_config.json); give one with "
                                         "--chat-template FILE or chat: {template: FILE} in the task file")
            else:
                path = Path(spec).expanduser()
                if not path.is_absolute() and not path.exists():
                    path = Path(task.where).parent / path
                found = ChatTemplate.from_file(path, model=local)
            templates[spec] = found
        return templates[spec]

    variants = tuple(
        dataclasses.replace(v, chat=dataclasses.replace(v.chat, template=template(v.chat.template)))
        if getattr(v, "chat", None) is not None and isinstance(v.chat.template, str) else v
        for v in task.variants)
    return dataclasses.replace(task, variants=variants)


def chat_summary(units) -> dict | None:
    """What results.json says of a chatted task: the template (where it came from, its hash),
    the system message and the few-shot layout (the same for every variant of a run)."""
    for unit in units:
        chat = getattr(unit.variant, "chat", None)
        if chat is not None and isinstance(chat.template, ChatTemplate):
            return {"template": chat.template.origin, "hash": chat.template.hash, "system": chat.system,
                    "fewshot_as_multiturn": chat.fewshot_as_multiturn}
    return None


def lm_eval_chat_arguments(chat) -> dict:
    """lm-eval's Task.fewshot_context keywords for a chatted `lm-eval:` task: lm-eval builds the
    turns (its --apply_chat_template path, system instruction, multi-turn few-shot) and our
    ChatTemplate renders them, as transformers would."""
    if chat is None:
        return {}
    return {"system_instruction": chat.system, "apply_chat_template": True,
            "fewshot_as_multiturn": chat.fewshot_as_multiturn, "chat_template": chat.template.render}
