"""`POST /v1/aggregate`: counts of the visible matches by group, as JSON or an Arrow stream.

The clearance is decided as for `/v1/search`: the principal's grant, narrowed by the
request's `clearance_scope` when it gives one (`uda.http.grants`). JSON by default; an
Arrow IPC stream of the answer's table when `Accept` asks for it, with the clearance, the
query id and the answer's `matched` and `path` in the stream's schema metadata.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from uda import hlc
from uda.client.async_client import AsyncClient
from uda.errors import InvalidRequestError
from uda.http import grants
from uda.http.deps import Caller, parse_body
from uda.http.models import ClearanceOut, json_answer
from uda.http.openapi import ARROW_RESPONSE, PROBLEMS, body_schema
from uda.http.problems import request_id_of
from uda.http.wire import (
    ARROW_STREAM,
    CLEARANCE_HEADER,
    META_CLEARANCE,
    META_QUERY_ID,
    NARROWED_HEADER,
    negotiate,
    stream_chunks,
)
from uda.query.aggregates import AggregateRequest
from uda.query.aggregates.plan import ColumnKind

META_AGGREGATE = b"uda.http.aggregate"
"""Schema metadata key of an aggregate stream: `{"matched": n, "path": ...}` as JSON."""


class AggregateColumnOut(BaseModel):
    """One column of an aggregate: its name and the kind of its values."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: ColumnKind = Field(
        description="datetime and date values travel as ISO 8601 strings in JSON rows"
    )


class AggregateOut(BaseModel):
    """The JSON answer to an aggregate."""

    model_config = ConfigDict(frozen=True)

    query_id: str = Field(description="this request's id (its X-Request-ID)")
    clearance: ClearanceOut
    columns: list[AggregateColumnOut]
    rows: list[dict[str, Any]] = Field(description="one object per non-empty group, sorted")
    matched: int = Field(description="distinct visible matches counted")
    path: Literal["pushdown", "python"] = Field(
        description="one statement in the system of record, or the reference count in Python"
    )


async def _aggregate_body(request: Request) -> AggregateRequest:
    return await parse_body(request, AggregateRequest)


AggregateBody = Annotated[AggregateRequest, Depends(_aggregate_body)]


def _check_as_of(body: AggregateRequest) -> None:
    if isinstance(body.as_of, datetime):
        try:
            hlc.from_datetime(body.as_of)
        except ValueError as exc:
            raise InvalidRequestError(
                f"as_of: {exc}", field="as_of", value=body.as_of.isoformat()
            ) from None


def install_aggregate(app: FastAPI, client: AsyncClient) -> None:
    """Add `POST /v1/aggregate` to `app`, answered by `client`."""

    @app.post(
        "/v1/aggregate",
        response_model=AggregateOut,
        responses={**PROBLEMS, 406: {}, 200: ARROW_RESPONSE},
        openapi_extra=body_schema(AggregateRequest),
        summary="Aggregate: counts (and min, max, avg) of the visible matches by group",
    )
    async def aggregate(request: Request, caller: Caller, body: AggregateBody) -> Response:
        wanted = negotiate(request.headers.get("accept"))
        if wanted is None:
            raise HTTPException(
                406, f"this resource is available as application/json or {ARROW_STREAM}"
            )
        _check_as_of(body)
        asked = body.clearance_scope if "clearance_scope" in body.model_fields_set else None
        decision = grants.decide(caller, asked)
        # The body is validated already; only its clearance gives way to the decision's.
        narrowed = body.model_copy(update={"clearance_scope": decision.effective.entries()})
        response = await client.run_aggregate(narrowed)
        query_id = request_id_of(request) or ""
        headers = {
            CLEARANCE_HEADER: ",".join(decision.effective.entries()),
            NARROWED_HEADER: "true" if decision.narrowed else "false",
        }
        if wanted == "arrow":
            extra = {
                META_CLEARANCE: decision.to_dict(),
                META_QUERY_ID: query_id,
                META_AGGREGATE: {"matched": response.matched, "path": response.path},
            }
            chunks: Iterator[bytes] = stream_chunks(response.to_arrow().to_reader(), extra)
            return StreamingResponse(chunks, media_type=ARROW_STREAM, headers=headers)
        data = response.to_dict()
        out = AggregateOut.model_validate(
            {
                "query_id": query_id,
                "clearance": decision.to_dict(),
                "columns": data["columns"],
                "rows": data["rows"],
                "matched": data["matched"],
                "path": data["path"],
            }
        )
        return json_answer(out, headers=headers)


__all__ = ["META_AGGREGATE", "AggregateOut", "install_aggregate"]
