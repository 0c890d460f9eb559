"""Errors as RFC 9457 problem documents: every failure the caller can act on names its field.

The mapping follows the error tree (`uda.errors`): a caller's mistake (`UserError`) is a 4xx that
names the field; a backend failure is a 502 and an internal fault a 500, both with a generic
message and the request id — the backend's own message (paths, hostnames, SQL) stays in the
server log and never reaches the caller.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException

from uda.errors import (
    BackendUnavailableError,
    ConnectorError,
    QueryNotFoundError,
    StoresBehindError,
    UDAError,
    UserError,
)
from uda.http.auth import Authenticator
from uda.http.errors import AuthenticationError, ElementNotFoundError, PermissionDeniedError
from uda.http.wire import PROBLEM_JSON, REQUEST_ID_HEADER

log = logging.getLogger("uda.http")

TYPE_PREFIX = "urn:uda:problem:"


class FieldProblem(BaseModel):
    """One invalid field of a request."""

    model_config = ConfigDict(frozen=True)

    field: str
    message: str


class Problem(BaseModel):
    """An RFC 9457 problem document, with `field` and `request_id` as extension members."""

    model_config = ConfigDict(frozen=True, extra="allow")

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    field: str | None = None
    errors: list[FieldProblem] | None = None
    request_id: str | None = None


def problem_response(
    status: int,
    detail: str | None,
    *,
    slug: str | None = None,
    field: str | None = None,
    errors: Sequence[FieldProblem] | None = None,
    request_id: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """A problem document response (`application/problem+json`)."""
    problem = Problem(
        type=TYPE_PREFIX + slug if slug else "about:blank",
        title=HTTPStatus(status).phrase,
        status=status,
        detail=detail,
        field=field,
        errors=list(errors) if errors is not None else None,
        request_id=request_id,
    )
    out = dict(headers or {})
    if request_id:
        out[REQUEST_ID_HEADER] = request_id
    return JSONResponse(
        problem.model_dump(exclude_none=True),
        status_code=status,
        headers=out,
        media_type=PROBLEM_JSON,
    )


def request_id_of(request: Request) -> str | None:
    """The id the request middleware gave this request (None outside it)."""
    value = getattr(request.state, "request_id", None)
    return value if isinstance(value, str) else None


def _loc_field(loc: Sequence[int | str]) -> str:
    # FastAPI prefixes the source ("body", "query", "path"); the caller's field is the rest.
    parts = [str(p) for p in loc]
    if len(parts) > 1 and parts[0] in {"body", "query", "path", "header"}:
        parts = parts[1:]
    return ".".join(parts) or "body"


def install(app: FastAPI, auth: Authenticator) -> None:
    """Register the exception handlers that turn every error into a problem document."""

    async def authentication(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, AuthenticationError)  # noqa: S101 - registered for this type
        challenge = auth.challenge()
        if exc.invalid_token:
            challenge = challenge.replace(
                'Bearer realm="uda"', 'Bearer realm="uda", error="invalid_token"', 1
            )
        return problem_response(
            401,
            str(exc),
            slug="unauthenticated",
            field=exc.field,
            request_id=request_id_of(request),
            headers={"WWW-Authenticate": challenge},
        )

    async def denied(request: Request, exc: Exception) -> JSONResponse:
        field = exc.field if isinstance(exc, UserError) else None
        return problem_response(
            403, str(exc), slug="forbidden", field=field, request_id=request_id_of(request)
        )

    async def not_found(request: Request, exc: Exception) -> JSONResponse:
        field = exc.field if isinstance(exc, UserError) else None
        return problem_response(
            404, str(exc), slug="not-found", field=field, request_id=request_id_of(request)
        )

    async def user_error(request: Request, exc: Exception) -> JSONResponse:
        field = exc.field if isinstance(exc, UserError) else None
        return problem_response(
            422, str(exc), slug="invalid-request", field=field, request_id=request_id_of(request)
        )

    async def validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)  # noqa: S101 - registered for this type
        errors = [
            FieldProblem(field=_loc_field(e.get("loc", ())), message=str(e.get("msg", "")))
            for e in exc.errors()
        ]
        malformed = any(e.get("type") == "json_invalid" for e in exc.errors())
        first = errors[0] if errors else FieldProblem(field="body", message="invalid request")
        return problem_response(
            400 if malformed else 422,
            f"{first.field}: {first.message}",
            slug="malformed-json" if malformed else "invalid-request",
            field=first.field,
            errors=errors,
            request_id=request_id_of(request),
        )

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)  # noqa: S101 - registered for this type
        return problem_response(
            exc.status_code,
            str(exc.detail),
            request_id=request_id_of(request),
            headers=exc.headers,
        )

    async def backend(request: Request, exc: Exception) -> JSONResponse:
        request_id = request_id_of(request)
        # The message names the backend and its error; the stack is UDA's, not the cause.
        log.error(
            "request %s: backend failure: %s",
            request_id,
            exc,
            exc_info=exc if log.isEnabledFor(logging.DEBUG) else None,
        )
        return problem_response(
            502,
            f"a backend failed; the server log has the details under request id {request_id}",
            slug="backend-failed",
            request_id=request_id,
        )

    async def unavailable(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, BackendUnavailableError)  # noqa: S101 - registered for this type
        request_id = request_id_of(request)
        log.warning("request %s: %s", request_id, exc)
        late = exc.reason.startswith("no answer")
        return problem_response(
            503,
            f"{exc.connector} is unavailable ({'no answer in time' if late else 'it failed'}); "
            "a search cannot be answered safely without it. Retry shortly.",
            slug="backend-unavailable",
            request_id=request_id,
            headers={"Retry-After": "5"},
        )

    async def behind(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StoresBehindError)  # noqa: S101 - registered for this type
        request_id = request_id_of(request)
        log.warning("request %s: %s", request_id, exc)
        stores = ", ".join(sorted(exc.behind))
        return problem_response(
            503,
            f"written to the system of record; not yet to {stores}, which did not answer. "
            "Nothing is lost: they catch up on the next write or `uda sync`, and sending "
            "the same request again is safe (writes are idempotent).",
            slug="stores-behind",
            request_id=request_id,
            headers={"Retry-After": "5"},
        )

    async def internal(request: Request, exc: Exception) -> JSONResponse:
        return internal_error_response(request_id_of(request), exc)

    handlers: list[tuple[type[Exception], Any]] = [
        (AuthenticationError, authentication),
        (PermissionDeniedError, denied),
        (ElementNotFoundError, not_found),
        (QueryNotFoundError, not_found),
        (UserError, user_error),
        (RequestValidationError, validation),
        (StarletteHTTPException, http_error),
        (BackendUnavailableError, unavailable),
        (StoresBehindError, behind),
        (ConnectorError, backend),
        (UDAError, internal),
    ]
    for exc_class, handler in handlers:
        app.add_exception_handler(exc_class, handler)


def internal_error_response(request_id: str | None, exc: BaseException) -> JSONResponse:
    """The 500 for a fault of UDA itself: generic to the caller, in full in the server log."""
    log.error("request %s: internal error", request_id, exc_info=exc)
    return problem_response(
        500,
        f"internal error; the server log has the details under request id {request_id}",
        slug="internal",
        request_id=request_id,
    )
