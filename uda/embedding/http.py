"""An embedder over HTTP: any server speaking OpenAI's embeddings wire format.

`POST {url}/embeddings` with `{"model": M, "input": [texts]}` answers
`{"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [floats]}],
"model": M, "usage": {"prompt_tokens": n, "total_tokens": n}}`. OpenAI's API speaks it, and so
do the local inference servers that copy it, `uda embed-server` among them (the packaged
model, served to several UDA processes). `data` is matched to the inputs by `index`, never by
position: the format does not promise the order.

- **Batches by a token budget.** Texts go in input order, a request at a time, each request
  holding at most `max_batch` inputs and about `batch_tokens` tokens. Tokens are estimated,
  not counted (the server's tokenizer is not known here): a quarter of the text's UTF-8 bytes,
  rounded up — about four characters a token in English, and never fewer tokens than a
  CJK text has characters divided by 1.3. A text over the budget on its own goes alone (the
  server truncates it, or refuses it with a 4xx that names it).
- **Retries.** A connection that fails, a request that times out (`timeout_s`), 408, 429 and
  5xx are tried again, up to `max_retries` times, after an exponential delay with full jitter
  (`uda.query.retries.Retries`), or after the server's `Retry-After` when it says longer; a
  server asking for more than a minute fails at once. Every other 4xx is the request's fault
  and fails at once. Either way the error is typed — `BackendUnavailableError` when the
  endpoint could not be reached in time, `ConnectorError` when it answered wrongly — and
  names the endpoint (never the key, the URL's credentials or its query string).
- **Vectors** are checked (one per input, numbers, finite, all of one length: the declared
  `dimension`, else the first answer's) and scaled to unit length, as the local runtimes give
  them: cosine similarity is then a dot product everywhere.
- **Fingerprint.** A declared one (`fingerprint`), else a digest of the model's name and the
  dimension. The URL is left out on purpose: vectors depend on the model, not on where it
  runs, so moving the server (another host, a port, a proxy) keeps every store and cache
  valid. A server that serves the packaged MiniLM may be declared so (`uda embed-server`
  prints the fingerprint to declare): stores embedded locally then stay valid
  (docs/adr/0029-openai-compatible-embedder.md).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from email.utils import parsedate_to_datetime
from typing import Any, cast

import httpx
import numpy as np

from uda.embedding.base import QueryCache, Vector, empty_vectors
from uda.errors import BackendUnavailableError, ConfigError, ConnectorError
from uda.query.retries import Retries

log = logging.getLogger(__name__)

MAX_INPUTS = 2048
"""OpenAI's limit of inputs per request, and so the largest `max_batch`."""
MAX_RETRY_AFTER_S = 60.0
"""A server asking to wait longer than this fails the call at once: better a clear error than
an ingest that hangs for an hour."""

_RETRIED_STATUSES = frozenset({408, 429})  # and every 5xx
_FINGERPRINT = re.compile(r"[A-Za-z0-9._-]{1,64}")  # it names a cache file


