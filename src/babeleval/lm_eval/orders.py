"""Choice orders for lm-eval multiple-choice tasks. Permuting the continuations alone says
nothing when the prompt lists the options (belebele, global_mmlu: the model answers "B"),
so the document itself is permuted: the fields the prompt template reads the options from
(a list field, or a numbered family such as mc_answer1..4 / option_a..d) are reordered,
the field the target reads is re-encoded (index, 1-based number, letter or text) and lm-eval
renders the prompt again with the task's own doc_to_text. Which fields those are is found
on the task's first document and proved there: the permuted prompt must list the options in
the new order and doc_to_target must give the moved gold. A task where that fails (the
options are not in the prompt, as in xcopa) is refused in one line.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass

from ..errors import BabelevalError
from ..tasks.config import LETTERS
from ..tasks.order import permutation

INDEXED = re.compile(r"^(.*?)(\d+|[A-Za-z])$")


@dataclass(frozen=True)
class OptionFields:
    names: tuple[str, ...]  # the option fields in option order; one name: a list field
    target: str | None  # the field doc_to_target reads the gold from (None: it follows the options)
    encoding: str | None  # index | number | letter | text, as str or int (see _encode)

    @property
    def signature(self) -> list:
        return [list(self.names), self.target, self.encoding]

    def texts(self, doc: dict) -> list[str]:
        return list(doc[self.names[0]]) if len(self.names) == 1 else [doc[n] for n in self.names]

    def permuted(self, doc: dict, perm: list[int], gold: int) -> dict:
        shown = [self.texts(doc)[i] for i in perm]
        out = dict(doc)
        if len(self.names) == 1:
            out[self.names[0]] = shown
        else:
            out.update(zip(self.names, shown))
        if self.target is not None:
            out[self.target] = _encode(self.encoding, perm.index(gold), shown, doc[self.target])
        return out


def _encode(encoding: str, index: int, options: list[str], like):
    value = {"index": index, "number": index + 1, "letter": LETTERS[index], "lower": LETTERS[index].lower(),
             "text": options[index] if options else None}[encoding]
    return str(value) if isinstance(like, str) else value


def gold_of(task, doc: dict) -> int | None:
    """doc_to_target as an option index (lm-eval's own rule: an int, or a choice's text)."""
    gold, choices = task.doc_to_target(doc), task.doc_to_choice(doc)
    if isinstance(gold, str):
        gold = choices.index(gold) if gold in choices else None
    return gold if isinstance(gold, int) and 0 <= gold < len(choices) else None


def _families(doc: dict, k: int, prompt: str) -> list[tuple[str, ...]]:
    """Field groups that hold k options shown in the prompt: a list field, or fields named
    stem1..stemK / stem0.. / stemA.. / stema.. (in that order)."""
    found = [(name,) for name, value in doc.items()
             if isinstance(value, list) and len(value) == k and all(isinstance(v, str) and v and v in prompt for v in value)]
    stems: dict[str, list[tuple[str, str]]] = {}
    for name, value in doc.items():
        match = INDEXED.match(str(name))
        if match and isinstance(value, str) and value.strip() and value in prompt:
            stems.setdefault(match.group(1), []).append((match.group(2), name))
    for members in stems.values():
        for first in ("1", "0", "A", "a"):
            wanted = [str(int(first) + i) if first.isdigit() else chr(ord(first) + i) for i in range(k)]
            named = dict(members)
            if all(w in named for w in wanted):
                found.append(tuple(named[w] for w in wanted))
    return found


def _in_order(prompt: str, texts: list[str]) -> bool:
    """The options appear in the prompt in this order (each after the previous one)."""
    at = 0
    for text in texts:
        at = prompt.find(text, at)
        if at < 0:
            return False
        at += len(text)
    return True


def _refuse(subset: str, why: str):
    return BabelevalError(f"lm-eval task {subset}: --choice-orders cannot reorder it: {why}; run it without --choice-orders")


def option_fields(task, subset: str) -> OptionFields:
    """The option and target fields of an lm-eval task, proved on its first document."""
    if task.get_config("output_type") != "multiple_choice":
        raise _refuse(subset, "not a multiple-choice task")
    if task.multiple_input:
        raise _refuse(subset, "its options are the contexts (multiple inputs), not a list in the prompt")
    doc = dict(task.eval_docs[0])
    prompt, k = task.doc_to_text(doc), len(task.doc_to_choice(doc))
    gold = gold_of(task, doc)
    if gold is None or k < 2:
        raise _refuse(subset, "its first document has no single gold option")
    families = _families(doc, k, prompt)
    if not families:
        raise _refuse(subset, f"its prompt does not list the {k} options from document fields (the options are only "
                              "the continuations, so a permuted order would score the same text)")
    shift = [(i + 1) % k for i in range(k)]  # every option moves, the gold too
    for names in families:
        for target, encoding in [(None, None), *_target_candidates(doc, gold, names)]:
            fields = OptionFields(names, target, encoding)
            moved = fields.permuted(doc, shift, gold)
            if _in_order(task.doc_to_text(moved), [fields.texts(doc)[i] for i in shift]) and gold_of(task, moved) == shift.index(gold):
                return fields
    raise _refuse(subset, f"no field it reads the gold from could be re-encoded (tried {', '.join(map('/'.join, families))})")


def _target_candidates(doc: dict, gold: int, option_names) -> list[tuple[str, str]]:
    texts = [doc[n] for n in option_names] if len(option_names) > 1 else list(doc[option_names[0]])
    out = []
    for name, value in doc.items():
        if name in option_names or isinstance(value, (list, dict, bool)):
            continue
        for encoding in ("index", "number", "letter", "lower", "text"):
            if str(value).strip() == str(_encode(encoding, gold, texts, "")):
                out.append((name, encoding))
    return out


def permuted_document(variant, doc_id: str, doc: dict) -> tuple[dict, list[int], list[str]]:
    """(the document with its options in the variant's order, the permutation, the original texts)."""
    task, fields = variant.lm_task, variant.options
    gold = gold_of(task, doc)
    texts = fields.texts(doc)
    if gold is None:
        raise BabelevalError(f"{variant.where} document {doc_id}: no single gold option to move")
    perm = permutation(variant.order, len(texts), gold, variant.order_seed, doc_id)
    shown = fields.permuted(doc, perm, gold)
    if gold_of(task, shown) != perm.index(gold):
        raise BabelevalError(f"{variant.where} document {doc_id}: the gold did not follow the permuted options "
                             f"(fields {', '.join(fields.names)}, target {fields.target})")
    return shown, perm, texts


@contextmanager
def shots_exclude(task, original: dict):
    """Few-shot from the evaluated split (belebele: first_n over test) leaves the evaluated
    document out by equality; a permuted document equals nothing in the pool, so the original
    is left out instead: every order gets the demonstrations of the original order, and never
    the question itself."""
    sampler = getattr(task, "sampler", None)
    if sampler is None:
        yield
        return
    sampler.rm_eval_doc = lambda doc, docs, n=None: type(sampler).rm_eval_doc(original, docs, n)
    try:
        yield
    finally:
        del sampler.rm_eval_doc
