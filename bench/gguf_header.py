"""Reading a GGUF file's header (metadata + tensor table): babeleval's one-pass reader vs the gguf
package's GGUFReader, same file, same run, best of 3 each; then a whole `load_model` of it.

python bench/gguf_header.py [alias ...]   (default: smollm2-135m gemma3-270m)
"""
import sys
import time

import gguf

from babeleval.loading import load_model, resolve
from babeleval.loading.gguf_reader import GGUFFile


def best(read, path, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        read(path)
        times.append(time.perf_counter() - start)
    return min(times)


def main(aliases: list[str]) -> None:
    for alias in aliases:
        path = str(resolve(alias))
        ours = best(GGUFFile, path)
        theirs = best(gguf.GGUFReader, path)
        tokens = len(GGUFFile(path).metadata.get("tokenizer.ggml.tokens", []))
        start = time.perf_counter()
        load_model(alias)
        loaded = time.perf_counter() - start
        print(f"{alias} ({tokens:,} tokens): babeleval {ours:.3f}s, gguf.GGUFReader {theirs:.3f}s, "
              f"{theirs / ours:.1f}x; load_model {loaded:.2f}s")


if __name__ == "__main__":
    main(sys.argv[1:] or ["smollm2-135m", "gemma3-270m"])
