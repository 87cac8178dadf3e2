"""Shared prefixes (engine/prefix.py): found at token level, computed once, and the rows that
continue them give the log-likelihoods of the uncached path (5-shot SIB-200 with the MILU
prompt, real data, a random decoder shaped as SmolLM2 with its tokenizer: the demonstrations are
most of every context)."""
from pathlib import Path

import numpy as np
import pytest

from babeleval.engine.prefix import shared_prefixes


def test_shared_prefixes_by_hand():
    demos = list(range(300))
    contexts = [demos + [1000 + i, 5, 6] for i in range(4)] + [[7] * 10, list(range(500, 700))]
    assert shared_prefixes(contexts) == {0: 288, 1: 288, 2: 288, 3: 288}  # 300 rounded down to 16s
    assert shared_prefixes(contexts + [demos[:200] + [9] * 50]) == {i: 192 for i in (0, 1, 2, 3, 6)}
    assert shared_prefixes([demos + [1], demos + [2]], min_prefix=400) == {}
    assert shared_prefixes([demos[:128], demos[:128]]) == {}  # each context keeps one token of its own: 127 < 128
    assert shared_prefixes([demos[:129], demos[:200]]) == {0: 128, 1: 128}
    # a question's options repeat its whole context: identical contexts are not a shared prefix
    # (one group per question would score every question in a batch of its own)
    long_questions = [list(range(q * 1000, q * 1000 + 300)) for q in range(3)]
    assert shared_prefixes([c for c in long_questions for _ in range(7)]) == {}
    with_demos = [demos + c for c in long_questions for _ in range(7)]
    assert shared_prefixes(with_demos) == {i: 288 for i in range(21)}


@pytest.mark.full
def test_cached_prefix_gives_the_uncached_loglikelihoods(shared_data, tiny_smollm2):
    from babeleval.engine.scoring import Scorer
    from babeleval.evaluate import prepare_task
    from babeleval.tasks.files import find_task
    from real_models import ours

    units = prepare_task(find_task("sib200-milu:eng_Latn"), Path(shared_data), limit=3)
    requests = [r for u in units for r in u.kind.requests(u.items)]
    model = ours(str(tiny_smollm2))
    cached, plain = Scorer(model), Scorer(model, share_prefixes=False)
    a = np.array([r.logprob for r in cached.loglikelihood(requests)])
    b = np.array([r.logprob for r in plain.loglikelihood(requests)])
    assert np.abs(a - b).max() <= max(1e-3, 5e-5 * np.abs(b).max())
    s = cached.stats
    assert s.prefixes == 1 and s.prefix_tokens >= 384  # the five English demonstrations
    assert s.tokens_alone == plain.stats.tokens_alone
    assert s.tokens_alone == s.tokens_computed - s.prefix_tokens + s.prefix_tokens_reused + s.tokens_shared
    assert plain.stats.tokens_alone == plain.stats.tokens_computed + plain.stats.tokens_shared
    assert plain.stats.tokens_shared >= 384  # without the cache, rows of two questions still share their demonstrations
    assert s.tokens_computed < plain.stats.tokens_computed
