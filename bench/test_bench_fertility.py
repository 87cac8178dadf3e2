"""Fertility audit overhead on 1M+ real words (SIB-200 24 languages, NusaX-MT 12, UDHR 109,
Tatoeba 28), same run:
- test_audit: the whole audit (segmentation, per-word counts, per-language sums, text-level
  tokens). It times the tokenizer's encode_batch calls inside it; the rest is the audit's own
  overhead, printed as a share of the tokenizer time.
- test_bare_batch_encode_of_the_words: the tokenizer's batch encode of every word, one word
  per item (what a per-word audit without de-duplication must at least do).

python -m pytest bench/test_bench_fertility.py --benchmark-only -s
"""
import time

import pytest

from babeleval.fertility import audit, load_audit_tokenizer
from babeleval.fertility.corpora import nusax_mt, sib200, udhr
from babeleval.fertility.segment import segment
from conftest import SHARED


@pytest.fixture(scope="module")
def corpus():
    languages = sorted(p.name for p in (SHARED / "sib200").iterdir() if p.is_dir())
    text = {f"sib:{k}": v for k, v in sib200(SHARED, languages).items()}
    text |= {f"nusax:{k}": v for k, v in nusax_mt(SHARED).items()}
    text |= {f"udhr:{k}": v for k, v in udhr().items()}
    for path in sorted((SHARED / "tatoeba").glob("tatoeba.*-eng.*")):
        lines = path.read_text(encoding="utf-8").splitlines()
        text[f"tatoeba:{path.name}"] = {str(i): line for i, line in enumerate(lines) if line.strip()}
    text["eng"] = text["udhr:eng"]
    return text


@pytest.fixture(scope="module")
def words(corpus):
    found = segment([t for units in corpus.values() for t in units.values()])
    assert len(found) >= 1_000_000
    return found.strings()


@pytest.mark.parametrize("name", ["gemma3", "mistral-tekken"])
def test_audit(benchmark, corpus, words, name):
    tokenizer = load_audit_tokenizer(name)
    encode_batch, inside = tokenizer.encode_batch, []

    def timed(texts, *args):
        start = time.perf_counter()
        out = encode_batch(texts, *args)
        inside.append(time.perf_counter() - start)
        return out

    tokenizer.encode_batch = timed

    def run():
        inside.clear()
        start = time.perf_counter()
        result = audit(tokenizer, corpus)
        return result, time.perf_counter() - start, sum(inside)

    result, total, tokenizer_time = benchmark.pedantic(run, rounds=3)
    overhead = (total - tokenizer_time) / tokenizer_time
    benchmark.extra_info.update(total_s=total, tokenizer_s=tokenizer_time, overhead=overhead)
    print(f"\n{name}: audit {total:.2f} s, of which tokenizer {tokenizer_time:.2f} s; own overhead {overhead:.1%}")
    assert sum(s["words"] for s in result["languages"].values()) == len(words)


@pytest.mark.parametrize("name", ["gemma3", "mistral-tekken"])
def test_bare_batch_encode_of_the_words(benchmark, words, name):
    tokenizer = load_audit_tokenizer(name)
    benchmark.pedantic(tokenizer.encode_batch, args=(words,), rounds=3)
