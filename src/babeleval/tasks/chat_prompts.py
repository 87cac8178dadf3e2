"""Chat templates for tasks (task field `chat:`, `--chat-template` / `--system`): each chatted
variant's template resolved for a model ("model": its own; or a file), and what results.json
says of it. The prompts themselves are built in tasks/prompts.py."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from ..chat import ChatTemplate
from ..errors import BabelevalError
from .config import TaskConfig


def resolve_chat(task: TaskConfig, model) -> TaskConfig:
    """Every chatted variant's template ("model", or a file: absolute, relative to the working
    folder, or to the task file's) as the ChatTemplate it is for `model` (the ModelSource a run
    resolved its spec to, a loaded model, or a spec); one read per template."""
    templates: dict[str, ChatTemplate] = {}
    local = None if getattr(model, "remote", False) else model

    def template(spec: str) -> ChatTemplate:
        if spec not in templates:
            if spec == "model":
                found = ChatTemplate.from_model(model) if local is not None else None
                if found is None:
                    name = getattr(model, "spec", None) or getattr(model, "source", model)
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
