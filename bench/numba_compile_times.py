"""First-call time of each numba metric kernel: cold (empty NUMBA_CACHE_DIR, so numba
compiles) and warm (second process, the cache=True files are loaded), each in a fresh
Python process.

python bench/numba_compile_times.py
"""
import json
import os
import subprocess
import sys
import tempfile

FIRST_CALLS = {
    "chrF++": "from babeleval.metrics.chrf import CHRF; CHRF(word_order=2).corpus_score(['a b'], [['a c']])",
    "SQuAD": "from babeleval.metrics.squad import SQuAD; SQuAD().corpus_score(['the a'], [['a']])",
    "ROUGE-L": "from babeleval.metrics.rouge import rouge_l_corpus; rouge_l_corpus(['a b'], [['a c']])",
    "fertility": ("from babeleval.fertility.segment import segment; from babeleval.kernels.fertility import "
                  "group_counts; import numpy as np; w = segment(['a b', 'ภาษาไทย']); w.distinct(); "
                  "group_counts(np.ones(2, np.int64), np.zeros(2, np.int64), np.zeros(2, np.int64), 1)"),
}
PROGRAM = "import time; t = time.perf_counter(); {call}; print(time.perf_counter() - t)"


def first_call(call: str, cache: str) -> float:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", PROGRAM.format(call=call)], env=env, capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main():
    report = {}
    for name, call in FIRST_CALLS.items():
        with tempfile.TemporaryDirectory() as cache:
            cold = first_call(call, cache)
            warm = first_call(call, cache)
        report[name] = {"cold_s": round(cold, 2), "warm_s": round(warm, 2)}
        print(f"{name}: first call {cold:.2f} s compiling, {warm:.2f} s from the numba cache")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
