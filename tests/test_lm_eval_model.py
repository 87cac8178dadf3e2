"""BabelevalLM (babeleval as an lm-eval model) on a random byte-level model, cheaply: lm-eval's
loglikelihood requests give lm-eval's definition computed here from the model's logits (the
context's tokens, the continuation's as the rest of the whole string's, their log-softmax
summed, greedy where every one is the arg-max), generate_until stops at its `until` string
and at max_gen_toks, loglikelihood_rolling scores every byte of a text. (Per-sample parity with
lm-eval's HF backend on real weights: test_lm_eval_backend, full tier.)"""
import math

import numpy as np
from scipy.special import log_softmax

from babeleval.engine.forward import decoder_logits
from babeleval.loading import load_model
from test_bad_input import byte_model

PAIRS = [("The day after Monday is", " Tuesday"), ("The day after Monday is", " Friday"), ("Habari ya", " asubuhi")]


def test_lm_eval_requests_equal_the_engines(tmp_path):
    from lm_eval.api.instance import Instance

    from babeleval.lm_eval import BabelevalLM

    model = load_model(str(byte_model(tmp_path / "model")))
    lm = BabelevalLM(model)
    got = lm.loglikelihood([Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(PAIRS)], disable_tqdm=True)
    for (context, continuation), (logprob, greedy) in zip(PAIRS, got):
        context_ids = lm.tok_encode(context)
        whole = lm.tok_encode(context + continuation)
        ids = np.asarray([whole])
        logits = np.asarray(decoder_logits(model.params, ids, np.ones_like(ids), model.config), np.float64)[0]
        logsoftmax = log_softmax(logits, axis=-1)
        targets = range(len(context_ids), len(whole))
        assert abs(logprob - sum(logsoftmax[t - 1, whole[t]] for t in targets)) < 1e-3
        assert greedy == all(logits[t - 1].argmax() == whole[t] for t in targets)
    text = "Monday, Tuesday, Wednesday"
    (rolling,) = lm.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, (text,), 0)], disable_tqdm=True)
    assert math.isfinite(rolling) and rolling < len(text) * -1e-3  # every byte scored, each costs something
    until = lm.generate_until([Instance("generate_until", {}, ("Monday", {"until": ["a"], "max_gen_toks": 40}), 0),
                               Instance("generate_until", {}, ("Monday", {"until": ["\x01"], "max_gen_toks": 3}), 1)],
                              disable_tqdm=True)
    assert "a" not in until[0] and len(until[1].encode("utf-8")) <= 3


def test_lm_eval_command_quantizes_at_load_and_records_it(tmp_path, monkeypatch):
    """`babeleval lm-eval --quantize int4`: the model is loaded so, and lm-eval's results file names
    it (model_args, and config.model_quantization as run's results.json)."""
    import functools
    import json
    from pathlib import Path

    import lm_eval.tasks
    from click.testing import CliRunner

    from babeleval.cli.main import cli

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)  # the task file's data paths are relative to the repository root
    monkeypatch.setattr(lm_eval.tasks, "TaskManager", functools.partial(lm_eval.tasks.TaskManager, include_defaults=False))
    result = CliRunner().invoke(cli, ["lm-eval", "--model", str(byte_model(tmp_path / "model")), "--tasks",
                                      str(root / "tests/fixtures/lm_eval_run/xcopa_sw_local.yaml"), "--limit", "2",
                                      "--quantize", "int4", "--output_path", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    (path,) = (tmp_path / "out").glob("*/results_*.json")
    config = json.loads(path.read_text())["config"]
    assert config["model_args"].endswith(",quantize=int4")
    held = config["model_quantization"]
    assert held["method"] == "int4" and held["types"]["int4"]["block_size"] == [32, 128]  # hidden 32, MLP 128 wide
