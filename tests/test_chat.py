"""Chat templates: our Jinja2 rendering against transformers' apply_chat_template on the
real tokenizers of SmolLM2-135M-Instruct (its template is in its GGUF) and Gemma 3 270M
(its GGUF has none: Gemma 3's published template, tests/fixtures/chat/gemma3.jinja, is set
on both sides), then the template inside `babeleval run`."""
from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from babeleval.chat import ChatTemplate
from babeleval.errors import BabelevalError

GEMMA3 = Path(__file__).parent / "fixtures" / "chat" / "gemma3.jinja"
XCOPA_SW = Path(__file__).parent / "data" / "xcopa" / "sw"  # the slice in the repository (tests/data)


@functools.lru_cache(maxsize=None)
def hf_tokenizer(alias: str):
    import transformers

    from babeleval.loading import resolve

    path = resolve(alias)
    return transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


def xcopa_rows(n: int) -> list[dict]:
    with (XCOPA_SW / "val.sw.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(next(handle)) for _ in range(n)]


def conversations() -> dict[str, list[dict]]:
    """Real Swahili XCOPA rows as a system message, a 2-shot multi-turn few-shot and a single
    turn; contents with the edge whitespace a template may trim."""
    rows = xcopa_rows(3)
    question = lambda r: f"{r['premise']} Swali: {'kwa sababu' if r['question'] == 'cause' else 'kwa hiyo'}?\n"
    answer = lambda r: r[f"choice{r['label'] + 1}"]
    shots = [m for r in rows[:2] for m in ({"role": "user", "content": question(r)}, {"role": "assistant", "content": answer(r)})]
    system = {"role": "system", "content": "Jibu kwa Kiswahili. \"Chagua\" <jibu> & sababu."}
    return {
        "single": [{"role": "user", "content": question(rows[2])}],
        "system": [system, {"role": "user", "content": question(rows[2])}],
        "fewshot": shots + [{"role": "user", "content": question(rows[2])}],
        "system+fewshot": [system] + shots + [{"role": "user", "content": question(rows[2])}],
    }


def templates():
    smol = ChatTemplate.from_model("smollm2-135m")
    gemma = ChatTemplate.from_file(GEMMA3, model="gemma3-270m")
    return {"smollm2-135m": smol, "gemma3-270m": gemma}


@pytest.mark.full
def test_rendering_equals_transformers_character_for_character():
    """Every conversation, with and without the generation prompt, equals transformers'
    apply_chat_template(tokenize=False) on the tokenizer built from the same GGUF."""
    ours = templates()
    for alias, template in ours.items():
        tokenizer = hf_tokenizer(alias)
        if alias == "gemma3-270m":
            tokenizer.chat_template = GEMMA3.read_text(encoding="utf-8")
        assert {k: v for k, v in tokenizer.special_tokens_map.items() if k in template.special_tokens} == template.special_tokens
        for name, messages in conversations().items():
            for generation_prompt in (True, False):
                expected = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
                assert template.render(messages, add_generation_prompt=generation_prompt) == expected, (alias, name)
    # what the templates really do with a system message and the generation prompt
    messages = conversations()["system"]
    smol = ours["smollm2-135m"].render(messages)
    assert smol.startswith("<|im_start|>system\nJibu kwa Kiswahili.") and smol.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert "You are a helpful AI assistant named SmolLM" in ours["smollm2-135m"].render(conversations()["single"])
    gemma = ours["gemma3-270m"].render(messages)
    assert gemma.startswith("<bos><start_of_turn>user\nJibu kwa Kiswahili. \"Chagua\" <jibu> & sababu.\n\n")
    assert "<start_of_turn>system" not in gemma and gemma.endswith("?<end_of_turn>\n<start_of_turn>model\n")


@pytest.mark.full
def test_template_exceptions_are_errors_naming_the_template():
    """Gemma 3's template refuses roles that do not alternate (raise_exception): transformers
    raises, and so do we, with the template's own message and where it came from."""
    template = templates()["gemma3-270m"]
    twice = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    tokenizer = hf_tokenizer("gemma3-270m")
    tokenizer.chat_template = GEMMA3.read_text(encoding="utf-8")
    with pytest.raises(Exception, match="Conversation roles must alternate"):
        tokenizer.apply_chat_template(twice, tokenize=False)
    with pytest.raises(BabelevalError, match=r"gemma3\.jinja: TemplateError: Conversation roles must alternate"):
        template.render(twice)


def test_sandbox_tojson_special_tokens_and_hash():
    """The sandbox refuses attribute tricks; tojson keeps non-ASCII and HTML characters (as
    transformers' does, unlike Jinja's own); the hash follows the source."""
    source = "{{ bos_token }}{% for m in messages %}{{ m | tojson }}{% endfor %}{% if add_generation_prompt %}>{% endif %}"
    template = ChatTemplate(source, bos_token="<s>", eos_token="</s>")
    out = template.render([{"role": "user", "content": "Habari <b> & 'ndiyo'"}])
    assert out == '<s>{"role": "user", "content": "Habari <b> & \'ndiyo\'"}>'
    assert template.hash == ChatTemplate(source).hash != ChatTemplate(source + " ").hash and len(template.hash) == 16
    evil = ChatTemplate("{{ messages.__class__.__mro__ }}")
    with pytest.raises(BabelevalError, match="SecurityError|unsafe"):
        evil.render([{"role": "user", "content": "x"}])
    with pytest.raises(BabelevalError, match="does not parse"):
        ChatTemplate("{% for m in messages %}")


def test_template_from_an_hf_folder(tmp_path):
    """tokenizer_config.json: a string, or named templates (the "default" one); chat_template.jinja wins."""
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": {"content": "<s>"}, "eos_token": "</s>",
        "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "{{ bos_token }}D"}]}))
    template = ChatTemplate.from_model(tmp_path)
    assert template.render([{"role": "user", "content": "x"}]) == "<s>D"
    assert template.special_tokens == {"bos_token": "<s>", "eos_token": "</s>"}
    (tmp_path / "chat_template.jinja").write_text("J{{ eos_token }}")
    assert ChatTemplate.from_model(tmp_path).render([{"role": "user", "content": "x"}]) == "J</s>"


@pytest.mark.full
def test_gemma3_gguf_carries_no_template():
    """The packaged Gemma 3 270M GGUF has no tokenizer.chat_template: from_model says so (None)."""
    assert ChatTemplate.from_model("gemma3-270m") is None


def test_importing_chat_starts_no_jax():
    out = subprocess.run([sys.executable, "-c", "import sys, babeleval.chat; print('jax' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.full
def test_run_with_the_models_template_and_a_system_message(tmp_path):
    """`babeleval run --chat-template model --system S` on XCOPA-sw, 2-shot: every prompt is
    transformers' rendering of [system, user, assistant, user, assistant, user] + the generation
    prompt (the records hold its hash); the signature differs from a plain run's, so a plain
    run into the same output is refused instead of mixing records."""
    from click.testing import CliRunner

    from babeleval.cli.main import cli
    from babeleval.provenance import text_hash

    out, system = tmp_path / "out", "Chagua mwisho unaofaa zaidi."
    common = ["run", "--quiet", "--task", "xcopa:sw", "--limit", "3", "--fewshot", "2", "--output", out]
    result = CliRunner().invoke(cli, common + ["--chat-template", "model", "--system", system])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "samples_xcopa.jsonl").read_text().splitlines()]
    words = {"cause": "kwa sababu", "effect": "kwa hiyo"}
    question = lambda r: f"{r['premise'].strip()[:-1]} {words[r['question']]}"
    answer = lambda r: (lambda c: c[:1].lower() + c[1:])(r[f"choice{r['label'] + 1}"])
    shots = xcopa_rows(2)
    with (XCOPA_SW / "test.sw.jsonl").open(encoding="utf-8") as handle:
        docs = [json.loads(next(handle)) for _ in range(3)]
    tokenizer = hf_tokenizer("smollm2-135m")
    for record, doc in zip(records, docs):
        messages = [{"role": "system", "content": system}]
        for shot in shots:
            messages += [{"role": "user", "content": question(shot)}, {"role": "assistant", "content": answer(shot)}]
        messages.append({"role": "user", "content": question(doc)})
        expected = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert expected.endswith(f"{question(doc)}<|im_end|>\n<|im_start|>assistant\n")
        assert record["id"] == str(doc["idx"]) and record["prompt_hash"] == text_hash(expected)
    chat = json.loads((out / "results.json").read_text())["tasks"]["xcopa"]["chat"]
    assert chat == {"template": f"{ChatTemplate.from_model('smollm2-135m').origin}", "system": system,
                    "hash": ChatTemplate.from_model("smollm2-135m").hash, "fewshot_as_multiturn": True}
    plain = CliRunner().invoke(cli, common)
    assert plain.exit_code == 2 and "written by another configuration of sw" in plain.output, plain.output
    assert len((out / "samples_xcopa.jsonl").read_text().splitlines()) == 3


def test_a_template_that_writes_bos_gets_no_second_one():
    """lm-eval's has_bos_prefix rule: a context starting with BOS (Gemma's template writes
    `{{ bos_token }}`) is scored and generated after that one BOS, not two."""
    from babeleval.engine.tokenize import split_pairs
    from babeleval.loading.tokenizer import ByteTokenizer, Special

    tok = ByteTokenizer(Special(bos_id=0, eos_id=0, pad_id=0, add_bos=True))  # byte 0 is BOS
    (with_bos, _), (plain, cont) = split_pairs(tok, [("\x00ab", " c"), ("ab", " c")])
    assert with_bos == plain == [0, 97, 98] and cont == [32, 99]
    assert ByteTokenizer(Special(0, 0, 0, add_bos=False)).with_prefix([0, 97]) == [0, 97]


def chatted_task(tmp_path, chat: str):
    from babeleval.tasks.files import load_task_file

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": str(i), "q": f"swali {i}", "a": f"jibu {i}"}) + "\n" for i in range(3)))
    task = tmp_path / "gen.yaml"
    task.write_text(f"name: gen\nkind: generation\ndata: {{path: {rows}}}\nprompt: 'Q: {{{{ q }}}}'\ntarget: a\n"
                    f"fewshot: {{n: 2, split: test, header: 'H. '}}\nchat: {chat}\n")
    return load_task_file(task)


def test_conversation_turns_header_and_single_turn(tmp_path):
    """The demonstrations as user/assistant turns (the header opens the first), or all in one
    user turn as the plain prompt; the system turn first; the generation prompt last."""
    from babeleval.tasks.chat_prompts import resolve_chat
    from babeleval.tasks.documents import load_documents, load_shots
    from babeleval.tasks.generation import Generation

    (tmp_path / "t.jinja").write_text("{% for m in messages %}[{{ m.role }}|{{ m.content }}]{% endfor %}"
                                      "{% if add_generation_prompt %}[assistant|{% endif %}")

    def first_prompt(chat):
        variant = resolve_chat(chatted_task(tmp_path, chat), None).variants[0]
        return Generation(variant).prepare(load_documents(variant, None), load_shots(variant, None))[0].context

    assert first_prompt("{template: t.jinja, system: S}") == (
        "[system|S][user|H. Q: swali 1][assistant|jibu 1][user|Q: swali 2][assistant|jibu 2][user|Q: swali 0][assistant|")
    assert first_prompt("{template: t.jinja, fewshot_as_multiturn: false}") == (
        "[user|H. Q: swali 1 jibu 1\n\nQ: swali 2 jibu 2\n\nQ: swali 0][assistant|")
    with pytest.raises(BabelevalError, match=r"unknown field 'sytem' in chat \(did you mean system\?\)"):
        chatted_task(tmp_path, "{sytem: S}")


@pytest.mark.full
def test_model_without_a_template_and_system_alone(tmp_path):
    """--chat-template model on the Gemma 3 GGUF is one clear error; --system alone means the
    model's own template."""
    from babeleval.cli.main import _chat_overrides
    from babeleval.tasks.chat_prompts import resolve_chat

    with pytest.raises(BabelevalError, match=r"^gemma3-270m: the model carries no chat template"):
        resolve_chat(chatted_task(tmp_path, "{template: model}"), "gemma3-270m")
    assert _chat_overrides(None, "S") == {"chat": {"system": "S"}}
    assert chatted_task(tmp_path, "{system: S}").variants[0].chat.template == "model"


MULTILINE = """{{ bos_token }}
{% for message in messages %}
    {% if message['role'] == 'system' %}
<<SYS>>{{ message['content'] | trim }}<</SYS>>
    {% elif message['role'] == 'assistant' %}
        {% generation %}{{ message['content'] }}{{ eos_token }}{% endgeneration %}
    {% else %}
[{{ message['role'] | upper }}] {{ message | tojson }}
    {% endif %}
    {% if loop.index > 4 %}{% break %}{% endif %}
{% endfor %}
{% if add_generation_prompt %}
[ASSISTANT]
{% endif %}"""


def test_block_whitespace_generation_tags_and_loop_controls_as_transformers():
    """A template written over many indented lines (trim_blocks, lstrip_blocks), with
    `{% generation %}`, `{% break %}` and tojson: the same text as transformers' renderer."""
    from transformers.utils.chat_template_utils import render_jinja_template

    messages = conversations()["system+fewshot"]
    template = ChatTemplate(MULTILINE, bos_token="<s>", eos_token="</s>")
    for prompt in (True, False):
        expected = render_jinja_template([messages], chat_template=MULTILINE, add_generation_prompt=prompt,
                                         bos_token="<s>", eos_token="</s>")[0][0]
        assert template.render(messages, add_generation_prompt=prompt) == expected
    assert "\n    " not in expected and expected.count("[USER] {") == 2 and expected.count("</s>") == 2  # {% break %} after five


@pytest.mark.full
def test_lm_eval_task_with_the_models_template(monkeypatch, shared_data):
    """`lm-eval:` tasks under --chat-template / --system: lm-eval builds the turns (system
    instruction, 5 demonstrations as turns) and our template renders them: the context equals
    lm-eval's own with HFLM's apply_chat_template (transformers) on SmolLM2."""
    from babeleval.tasks.chat_prompts import resolve_chat
    from babeleval.lm_eval.tasks import load_lm_eval_task, prepare_lm_eval

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)  # the fixture names its data as ../shared/data
    spec = str(root / "tests" / "fixtures" / "lm_eval_tasks" / "sib200_milu_5shot.yaml")
    system = "Jibu kwa herufi moja."
    task = resolve_chat(load_lm_eval_task(spec, {"chat": {"system": system}}), "smollm2-135m")
    plain = load_lm_eval_task(spec, {})
    assert task.variants[0].signature != plain.variants[0].signature
    ((variant, _, items),) = prepare_lm_eval(task, limit=2)
    tokenizer = hf_tokenizer("smollm2-135m")
    render = lambda messages, add_generation_prompt=True: tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=add_generation_prompt, continue_final_message=not add_generation_prompt)
    lm_task = variant.lm_task
    for item in items:
        expected = lm_task.fewshot_context(item.doc, num_fewshot=5, system_instruction=system, apply_chat_template=True,
                                           fewshot_as_multiturn=True, chat_template=render)
        assert item.instances[0].args[0] == expected
        assert expected.startswith(f"<|im_start|>system\n{system}") and expected.count("<|im_start|>assistant\n") == 6
