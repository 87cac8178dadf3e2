"""BabelevalLM equals lm-eval's own HF backend (HFLM) on the same lm-eval task files and the
same SmolLM2-135M-Instruct weights (the GGUF, dequantised by transformers for HFLM): per-sample
log-likelihoods within max(1e-3, 5e-5 |logp|), acc / acc_norm per sample, generations
character for character, perplexity windows, chat-templated prompts. Each backend runs every
task once per module (lm-eval's simple_evaluate, limits per task through `samples`)."""
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.full

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "tests" / "fixtures" / "lm_eval_tasks"
DOCS = {"xcopa_sw_local": 16, "nusax_xnli_style": 10, "sib200_milu_5shot_swh": 6}
GENERATIONS = 6  # the 6th starts with a newline (cut to ""), the 4th stops inside a character (U+FFFD kept)
ROLLING_DOCS, ROLLING_MAX_LENGTH = 3, 256  # short windows: every paragraph spans several
CHAT_DOCS = 3
CHAT = dict(apply_chat_template=True, fewshot_as_multiturn=True, num_fewshot=2,
            system_instruction="Jibu kwa Kiswahili.")


def tolerance(logp):
    return max(1e-3, 5e-5 * abs(logp))


def hf_tokenizer():
    import transformers

    from babeleval.loading import resolve

    path = resolve("smollm2-135m")
    return transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


def evaluate(lm, tasks: dict, **kwargs):
    import lm_eval
    from lm_eval.tasks import TaskManager

    out = lm_eval.simple_evaluate(model=lm, tasks=list(tasks), samples={t: list(range(n)) for t, n in tasks.items()},
                                  task_manager=TaskManager(include_path=str(TASKS)), log_samples=True, **kwargs)
    return {t: sorted(s, key=lambda s: s["doc_id"]) for t, s in out["samples"].items()}


@pytest.fixture(scope="module")
def backends(shared_data):
    from lm_eval.models.huggingface import HFLM
    from real_models import ours, reference

    from babeleval.lm_eval import BabelevalLM

    return {"ours": lambda **kw: BabelevalLM(ours("smollm2-135m"), **kw),
            "hf": lambda **kw: HFLM(pretrained=reference("smollm2-135m"), tokenizer=hf_tokenizer(), batch_size=4,
                                    device="cpu", **kw)}


