"""Shared-prefix ablation: the same 5-shot SIB-200 (MILU prompt) requests scored with and
without the prefix cache, same process, first call (compiles) then steady state; prints the
stats and the largest log-prob difference. python bench/prefix_ablation.py"""
import time, numpy as np
from pathlib import Path
from babeleval import engine
from babeleval.engine.scoring import Scorer
from babeleval.loading import load_model
from babeleval.evaluate import prepare_task
from babeleval.tasks.files import find_task
units = prepare_task(find_task("sib200-milu:eng_Latn,hin_Deva"), Path(__file__).resolve().parents[2] / 'shared' / 'data', limit=6)
reqs = [r for u in units for r in u.kind.requests(u.items)]
m = load_model("smollm2-135m")
for share in (True, False):
    s = Scorer(m, share_prefixes=share); t=time.time(); res = s.loglikelihood(reqs); t1=time.time()-t
    t=time.time(); res = s.loglikelihood(reqs); t2=time.time()-t
    print(share, f"{t1:.1f}s {t2:.1f}s", s.stats)
    if share: a = np.array([r.logprob for r in res])
    else: b = np.array([r.logprob for r in res])
print(len(reqs), np.abs(a-b).max(), np.abs((a-b)/b).max())
