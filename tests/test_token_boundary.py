"""Where babeleval's own tasks cut a log-likelihood request into context and continuation
tokens (engine/tokenize.py: split_pairs) against lm-eval's own code (TemplateLM.loglikelihood
and _encode_pair, lm_eval 0.4.x) on SmolLM2's tokenizer: contexts ending in a newline, two, a
tab, a space and a newline, ProverbEval fill-blank's "Answer:   \\n" + 13 spaces, a space, and
no whitespace at all; in four scripts; and the empty context. lm-eval moves ALL the trailing
whitespace of a context (str.rstrip()) to its continuation, not only spaces (issue 50)."""
from lm_eval.api.instance import Instance
from lm_eval.api.model import TemplateLM

from babeleval.engine.tokenize import split_pairs
from real_models import ours

CONTEXTS = ["Question: 2+2 =\n", "Jibu:\n\n", "उत्तर:\t", "Answer: \n", "Answer:   \n             ",
            "Question: 2+2 = ", "Answer:", "መልስ፦\n", "Text: x\r\n", ""]
CONTINUATIONS = [" A", "A", " 4", "negative", " ሀ", "\nB"]


class Encoder(TemplateLM):
    """lm-eval's encoding path as HFLM runs it for a causal model, over babeleval's tokenizer:
    tok_encode is HFLM's for SmolLM2 (its tokenizer adds no BOS: asserted below), the prefix
    token of an empty context BOS else EOS, and _loglikelihood_tokens hands back the tokens."""

    def __init__(self, tok):
        super().__init__()
        self.tok = tok

    @property
    def eot_token_id(self):
        return self.tok.eos_id

    @property
    def prefix_token_id(self):
        return self.tok.bos_id if self.tok.bos_id is not None else self.tok.eos_id

    def tok_encode(self, string, add_special_tokens=None, **kwargs):
        return self.tok.encode(string)

    def _loglikelihood_tokens(self, requests, **kwargs):
        return [(context, continuation) for _, context, continuation in requests]

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        raise NotImplementedError

    def generate_until(self, requests, disable_tqdm=False):
        raise NotImplementedError


def test_split_equals_lm_eval_encode_pair():
    tok = ours("smollm2-135m").tokenizer
    assert tok.prefix == [] and tok.encode_batch(["Answer:\n A"], special_tokens=True)[0] == tok.encode("Answer:\n A")
    pairs = [(c, k) for c in CONTEXTS for k in CONTINUATIONS]
    reference = Encoder(tok).loglikelihood([Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)],
                                           disable_tqdm=True)
    ours_ = split_pairs(tok, pairs)
    wrong = [(pair, got, want) for pair, got, want in zip(pairs, ours_, reference) if tuple(got) != tuple(want)]
    assert not wrong, f"{len(wrong)} of {len(pairs)} pairs split otherwise than lm-eval's; first: {wrong[:3]}"


def test_a_changed_boundary_is_a_new_signature(tmp_path):
    """ProverbEval fill-blank's contexts end in "\\n" + 13 spaces: version 2 scores them as lm-eval
    does, and the version (from 2 on) is in every record's signature, so a samples file of
    version 1 is refused, not resumed into."""
    import dataclasses

    from babeleval.tasks.files import find_task, load_task_file

    builtin = find_task("proverbeval-fill-blank")
    old = tmp_path / "fill-blank-v1.yaml"
    old.write_text(f"include: {builtin.where}\nversion: 1\n", encoding="utf-8")
    v2, v1 = builtin.variants[0], load_task_file(old).variants[0]
    assert (v2.version, v1.version, find_task("proverbeval-fill-blank-5shot").version) == ("2", "1", "2")
    assert v1.signature != v2.signature and v1.signature == dataclasses.replace(v2, version="1").signature
