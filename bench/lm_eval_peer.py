"""lm-evaluation-harness's HF backend (HFLM) as a bench peer: the same transformers model
(SmolLM2-135M GGUF dequantised, fp32) and the same tokenizer, answering the same
(context, continuation) requests through HFLM.loglikelihood, batch size 8."""
from __future__ import annotations


def lm_eval_model(model, hf_model, batch_size: int = 8):
    from lm_eval.models.huggingface import HFLM
    from transformers import PreTrainedTokenizerFast

    tok = model.tokenizer
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok.backend)
    hf_tok.eos_token = hf_tok.convert_ids_to_tokens(tok.eos_id)
    hf_tok.pad_token = hf_tok.eos_token
    return HFLM(pretrained=hf_model, tokenizer=hf_tok, batch_size=batch_size, device="cpu")


def lm_eval_loglikelihood(lm, requests):
    from lm_eval.api.instance import Instance

    instances = [Instance("loglikelihood", {}, (r.context, r.continuation), i) for i, r in enumerate(requests)]
    return [logprob for logprob, _ in lm.loglikelihood(instances, disable_tqdm=True)]