def estimated_tokens(text: str) -> int:
    """About how many tokens `text` is: a quarter of its UTF-8 bytes, rounded up, at least 1."""
    return max(1, -(-len(text.encode("utf-8", "surrogatepass")) // 4))


def token_batches(texts: Sequence[str], budget: int, max_batch: int) -> Iterator[range]:
    """Consecutive runs of `texts` of at most `max_batch` texts and `budget` estimated tokens.

    A text over the budget on its own is a run of one.
    """
    start, tokens = 0, 0
    for row, text in enumerate(texts):
        cost = estimated_tokens(text)
        if row > start and (tokens + cost > budget or row - start >= max_batch):
            yield range(start, row)
            start, tokens = row, 0
        tokens += cost
    if start < len(texts):
        yield range(start, len(texts))


def _display(url: str) -> str:
    """The URL as errors and logs show it: no credentials, no query string."""
    parsed = httpx.URL(url)
    port = f":{parsed.port}" if parsed.port is not None else ""
    return f"{parsed.scheme}://{parsed.host}{port}{parsed.path}"


class _Retryable(Exception):
    """One attempt failed in a way the next may not (internal: never leaves this module)."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class OpenAICompatibleEmbedder:
    """Vectors from an HTTP endpoint speaking OpenAI's embeddings API.

    Args:
        url: the API's base URL (`http://127.0.0.1:8081/v1`, `https://api.openai.com/v1`);
            requests go to `{url}/embeddings` (a URL already ending in `/embeddings` is used
            as it is).
        model: the model's name, as the server knows it (sent with every request).
        api_key: sent as `Authorization: Bearer <key>`; None sends none.
        dimension: the vectors' length, if known; else learned from the first answer (a
            one-text request when `dimension` is asked before anything was embedded).
        timeout_s: each request's timeout (connect, send, wait, read).
        max_retries: tries after the first, on a connection failure, a timeout, 408, 429
            or 5xx.
        batch_tokens: estimated tokens per request (`estimated_tokens`).
        max_batch: inputs per request (at most 2048, OpenAI's limit).
        fingerprint: names the model's vectors (see the module's docstring); derived from
            `model` and the dimension when not given.
        retries: the backoff between tries (its `attempts` is ignored: `max_retries` rules).
        cache_size: how many query vectors to keep in memory.
    """

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str | None = None,
        dimension: int | None = None,
        timeout_s: float = 30.0,
        max_retries: int = 3,
        batch_tokens: int = 8192,
        max_batch: int = 256,
        fingerprint: str | None = None,
        retries: Retries | None = None,
        cache_size: int = 4096,
    ) -> None:
        base = url.rstrip("/")
        self.endpoint = base if base.endswith("/embeddings") else f"{base}/embeddings"
        self.model = model
        self._where = _display(self.endpoint)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._dimension = dimension
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._batch_tokens = batch_tokens
        self._max_batch = min(max_batch, MAX_INPUTS)
        self._declared_fingerprint = fingerprint
        self._retries = retries or Retries(base_s=0.5, cap_s=8.0)
        self._queries = QueryCache(cache_size)
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> OpenAICompatibleEmbedder:
        """The embedder a profile's `[embedder]` table describes (validated first)."""
        checked = embedder_options(options)
        key_variable = checked.pop("api_key_env", None)
        api_key = os.environ.get(key_variable) if key_variable else None
        return cls(checked.pop("url"), checked.pop("model"), api_key=api_key, **checked)

    @property
    def dimension(self) -> int:
        """The vectors' length: declared, or learned from the first answer."""
        if self._dimension is None:
            self.embed_documents(["dimension probe"])
        assert self._dimension is not None  # noqa: S101 - set by the first answer
        return self._dimension

    @property
    def fingerprint(self) -> str:
        """The declared fingerprint, else a digest of the model's name and the dimension."""
        if self._declared_fingerprint is not None:
            return self._declared_fingerprint
        named = f"openai-compatible:{self.model}:{self.dimension}"
        return hashlib.sha256(named.encode()).hexdigest()[:16]

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        """Unit-length vectors of `texts`, one row each, a request per token batch."""
        if not texts:
            return empty_vectors()
        rows = [self._request([texts[i] for i in run]) for run in self._batches(texts)]
        return np.concatenate(rows).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> Vector:
        """The vector of one query, from memory when asked before."""
        return self._queries.get(text, lambda one: self.embed_documents([one])[0])

    def close(self) -> None:
        """Close the connections (a later call opens new ones)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _batches(self, texts: Sequence[str]) -> Iterator[range]:
        return token_batches(texts, self._batch_tokens, self._max_batch)

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                # One pooled client for every thread (httpx's Client may be shared).
                self._client = httpx.Client(timeout=self._timeout_s, headers=self._headers)
            return self._client

    def _request(self, batch: list[str]) -> Vector:
        """One batch's vectors, tried again after transient failures."""
        retry = 0
        while True:
            try:
                return self._attempt(batch)
            except _Retryable as failure:
                retry += 1
                attempts = f"{retry} attempt{'s' if retry > 1 else ''}"
                if retry > self._max_retries:
                    raise BackendUnavailableError(
                        self._name, f"{failure} (gave up after {attempts})"
                    ) from None
                asked = failure.retry_after or 0.0
                if asked > MAX_RETRY_AFTER_S:
                    raise BackendUnavailableError(
                        self._name,
                        f"{failure}; it asks to retry after {asked:.0f} s, more than "
                        f"{MAX_RETRY_AFTER_S:.0f} s: try again later",
                    ) from None
                delay = max(self._retries.delay(retry), asked)
                log.info("%s: %s; retry %d in %.0f ms", self._name, failure, retry, delay * 1000)
                time.sleep(delay)

    @property
    def _name(self) -> str:
        return f"embedder {self._where}"

    def _attempt(self, batch: list[str]) -> Vector:
        try:
            response = self._http().post(self.endpoint, json={"model": self.model, "input": batch})
        except httpx.TimeoutException:
            raise _Retryable(f"no answer within {self._timeout_s:g} s") from None
        except httpx.TransportError as exc:
            raise _Retryable(f"cannot reach it ({type(exc).__name__}: {exc})") from None
        status = response.status_code
        if status in _RETRIED_STATUSES or status >= 500:
            raise _Retryable(f"answered {status}", _retry_after(response.headers))
        if status != 200:
            raise ConnectorError(self._name, _refusal(response))
        try:
            payload = response.json()
        except ValueError:
            raise ConnectorError(
                self._name, f"answered 200 with a body that is not JSON: {_excerpt(response)}"
            ) from None
        return self._vectors(payload, len(batch))

    def _vectors(self, payload: Any, count: int) -> Vector:
        """The rows of an answer to `count` inputs, by index, checked and of unit length."""
        body = cast("dict[str, Any]", payload) if isinstance(payload, dict) else {}
        data = body.get("data")
        if not isinstance(data, list):
            raise self._malformed('it has no "data" list')
        items = cast("list[Any]", data)
        if len(items) != count:
            raise self._malformed(f"{len(items)} embeddings for {count} inputs")
        rows: list[Vector | None] = [None] * count
        for item in items:
            entry = cast("dict[str, Any]", item) if isinstance(item, dict) else {}
            index = entry.get("index")
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
                raise self._malformed(f"an entry's index is {index!r}, not 0 to {count - 1}")
            if rows[index] is not None:
                raise self._malformed(f"index {index} answered twice")
            rows[index] = self._row(entry.get("embedding"), index)
        return np.stack(cast("list[Vector]", rows))

    def _row(self, embedding: Any, index: int) -> Vector:
        try:
            vector = np.asarray(embedding, dtype=np.float32)
        except (TypeError, ValueError):
            raise self._malformed(f"embedding {index} is not a list of numbers") from None
        if vector.ndim != 1 or vector.size == 0:
            raise self._malformed(f"embedding {index} is not a list of numbers")
        with self._lock:
            if self._dimension is None:
                self._dimension = int(vector.size)
            expected = self._dimension
        if vector.size != expected:
            raise self._malformed(
                f"embedding {index} has {vector.size} dimensions, not {expected} "
                "(the `dimension` option, or the first answer's)"
            )
        norm = float(np.linalg.norm(vector))
        if not math.isfinite(norm) or norm == 0.0:
            raise self._malformed(f"embedding {index} is zero or not finite")
        return vector / norm

    def _malformed(self, what: str) -> ConnectorError:
        return ConnectorError(self._name, f"answered 200 with a malformed body: {what}")


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asks to wait: `retry-after-ms`, else `Retry-After` (seconds or date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _refusal(response: httpx.Response) -> str:
    """Why the server refused: its status and its own message (OpenAI's `error.message`)."""
    status = response.status_code
    hint = ""
    if status in {401, 403}:
        hint = "; check the key (`api_key_env` names the variable that holds it)"
    elif status == 404:
        hint = "; check `url` (the API's base, e.g. http://host:port/v1) and `model`"
    return f"answered {status}: {_excerpt(response)}{hint}"


def _excerpt(response: httpx.Response) -> str:
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = cast("dict[str, Any]", body).get("error")
        if isinstance(error, dict) and "message" in error:
            return str(cast("dict[str, Any]", error)["message"])[:300]
        if isinstance(error, str):
            return error[:300]
    text = response.text.strip().replace("\n", " ")
    return repr(text[:200]) if text else "(empty body)"


# name -> (type, what it is); the profile's `[embedder]` table for `openai-compatible`.
OPTIONS: Mapping[str, tuple[type, str]] = {
    "url": (str, "the API's base URL, e.g. http://127.0.0.1:8081/v1"),
    "model": (str, "the model's name, as the server knows it"),
    "api_key_env": (str, "the environment variable holding the API key"),
    "dimension": (int, "the vectors' length (else learned from the first answer)"),
    "fingerprint": (str, "names the vectors' model (letters, digits, . _ -)"),
    "timeout_s": (float, "each request's timeout, seconds"),
    "max_retries": (int, "tries after the first, on transient failures"),
    "batch_tokens": (int, "estimated tokens per request"),
    "max_batch": (int, "inputs per request"),
}
_BOUNDS: Mapping[str, tuple[float, float]] = {
    "dimension": (1, 65536),
    "timeout_s": (0.001, 600),
    "max_retries": (0, 10),
    "batch_tokens": (1, 10_000_000),
    "max_batch": (1, MAX_INPUTS),
}


def embedder_options(table: Mapping[str, Any]) -> dict[str, Any]:
    """A profile's `[embedder]` table for `openai-compatible`, checked and typed.

    Raises:
        ConfigError: naming `embedder.<key>`: an unknown key, a wrong type, a value out of
            bounds, a missing `url` or `model`, an unset `api_key_env` variable.
    """
    checked: dict[str, Any] = {}
    for key, value in table.items():
        if key not in OPTIONS:
            raise ConfigError(
                f"[embedder] {key}: not an option of the openai-compatible embedder; use "
                f"{', '.join(OPTIONS)}",
                field=f"embedder.{key}",
                value=value,
            )
        checked[key] = _typed(key, value)
    for required in ("url", "model"):
        if required not in checked:
            raise ConfigError(
                f"[embedder] {required} is required by the openai-compatible embedder: "
                f"{OPTIONS[required][1]}",
                field=f"embedder.{required}",
            )
    url = httpx.URL(checked["url"]) if _parses(checked["url"]) else None
    if url is None or url.scheme not in {"http", "https"} or not url.host:
        raise ConfigError(
            f"[embedder] url {checked['url']!r} is not an http:// or https:// URL",
            field="embedder.url",
            value=checked["url"],
        )
    variable = checked.get("api_key_env")
    if variable is not None and not os.environ.get(variable):
        raise ConfigError(
            f"[embedder] api_key_env: the environment variable {variable} is not set",
            field="embedder.api_key_env",
            value=variable,
        )
    fingerprint = checked.get("fingerprint")
    if fingerprint is not None and not _FINGERPRINT.fullmatch(fingerprint):
        raise ConfigError(
            f"[embedder] fingerprint {fingerprint!r}: use 1-64 letters, digits, '.', '_' or '-'",
            field="embedder.fingerprint",
            value=fingerprint,
        )
    return checked


def _typed(key: str, value: Any) -> str | int | float:
    kind, what = OPTIONS[key]
    if kind is str and isinstance(value, str) and value.strip():
        return value
    if kind is not str and isinstance(value, int | float) and not isinstance(value, bool):
        whole = isinstance(value, int)
        amount = float(value)
        low, high = _BOUNDS.get(key, (-math.inf, math.inf))
        if (kind is float or whole) and low <= amount <= high:
            return amount if kind is float else int(value)
    bounds = f" in [{_BOUNDS[key][0]:g}, {_BOUNDS[key][1]:g}]" if key in _BOUNDS else ""
    noun = {str: "a non-empty string", int: "an integer", float: "a number"}[kind]
    raise ConfigError(
        f"[embedder] {key} = {value!r}: give {noun}{bounds} ({what})",
        field=f"embedder.{key}",
        value=value,
    )


def _parses(url: str) -> bool:
    try:
        httpx.URL(url)
    except httpx.InvalidURL:
        return False
    return True


__all__ = [
    "MAX_INPUTS",
    "OPTIONS",
    "OpenAICompatibleEmbedder",
    "embedder_options",
    "estimated_tokens",
    "token_batches",
]
