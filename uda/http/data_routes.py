"""The export and discovery routes: `POST /v1/export`, `GET /v1/paths`, `GET /v1/definitions`.

`create_app` registers them with `install_data_routes`, handing over its own `answer` (the
clearance decision and the search, exactly as `/v1/search` makes them) so that an export
page is decided like a search page: the caller's grant, narrowed by the body's
`clearance_scope`, never widened. An export answers its first page before the response
starts, so a bad request is a problem document (422 naming the field), not a broken
stream; after that the body streams a page at a time. A failure half way ends the body
early: an Arrow export then lacks its closing batch (`uda.query.export`), which the Python
client detects.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from uda.http import grants
from uda.http.auth import Principal
from uda.http.deps import Caller, parse_body
from uda.http.models import ClearanceOut, json_answer
from uda.http.openapi import PROBLEMS, body_schema
from uda.query.contracts import SearchRequest
from uda.query.discovery import MAX_PREFIX, FilterPath, Operators, operators
from uda.query.export import EXTENSIONS, MEDIA_TYPES, ExportRequest, export_stream
from uda.query.ordering import orderable_fields
from uda.query.results import SearchResponse

Answer = Callable[
    [Principal, SearchRequest], Awaitable[tuple[SearchResponse, grants.ClearanceDecision]]
]
Headers = Callable[[grants.ClearanceDecision], dict[str, str]]

MAX_ROWS_HEADER = "X-UDA-Export-Max-Rows"

EXPORT_RESPONSE: dict[str, Any] = {
    "description": "the export, streamed a page at a time in the body's format: an Arrow IPC "
    "stream (closing with an empty batch whose custom metadata holds uda.export.rows, "
    "uda.export.truncated and uda.export.pages), Parquet (the same keys in the footer) or CSV "
    "(properties flattened to properties.<field> columns, extras and context_nodes as JSON)",
    "content": {
        media: {"schema": {"type": "string", "format": "binary"}} for media in MEDIA_TYPES.values()
    },
}


class PathsOut(BaseModel):
    """The filterable paths, with the values the clearance that applied may see."""

    model_config = ConfigDict(frozen=True)

    clearance: ClearanceOut
    paths: list[FilterPath]


class DefinitionsOut(BaseModel):
    """What filters and orders take: operators by field type, and the orderable keys."""

    model_config = ConfigDict(frozen=True)

    operators: Operators
    orderable: list[str] = Field(description="the keys order_by takes ('-' for descending)")


async def _export_body(request: Request) -> ExportRequest:
    return await parse_body(request, ExportRequest)


ExportBody = Annotated[ExportRequest, Depends(_export_body)]


def install_data_routes(app: FastAPI, client: Any, *, answer: Answer, headers: Headers) -> None:
    """Add the export and discovery routes to `app`.

    Args:
        app: the service.
        client: the `uda.AsyncClient` behind it (for `fields`).
        answer: `create_app`'s search: decides the clearance, runs, records the metrics.
        headers: `create_app`'s clearance headers for a decision.
    """

    @app.post(
        "/v1/export",
        responses={**PROBLEMS, 200: EXPORT_RESPONSE},
        response_class=Response,
        openapi_extra=body_schema(ExportRequest),
        summary="Every match of a search (up to max_rows), streamed as Arrow, Parquet or CSV",
    )
    async def export(caller: Caller, body: ExportBody) -> Response:
        decisions: list[grants.ClearanceDecision] = []

        async def run(request: SearchRequest) -> SearchResponse:
            response, decision = await answer(caller, request)
            decisions.append(decision)
            return response

        chunks = export_stream(
            run, body.search_request(), format=body.format, max_rows=body.max_rows
        )
        first = await anext(chunks)  # the first page: a bad request fails here, as a 422

        async def stream() -> AsyncIterator[bytes]:
            try:
                yield first
                async for chunk in chunks:
                    yield chunk
            finally:
                await chunks.aclose()

        filename = "uda-export" + EXTENSIONS[body.format]
        return StreamingResponse(
            stream(),
            media_type=MEDIA_TYPES[body.format],
            headers={
                **headers(decisions[0]),
                MAX_ROWS_HEADER: str(body.max_rows),
                "Content-Disposition": f'attachment; filename="{filename}"',
            },
        )

    @app.get(
        "/v1/paths",
        response_model=PathsOut,
        responses=PROBLEMS,
        summary="Every filterable path (relation paths too) with its type, operators, whether "
        "order_by takes it and, for few distinct values, the visible values with counts",
    )
    async def paths(
        caller: Caller,
        prefix: Annotated[str | None, Query(max_length=MAX_PREFIX)] = None,
        clearance_scope: Annotated[list[str] | None, Query()] = None,
        values: bool = True,
    ) -> Response:
        decision = grants.decide(caller, clearance_scope)
        found = await client.fields(prefix, decision.effective.entries(), values=values)
        out = PathsOut(clearance=ClearanceOut.model_validate(decision.to_dict()), paths=found)
        return json_answer(out, headers=headers(decision))

    @app.get(
        "/v1/definitions",
        response_model=DefinitionsOut,
        responses=PROBLEMS,
        summary="The filter operators each field type takes, and the keys order_by takes",
    )
    async def definitions(caller: Caller) -> DefinitionsOut:
        return DefinitionsOut(operators=operators(), orderable=list(orderable_fields()))


__all__ = ["DefinitionsOut", "PathsOut", "install_data_routes"]