def both(backends, tasks: dict, model_args: dict | None = None, **kwargs) -> dict:
    """The tasks through both backends (data_files are relative to the repository root)."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        return {name: evaluate(make(**(model_args or {})), tasks, **kwargs) for name, make in backends.items()}
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="module")
def runs(backends):
    return both(backends, DOCS)


@pytest.fixture(scope="module")
def generations(backends):
    return both(backends, {"xquad_hi_gen": GENERATIONS})


@pytest.fixture(scope="module")
def rolling(backends):
    return both(backends, {"xquad_hi_rolling": ROLLING_DOCS}, {"max_length": ROLLING_MAX_LENGTH})


@pytest.fixture(scope="module")
def chat(backends):
    return both(backends, {"xcopa_sw_local": CHAT_DOCS}, **CHAT)


def loglikelihoods(samples):
    return [[r[0][0] for r in s["resps"]] for s in samples]


def assert_same_scores(ours, hf, documents):
    assert [s["doc_id"] for s in ours] == [s["doc_id"] for s in hf] == list(range(documents))
    assert [s["arguments"] for s in ours] == [s["arguments"] for s in hf]
    for got, want in zip(loglikelihoods(ours), loglikelihoods(hf)):
        assert all(abs(g - w) <= tolerance(w) for g, w in zip(got, want)), (got, want)
    assert [s["acc"] for s in ours] == [s["acc"] for s in hf]
    assert [s["acc_norm"] for s in ours] == [s["acc_norm"] for s in hf]


@pytest.mark.parametrize("task", ["xcopa_sw_local", "nusax_xnli_style", "sib200_milu_5shot_swh"])
def test_loglikelihoods_acc_and_acc_norm_equal_hflm(runs, task):
    assert_same_scores(runs["ours"][task], runs["hf"][task], DOCS[task])


def test_xnli_style_options_are_scored_after_the_prefix_token_alone(runs):
    """Empty doc_to_text: lm-eval asks for ("", whole sentence); the tolerance above would not
    hide a missing BOS (the first token's log-prob alone is several nats)."""
    sample = runs["ours"]["nusax_xnli_style"][0]
    assert [context for context, _ in sample["arguments"]] == ["", "", ""]


def test_generations_identical(generations):
    ours, hf = generations["ours"]["xquad_hi_gen"], generations["hf"]["xquad_hi_gen"]
    assert [s["resps"] for s in ours] == [s["resps"] for s in hf]
    texts = [s["resps"][0][0] for s in hf]
    assert sum(bool(t.strip()) for t in texts) >= len(texts) // 2  # real text, not empty strings
    assert "" in texts and any(t.endswith("\ufffd") for t in texts)  # both cuts happen in these documents


def test_babeleval_run_writes_hflms_generations(generations, tmp_path):
    """`babeleval run --task lm-eval:...` answers generate_until by the backend's rules
    (LmEvalGenerate -> ExactGenerator): the records equal HFLM's texts, both cuts included
    (the plain Generator drops the U+FFFD of a length cut inside a character)."""
    import json

    from real_models import ours

    from babeleval.evaluate import evaluate

    cwd = os.getcwd()
    os.chdir(ROOT)  # the task file's data_files are relative to the repository root
    try:
        evaluate(ours("smollm2-135m"), [f"lm-eval:{TASKS / 'xquad_hi_gen.yaml'}"], tmp_path, limit=GENERATIONS,
                 progress=False, compile_cache=False)
    finally:
        os.chdir(cwd)
    lines = (tmp_path / "samples_lm-eval-xquad_hi_gen.jsonl").read_text().splitlines()
    records = sorted(map(json.loads, lines), key=lambda r: int(r["id"]))
    assert [r["generation"] for r in records] == [s["resps"][0][0] for s in generations["hf"]["xquad_hi_gen"]]


def test_rolling_windows_match(rolling):
    """Perplexity over XQuAD-hi paragraphs in 256-token windows (lm-eval's own windows)."""
    from lm_eval.utils import get_rolling_token_windows

    ours, hf = rolling["ours"]["xquad_hi_rolling"], rolling["hf"]["xquad_hi_rolling"]
    tok = hf_tokenizer()
    windows = [len(list(get_rolling_token_windows(tok.encode(s["target"]), 1, ROLLING_MAX_LENGTH, 1))) for s in hf]
    assert min(windows) >= 2
    for got, want in zip(ours, hf):
        assert abs(got["resps"][0][0] - want["resps"][0][0]) <= tolerance(want["resps"][0][0])


def test_chat_prompts_equal_transformers(chat):
    """--apply_chat_template --fewshot_as_multiturn --system_instruction: the prompts lm-eval
    built through BabelevalLM.apply_chat_template equal HFLM's (transformers' rendering), and
    so do the scores."""
    assert_same_scores(chat["ours"]["xcopa_sw_local"], chat["hf"]["xcopa_sw_local"], CHAT_DOCS)
    first = chat["ours"]["xcopa_sw_local"][0]["arguments"][0][0]
    assert first.startswith("<|im_start|>system\nJibu kwa Kiswahili.<|im_end|>\n")
    assert first.count("<|im_start|>user") == 3 and first.endswith("<|im_start|>assistant\n")


def test_apply_chat_template_equals_transformers(backends):
    from real_models import ours

    from babeleval.lm_eval import BabelevalLM

    lm = BabelevalLM(ours("smollm2-135m"))
    chat = [{"role": "system", "content": "Answer in Swahili."}, {"role": "user", "content": "Habari?"},
            {"role": "assistant", "content": "Nzuri."}, {"role": "user", "content": "Jina lako nani?"}]
    tok = hf_tokenizer()
    for prompt in (True, False):
        assert lm.apply_chat_template(chat, prompt) == tok.apply_chat_template(
            chat, tokenize=False, add_generation_prompt=prompt, continue_final_message=not prompt)
    assert lm.chat_template(True) == tok.chat_template


def test_sampling_is_refused(backends):
    from lm_eval.api.instance import Instance
    from real_models import ours

    from babeleval.errors import BabelevalError
    from babeleval.lm_eval import BabelevalLM

    lm = BabelevalLM(ours("smollm2-135m"))
    ask = Instance("generate_until", {}, ("Habari", {"until": ["\n"], "do_sample": True, "temperature": 0.7}), 0)
    with pytest.raises(BabelevalError, match="greedily"):
        lm.generate_until([ask])


def test_gemma_gets_bos_as_hf_tokenizer_adds_it(shared_data):
    """HFLM leaves BOS to the tokenizer: Gemma's adds it, once, also before a chat template's own <bos>."""
    import transformers
    from real_models import ours

    from babeleval.lm_eval import BabelevalLM
    from babeleval.loading import resolve

    path = resolve("gemma3-270m")
    tok = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    lm = BabelevalLM(ours("gemma3-270m"))
    for text in ("Habari ya asubuhi", "<bos><start_of_turn>user\nHabari<end_of_turn>\n"):
        want = tok(text).input_ids if not text.startswith("<bos>") else tok(text, add_special_tokens=False).input_ids
        assert lm.tok_encode(text) == want
        assert lm.tok_encode(text)[:2] != [tok.bos_token_id] * 2
    assert lm.tok_encode("Habari")[0] == tok.bos_token_id


def test_cli_writes_lm_eval_files(shared_data, tmp_path, monkeypatch):
    import json

    from click.testing import CliRunner

    from babeleval.cli.main import cli

    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(cli, ["lm-eval", "--tasks", "xcopa_sw_local", "--include_path", str(TASKS), "--limit", "4",
                                      "--log_samples", "--output_path", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "|xcopa_sw_local|" in result.output and "tokens computed" in result.output
    (results,) = tmp_path.glob("*/results_*.json")
    (samples,) = tmp_path.glob("*/samples_xcopa_sw_local_*.jsonl")
    assert set(json.loads(results.read_text())["results"]["xcopa_sw_local"]) >= {"acc,none", "acc_norm,none"}
    assert len(samples.read_text().splitlines()) == 4
