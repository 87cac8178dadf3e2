"""Regenerate smollm2_golden.json: transformers + torch's per-token log-probs of SmolLM2-135M
(the packaged GGUF, dequantised by transformers) on four prompts in four scripts.

    python tests/reference/make_smollm2_golden.py

The default test tier compares babeleval against this file (tests/test_golden.py); the full
tier compares against transformers live (tests/test_parity_real.py)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

PROMPTS = ["The capital of France is", "Habari ya asubuhi, rafiki yangu", "नमस्ते, आप कैसे हैं?",
           "1, 2, 3, 4, 5,"]
ALIAS = "smollm2-135m"


def main() -> None:
    import torch
    import transformers

    from babeleval.loading import load_model, resolve

    path = resolve(ALIAS)
    model = transformers.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    tokenizer = load_model(ALIAS).tokenizer  # babeleval's ids (tokenizer parity: tests/test_tokenize*)
    rows = []
    for prompt in PROMPTS:
        ids = tokenizer.prefix + tokenizer.encode_batch([prompt])[0]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0].double()
        logprobs = torch.log_softmax(logits, -1)
        rows.append({"prompt": prompt, "ids": ids,
                     "logprobs": [round(float(logprobs[i, ids[i + 1]]), 6) for i in range(len(ids) - 1)],
                     "argmax": [int(i) for i in logits.argmax(-1)]})
    out = Path(__file__).with_name("smollm2_golden.json")
    out.write_text(json.dumps({"model": ALIAS, "transformers": transformers.__version__, "torch": torch.__version__,
                               "rows": rows}, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {out} ({sum(len(r['logprobs']) for r in rows)} log-probs, mean {np.mean([x for r in rows for x in r['logprobs']]):.4f})")


if __name__ == "__main__":
    main()
