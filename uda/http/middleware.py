"""ASGI middleware: request ids and metrics around everything; a bounded, strict JSON body.

Plain ASGI rather than Starlette's `BaseHTTPMiddleware`, so that streamed Arrow responses pass
through untouched and the body limit holds before any parsing happens.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from uda.http.metrics import Metrics
from uda.http.problems import internal_error_response, problem_response
from uda.http.wire import REQUEST_ID_HEADER

UNMATCHED_ROUTE = "<unmatched>"
_CONVERTOR = re.compile(r"\{(\w+):\w+\}")
# Any token is a valid method; label values must stay a bounded set.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RequestContext:
    """Gives each request an id, times and counts it, and turns any escaped fault into a 500.

    The id is always generated here, never taken from the caller, so that a log line found by
    it belongs to exactly one request.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI connection."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        started = time.perf_counter()
        status = 500
        response_started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                response_started = True
                status = int(message["status"])
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() != REQUEST_ID_HEADER.lower().encode()
                ]
                headers.append((REQUEST_ID_HEADER.lower().encode(), request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:  # the last line of defence: log, answer 500
            if response_started:
                raise  # a streamed response broke half way; the server closes the connection
            await internal_error_response(request_id, exc)(scope, receive, send_with_id)
        finally:
            route: Any = scope.get("route")
            # `{element_id:path}` -> `{element_id}`: the label names the route, not the router.
            template = _CONVERTOR.sub(r"{\1}", getattr(route, "path", None) or UNMATCHED_ROUTE)
            method = scope["method"] if scope["method"] in _METHODS else "OTHER"
            self.metrics.record_request(template, method, status, time.perf_counter() - started)


class JsonBodyGuard:
    """Refuses a request body over `max_bytes` (413) or that is not strict JSON (400).

    The body is read here, counted as it arrives (a missing or lying Content-Length does not
    help), and replayed to the app. Strict JSON means no duplicate keys in any object — two
    `clearance_scope` keys could be read differently by two parsers, so neither is chosen —
    and no NaN or Infinity, which JSON does not have and which no response could carry.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI connection."""
        if scope["type"] != "http" or scope["method"] in {"GET", "HEAD", "OPTIONS"}:
            await self.app(scope, receive, send)
            return
        request_id = scope.get("state", {}).get("request_id")
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._too_large(scope, receive, send, request_id)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(scope, receive, send, request_id)
                return
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        if body and _is_json(scope):
            problem = _strict_json_problem(body)
            if problem is not None:
                await problem_response(
                    400, problem, slug="malformed-json", field="body", request_id=request_id
                )(scope, receive, send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: wait for the disconnect, as servers do

        await self.app(scope, replay, send)

    async def _too_large(
        self, scope: Scope, receive: Receive, send: Send, request_id: str | None
    ) -> None:
        await problem_response(
            413,
            f"the request body is larger than {self.max_bytes} bytes",
            slug="body-too-large",
            field="body",
            request_id=request_id,
            headers={"Connection": "close"},
        )(scope, receive, send)


def _header(scope: Scope, name: bytes) -> list[bytes]:
    return [v for k, v in scope.get("headers", []) if k.lower() == name]


def _content_length(scope: Scope) -> int | None:
    values = _header(scope, b"content-length")
    try:
        return max(int(v) for v in values) if values else None
    except ValueError:
        return None  # a malformed length: count the bytes instead


def _is_json(scope: Scope) -> bool:
    for value in _header(scope, b"content-type"):
        media = value.split(b";", 1)[0].strip().lower()
        if media == b"application/json" or media.endswith(b"+json"):
            return True
    return False


class _Malformed(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        duplicate = next(k for k in keys if keys.count(k) > 1)
        raise _Malformed(f"duplicate key {duplicate!r} in a JSON object")
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise _Malformed(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Malformed(f"{text[:40]} is out of the range of a double")
    return value


_INT64 = (1 << 63) - 1


def _int64(text: str) -> int:
    # Beyond 64 bits no store can hold or compare the value; refuse it here rather than let a
    # backend fail on it later (RFC 7493 asks for far less range than this).
    value = int(text)
    if not -_INT64 - 1 <= value <= _INT64:
        raise _Malformed(f"{text[:40]} is out of the 64-bit integer range")
    return value


def _strict_json_problem(body: bytes) -> str | None:
    """Why `body` is not strict JSON, or None when it is."""
    try:
        json.loads(
            body,
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
            parse_float=_finite,
            parse_int=_int64,
        )
    except _Malformed as exc:
        return str(exc)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and bad UTF-8 are ValueErrors
        return f"the body is not valid JSON: {str(exc)[:200]}"
    return None
