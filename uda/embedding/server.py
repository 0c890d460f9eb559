"""`uda embed-server`: one embedding model served over HTTP in OpenAI's embeddings wire format.

Several UDA processes (workers, CLI runs, notebooks) can then share one loaded model instead
of each loading its own, through `[uda] embedder = "openai-compatible"`; and any client of
that format (OpenAI's own SDK among them) can use the packaged model.

- `POST /v1/embeddings`: `{"model", "input": text | [texts], "encoding_format": "float" |
  "base64"}` answers `{"object": "list", "data": [{"object": "embedding", "index",
  "embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}}`. The vectors are the
  local runtime's (unit length). `model` must name the served model: a client asking for
  another gets 404 `model_not_found`, never the wrong vectors under the right name.
- `GET /v1/models`: the served model, with its dimension and `fingerprint` (the one to
  declare in a client's `[embedder]` so that stores embedded locally stay valid).
- `GET /healthz`, and `GET /metrics` (Prometheus text: requests, inputs, tokens, errors).
- With an API key, every `/v1` request needs `Authorization: Bearer <key>` (compared in
  constant time).

Errors are OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, never a trace.
"""

from __future__ import annotations

import base64
import hmac
import json
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from uda.embedding.base import Embedder
from uda.embedding.http import MAX_INPUTS, estimated_tokens

MAX_BODY_BYTES = 32 << 20
"""Larger request bodies get 413: 2,048 inputs of 16 kB each."""
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(kw_only=True)
class Counters:
    """What the server has done since it started (its `/metrics`)."""

    requests: int = 0
    inputs: int = 0
    tokens: int = 0
    errors: dict[int, int] = field(default_factory=dict[int, int])

    def prometheus(self) -> str:
        """The counters in Prometheus' text format."""
        lines = [
            "# HELP uda_embed_requests_total Embedding requests answered with vectors.",
            "# TYPE uda_embed_requests_total counter",
            f"uda_embed_requests_total {self.requests}",
            "# HELP uda_embed_inputs_total Texts embedded.",
            "# TYPE uda_embed_inputs_total counter",
            f"uda_embed_inputs_total {self.inputs}",
            "# HELP uda_embed_tokens_total Tokens of the texts embedded.",
            "# TYPE uda_embed_tokens_total counter",
            f"uda_embed_tokens_total {self.tokens}",
            "# HELP uda_embed_errors_total Requests refused, by HTTP status.",
            "# TYPE uda_embed_errors_total counter",
        ]
        lines += [
            f'uda_embed_errors_total{{status="{status}"}} {count}'
            for status, count in sorted(self.errors.items())
        ]
        return "\n".join(lines) + "\n"


