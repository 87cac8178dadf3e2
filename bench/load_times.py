"""Import (GGUF dequantisation + renaming) vs restore (orbax) of the same model, same run.

python bench/load_times.py [alias]
"""
import sys
import tempfile
import time

from babeleval.loading import load_model


def main(alias: str = "smollm2-135m") -> None:
    start = time.time()
    model = load_model(alias)
    imported = time.time() - start
    with tempfile.TemporaryDirectory() as tmp:
        model.save(f"{tmp}/ckpt")
        start = time.time()
        load_model(f"{tmp}/ckpt")
        restored = time.time() - start
    print(f"{alias}: import {imported:.2f}s, orbax restore {restored:.2f}s, {imported / restored:.1f}x faster")


if __name__ == "__main__":
    main(*sys.argv[1:])
