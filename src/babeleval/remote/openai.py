"""An OpenAI-compatible HTTP model for Generate requests: chat or completions endpoints,
greedy (temperature 0), several requests in flight, retries with exponential backoff on
timeouts, 429s and 5xx (Retry-After honoured), a request-rate limit, and a response cache
on disk (JSONL keyed by a hash of the endpoint, model and request) so a rerun costs nothing.
The key comes from the environment (OPENAI_API_KEY unless told otherwise), never a file.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BabelevalError
from ..paths import cache_dir
from ..requests import Generate, GenerateResult, cut_at_stop

MODES = ("chat", "completions")
RETRY_STATUS = (408, 409, 429, 500, 502, 503, 504)


@dataclass
class RemoteStats:
    requests: int = 0
    from_cache: int = 0
    http_calls: int = 0
    retries: int = 0
    seconds: float = 0.0


@dataclass
class OpenAIModel:
    name: str
    base_url: str = "https://api.openai.com/v1"
    mode: str = "chat"
    key_env: str = "OPENAI_API_KEY"
    concurrency: int = 8
    requests_per_second: float | None = None
    timeout: float = 60.0
    retries: int = 5
    backoff: float = 1.0
    cache: Path | None = None
    stats: RemoteStats = field(default_factory=RemoteStats)
    remote = True  # the runner asks nothing else of it than generate_results

    def __post_init__(self):
        if self.mode not in MODES:
            raise BabelevalError(f"API mode {self.mode!r} is not one of {', '.join(MODES)}")
        self.base_url = self.base_url.rstrip("/")
        if self.cache is None:
            self.cache = cache_dir() / "http" / f"{hashlib.sha256(self.identity.encode()).hexdigest()[:16]}.jsonl"
        self._lock = threading.Lock()
        self._next_start = 0.0
        self._cached = self._read_cache()

    @property
    def identity(self) -> str:
        return f"{self.base_url}|{self.mode}|{self.name}"

    @property
    def source(self) -> str:
        return f"openai:{self.name}@{self.base_url} ({self.mode})"

    def _read_cache(self) -> dict[str, dict]:
        out = {}
        if self.cache.exists():
            for line in self.cache.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                    out[entry["key"]] = entry
                except (json.JSONDecodeError, KeyError):
                    continue  # a line cut by a kill: asked again
        return out

    def _key(self, request: Generate) -> str:
        blob = json.dumps([self.identity, request.context, list(request.stop), request.max_new_tokens], ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def _body(self, request: Generate) -> dict:
        body = {"model": self.name, "temperature": 0, "max_tokens": request.max_new_tokens}
        if request.stop:
            body["stop"] = list(request.stop)[:4]  # the API takes at most four
        if self.mode == "chat":
            body["messages"] = [{"role": "user", "content": request.context}]
        else:
            body["prompt"] = request.context
        return body

    def _wait_for_rate(self) -> None:
        if not self.requests_per_second:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next_start)
            self._next_start = start + 1.0 / self.requests_per_second
        time.sleep(max(0.0, start - now))

    def _post(self, body: dict) -> dict:
        url = f"{self.base_url}/{'chat/completions' if self.mode == 'chat' else 'completions'}"
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(body).encode("utf-8")
        for attempt in range(self.retries + 1):
            self._wait_for_rate()
            wait = self.backoff * 2 ** attempt
            try:
                with self._lock:
                    self.stats.http_calls += 1
                with urllib.request.urlopen(urllib.request.Request(url, data, headers), timeout=self.timeout) as reply:
                    return json.loads(reply.read().decode("utf-8"))
            except urllib.error.HTTPError as exc:
                if exc.code not in RETRY_STATUS or attempt == self.retries:
                    detail = exc.read().decode("utf-8", "replace")[:200]
                    raise BabelevalError(f"{url}: HTTP {exc.code} ({detail or exc.reason})") from None
                after = exc.headers.get("Retry-After")
                wait = float(after) if after and after.replace(".", "", 1).isdigit() else wait
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                if attempt == self.retries:
                    raise BabelevalError(f"{url}: no answer after {self.retries + 1} tries ({exc})") from None
            with self._lock:
                self.stats.retries += 1
            time.sleep(wait)
        raise AssertionError("unreachable")

    def _answer(self, request: Generate) -> dict:
        reply = self._post(self._body(request))
        try:
            choice = reply["choices"][0]
            text = choice["message"]["content"] if self.mode == "chat" else choice["text"]
        except (KeyError, IndexError, TypeError):
            raise BabelevalError(f"{self.base_url}: unexpected reply {json.dumps(reply)[:200]}") from None
        return {"text": text or "", "finish_reason": choice.get("finish_reason"),
                "tokens": (reply.get("usage") or {}).get("completion_tokens", 0)}

    def _one(self, request: Generate) -> GenerateResult:
        key = self._key(request)
        entry = self._cached.get(key)
        if entry is None:
            entry = {"key": key, **self._answer(request)}
            with self._lock:
                self._cached[key] = entry
                self.cache.parent.mkdir(parents=True, exist_ok=True)
                with self.cache.open("a", encoding="utf-8") as sink:
                    sink.write(json.dumps(entry, ensure_ascii=False) + "\n")
        else:
            with self._lock:
                self.stats.from_cache += 1
        text = cut_at_stop(entry["text"], request.stop)
        reason = "stop" if text != entry["text"] or entry["finish_reason"] == "stop" else "length"
        if request.max_new_chars is not None and len(text) > request.max_new_chars:
            text, reason = text[: request.max_new_chars], "length"
        return GenerateResult(text, reason, int(entry.get("tokens") or 0))

    def generate_results(self, requests: list[Generate], progress=None) -> list[GenerateResult]:
        start = time.time()
        with ThreadPoolExecutor(max_workers=max(1, self.concurrency)) as pool:
            out = []
            for result in pool.map(self._one, requests):
                out.append(result)
                if progress:
                    progress(1)
        self.stats.requests += len(requests)
        self.stats.seconds += time.time() - start
        return out