class _Refused(Exception):
    """A request the server will not answer with vectors (internal)."""

    def __init__(self, status: int, message: str, *, code: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.param = status, code, param


def create_embedding_app(
    embedder: Embedder,
    *,
    model_name: str,
    api_key: str | None = None,
    count_tokens: Callable[[Sequence[str]], int] | None = None,
) -> Starlette:
    """The embedding service over `embedder`, serving it as `model_name`.

    Args:
        embedder: computes the vectors (loaded and warmed when the app starts).
        model_name: the `model` clients must send.
        api_key: the bearer key `/v1` requests need; None serves anyone.
        count_tokens: the model's tokenizer, for `usage` (else `estimated_tokens`).
    """
    counters = Counters()
    tokens_of = count_tokens or _estimated_tokens

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncGenerator[None]:
        # Load the model before the port opens: a client's first request is not the slow one.
        await run_in_threadpool(embedder.embed_query, "warm up")
        yield

    def refuse(failure: _Refused) -> JSONResponse:
        counters.errors[failure.status] = counters.errors.get(failure.status, 0) + 1
        kind = "authentication_error" if failure.status == 401 else "invalid_request_error"
        error = {"message": str(failure), "type": kind, "param": failure.param}
        return JSONResponse({"error": error | {"code": failure.code}}, status_code=failure.status)

    def authorise(request: Request) -> None:
        if api_key is None:
            return
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode()):
            raise _Refused(
                401,
                "missing or wrong API key: send `Authorization: Bearer <key>`",
                code="invalid_api_key",
            )

    async def embeddings(request: Request) -> Response:
        try:
            authorise(request)
            texts, encoding = await _read_request(request, model_name, embedder.dimension)
        except _Refused as failure:
            return refuse(failure)
        vectors = await run_in_threadpool(embedder.embed_documents, texts)
        tokens = tokens_of(texts)
        counters.requests += 1
        counters.inputs += len(texts)
        counters.tokens += tokens
        data = [
            {"object": "embedding", "index": i, "embedding": _encoded(vector, encoding)}
            for i, vector in enumerate(vectors)
        ]
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": model_name,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def models(request: Request) -> Response:
        try:
            authorise(request)
        except _Refused as failure:
            return refuse(failure)
        served = {
            "id": model_name,
            "object": "model",
            "created": 0,
            "owned_by": "uda",
            "dimension": embedder.dimension,
            "fingerprint": embedder.fingerprint,
        }
        return JSONResponse({"object": "list", "data": [served]})

    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok", "model": model_name})

    async def metrics(_: Request) -> Response:
        return PlainTextResponse(counters.prometheus(), media_type=METRICS_CONTENT_TYPE)

    app = Starlette(
        routes=[
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.counters = counters
    return app


async def _read_request(request: Request, model_name: str, dimension: int) -> tuple[list[str], str]:
    """The texts and the encoding a request asks for, or `_Refused` saying what is wrong."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _Refused(413, f"the body is over {MAX_BODY_BYTES} bytes", code="body_too_large")
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise _Refused(413, f"the body is over {MAX_BODY_BYTES} bytes", code="body_too_large")
    try:
        payload: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise _Refused(400, "the body is not JSON", code="invalid_json") from None
    if not isinstance(payload, dict):
        raise _Refused(400, "the body must be a JSON object", code="invalid_json")
    fields = cast("dict[str, Any]", payload)
    model = fields.get("model")
    if not isinstance(model, str):
        raise _Refused(400, "`model` must be a string", code="invalid_model", param="model")
    if model != model_name:
        raise _Refused(
            404,
            f"model {model!r} is not served here; this server serves {model_name!r}",
            code="model_not_found",
            param="model",
        )
    texts = _texts(fields.get("input"))
    encoding = fields.get("encoding_format", "float")
    if encoding not in {"float", "base64"}:
        raise _Refused(
            400,
            "`encoding_format` must be float or base64",
            code="invalid_value",
            param="encoding_format",
        )
    dimensions = fields.get("dimensions")
    if dimensions is not None and dimensions != dimension:
        raise _Refused(
            400,
            f"`dimensions` must be {dimension} (or absent): this model's vectors are not cut",
            code="invalid_value",
            param="dimensions",
        )
    return texts, cast("str", encoding)


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not value:
        raise _Refused(
            400,
            "`input` must be a string or a non-empty list of strings",
            code="invalid_input",
            param="input",
        )
    items = cast("list[Any]", value)
    if len(items) > MAX_INPUTS:
        raise _Refused(
            400,
            f"`input` has {len(items)} texts; at most {MAX_INPUTS}",
            code="invalid_input",
            param="input",
        )
    if not all(isinstance(item, str) for item in items):
        raise _Refused(
            400,
            "`input` must hold strings (token arrays are not supported)",
            code="invalid_input",
            param="input",
        )
    return cast("list[str]", items)


def _estimated_tokens(texts: Sequence[str]) -> int:
    return sum(estimated_tokens(text) for text in texts)


def _encoded(vector: Any, encoding: str) -> list[float] | str:
    """A vector as JSON numbers, or as base64 of its float32 bytes (little-endian)."""
    row = np.asarray(vector, dtype="<f4")
    if encoding == "base64":
        return base64.b64encode(row.tobytes()).decode("ascii")
    return cast("list[float]", row.tolist())


__all__ = ["MAX_BODY_BYTES", "Counters", "create_embedding_app"]
