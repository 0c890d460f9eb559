"""What each route depends on: who is calling, and what they sent (parsed strictly).

Bodies are parsed here rather than by FastAPI, in pydantic's strict mode: a JSON string is not
a number and `true` is not 1. Authentication runs before the body is looked at, so that an
unauthenticated caller learns nothing from validation errors.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException

from uda import hlc
from uda.errors import InvalidRequestError
from uda.http.auth import Authenticator, Principal
from uda.http.models import IngestIn
from uda.query import bounds
from uda.query.contracts import SearchRequest, error_location

M = TypeVar("M", bound=BaseModel)


def header_values(request: Request) -> dict[str, list[str]]:
    """Every value of every header by lower-case name: a repeated header stays repeated."""
    out: dict[str, list[str]] = {}
    for name, value in request.headers.raw:
        out.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return out


async def parse_body(request: Request, model: type[M], *, bounded: bool = True) -> M:
    """A body as `model`, strictly: `"5"` is not a number and `true` is not 1.

    `bounded`: the request bounds hold (uda/query/bounds.py), as for every surface's request;
    an ingest body is bounded by its size alone.
    """
    media = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise HTTPException(415, "send the body as JSON (Content-Type: application/json)")
    try:
        parsed = model.model_validate_json(await request.body(), strict=True)
    except ValidationError as exc:
        errors: list[Any] = [
            {**e, "loc": ("body", *error_location(e))} for e in exc.errors(include_url=False)
        ]
        raise RequestValidationError(errors) from None
    if bounded:
        bounds.check({name: getattr(parsed, name) for name in parsed.model_fields_set})
    return parsed


async def _principal(request: Request) -> Principal:
    auth: Authenticator = request.app.state.auth
    return auth.authenticate(header_values(request))


async def _search_body(request: Request) -> SearchRequest:
    return await parse_body(request, SearchRequest)


async def _ingest_body(request: Request) -> IngestIn:
    return await parse_body(request, IngestIn, bounded=False)


Caller = Annotated[Principal, Depends(_principal)]
SearchBody = Annotated[SearchRequest, Depends(_search_body)]
IngestBody = Annotated[IngestIn, Depends(_ingest_body)]


def check_as_of(request: SearchRequest) -> None:
    """Refuse an `as_of` datetime outside the clock's range, naming the field.

    The planner fails on one with a bare ValueError (a 500); it is the caller's mistake and
    must read as one.
    """
    if isinstance(request.as_of, datetime):
        try:
            hlc.from_datetime(request.as_of)
        except ValueError as exc:
            raise InvalidRequestError(
                f"as_of: {exc}", field="as_of", value=request.as_of.isoformat()
            ) from None
