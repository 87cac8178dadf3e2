"""XQuAD-hi generation requests as the xquad-hi task builds them (IndicXQuAD protocol: 32 new
tokens, cut at the first newline), and transformers' greedy continuation of one prompt, the
peer of bench/xquad_generation.py and bench/generation_floor.py."""
from __future__ import annotations

from pathlib import Path

from babeleval.requests import cut_at_stop


def xquad_hi_requests(data: Path, questions: int, one_per_paragraph: bool = False) -> list:
    """The first `questions` questions' requests; one_per_paragraph: only the first question of
    each paragraph among them (prompts that share no prefix: 76 of the first 400)."""
    from babeleval.evaluate import prepare_task
    from babeleval.tasks.files import find_task

    unit = prepare_task(find_task("xquad-hi"), data, questions)[0]
    items = unit.items
    if one_per_paragraph:
        items = list({item.context.split("\nQuestion:")[0]: item for item in reversed(items)}.values())[::-1]
    return unit.kind.requests(items)


def transformers_text(hf, tokenizer, prompt_ids: list[int], max_new: int, stops: tuple[str, ...]) -> str:
    """hf.generate's greedy continuation of one prompt (no padding), cut as babeleval cuts:
    at EOS, else the partial UTF-8 sequence a length cut leaves dropped; then at the first stop."""
    import torch

    ids = torch.tensor([prompt_ids], device=hf.device)
    with torch.no_grad():
        out = hf.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new, do_sample=False,
                          pad_token_id=tokenizer.eos_id, eos_token_id=tokenizer.eos_id)[0, ids.shape[1]:].tolist()
    if tokenizer.eos_id in out:
        text = tokenizer.decode(out[:out.index(tokenizer.eos_id)])
    else:
        text = tokenizer.decode(out).rstrip("\ufffd")
    return cut_at_stop(text, stops)
