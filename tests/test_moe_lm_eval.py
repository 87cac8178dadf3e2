"""`babeleval lm-eval`'s backend equals lm-eval's HF backend per sample on a random
mixture of experts (Qwen3-MoE: 8 experts, top-2, 2 layers, SmolLM2's tokenizer) saved as an HF
folder: 0-shot XCOPA-sw and 5-shot SIB-200 (MILU's prompt), log-likelihoods within
max(1e-3, 5e-5 |logp|), acc and acc_norm per sample."""
import pytest

from lm_eval_samples import ROOT, samples
from tiny_models import build_with_real_tokenizer

pytestmark = pytest.mark.full
TASKS = {"xcopa_sw_local": 12, "sib200_milu_5shot_swh": 6}


def logprob(response) -> float:
    """One request's log-likelihood from a sample's resps entry ([(logprob, is_greedy)])."""
    return float(response[0][0] if isinstance(response[0], (list, tuple)) else response[0])


def test_moe_per_sample_equals_lm_eval_hf(tmp_path, shared_data, monkeypatch):
    from lm_eval.models.huggingface import HFLM

    from babeleval.lm_eval import BabelevalLM
    from babeleval.loading import load_model

    build_with_real_tokenizer("qwen3_moe", tmp_path / "moe", num_hidden_layers=2)
    monkeypatch.chdir(ROOT)  # the task files' data_files are relative to the repository root
    ours = samples(BabelevalLM(load_model(str(tmp_path / "moe"))), TASKS)
    theirs = samples(HFLM(pretrained=str(tmp_path / "moe"), batch_size=4, device="cpu", dtype="float32"), TASKS)
    for task, count in TASKS.items():
        assert len(ours[task]) == len(theirs[task]) == count
        for a, b in zip(ours[task], theirs[task]):
            got, want = [logprob(r) for r in a["resps"]], [logprob(r) for r in b["resps"]]
            assert all(abs(x - y) <= max(1e-3, 5e-5 * abs(y)) for x, y in zip(got, want, strict=True)), (task, got, want)
            assert a["acc"] == b["acc"] and a["acc_norm"] == b["acc_norm"], (task, a["doc_id"])
