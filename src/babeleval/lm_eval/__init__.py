"""lm-evaluation-harness on babeleval's engines: `BabelevalLM` is an lm-eval model backend
(lm_eval.simple_evaluate(model=BabelevalLM(...), tasks=...)) and `babeleval lm-eval` its
command. lm-eval is an optional dependency (`pip install 'babeleval[lm-eval]'`); importing
this package does not import it (nor JAX) until BabelevalLM is asked for."""
from __future__ import annotations

from babeleval.errors import BabelevalError

INSTALL = "lm-eval backend needs lm_eval: pip install 'babeleval[lm-eval]'"


def require_lm_eval():
    """The lm_eval package, or one line saying what to install."""
    try:
        import lm_eval
    except ImportError as exc:
        raise BabelevalError(INSTALL) from exc
    return lm_eval


def __getattr__(name):
    if name == "BabelevalLM":
        require_lm_eval()
        from babeleval.lm_eval.model import BabelevalLM

        return BabelevalLM
    raise AttributeError(name)
