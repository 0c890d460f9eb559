"""The HTTP API's own bodies. Search requests are `uda.query.contracts.SearchRequest` itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from uda.query.contracts import SearchResult

MAX_INGEST_ITEMS = 10_000


class ClearanceOut(BaseModel):
    """The clearance a request ran with, and how it came from the grant."""

    model_config = ConfigDict(frozen=True)

    granted: list[str] = Field(description="what authentication granted")
    requested: list[str] | None = Field(
        description="the request's clearance_scope, normalised (null: none given)"
    )
    effective: list[str] = Field(description="what applied: the grant narrowed by the request")
    narrowed: bool = Field(description="whether less than the grant applied")
    capped: bool = Field(description="whether the request asked beyond the grant (not given)")


class DegradedOut(BaseModel):
    """A backend an answer was made without."""

    model_config = ConfigDict(frozen=True)

    backend: str = Field(description="the connector's name")
    leg: str = Field(description="semantic, lexical or graph")
    reason: str = Field(description="what happened: an error, or no answer within the deadline")


class SearchOut(BaseModel):
    """The JSON answer to a search (the Arrow answer carries the same in its stream)."""

    model_config = ConfigDict(frozen=True)

    query_id: str = Field(
        description="the saved search's id: GET /v1/queries/{query_id} answers it again "
        "(for 30 days, to this principal only)"
    )
    clearance: ClearanceOut
    results: list[SearchResult]
    plan: dict[str, Any] = Field(description="the resolved plan, with phase timings")
    next_cursor: str | None = Field(
        default=None,
        description="send it back as `cursor`, with the same request, for the next page; "
        "null on the last page",
    )
    degraded: list[DegradedOut] = Field(
        default_factory=list["DegradedOut"],
        description="backends this answer was made without (failed or too late), and why; "
        "empty for a full answer. Clearance is enforced the same either way.",
    )


class ExplainOut(BaseModel):
    """The plan and every leg's rank, score and contribution per result."""

    model_config = ConfigDict(frozen=True)

    query_id: str
    clearance: ClearanceOut
    plan: dict[str, Any]
    results: list[dict[str, Any]]
    text: str = Field(description="the same, as `uda search --explain` prints it")


class IngestIn(BaseModel):
    """Elements (`{"element_type": "Document", ...}`) and relations to write."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    elements: list[dict[str, Any]] = Field(
        default_factory=list[dict[str, Any]], max_length=MAX_INGEST_ITEMS
    )
    relations: list[dict[str, Any] | list[str]] = Field(
        default_factory=list[dict[str, Any] | list[str]],
        max_length=MAX_INGEST_ITEMS,
        description='{"source_id", "relation", "target_id"} objects or [source, relation, '
        "target] triples",
    )


class IngestOut(BaseModel):
    """What an ingest did (`uda.write.writer.IngestReport`)."""

    model_config = ConfigDict(frozen=True)

    written: int
    unchanged: int
    deleted: int
    not_found: int
    chunks: int
    embedded: int
    edges: int
    edges_unchanged: int
    hlc: int | None


class ElementOut(BaseModel):
    """One element with its visible context nodes."""

    model_config = ConfigDict(frozen=True)

    element_id: str
    element_type: str
    name: str | None
    properties: dict[str, Any]
    context_nodes: list[dict[str, Any]]
    degraded: list[DegradedOut] = Field(
        default_factory=list[DegradedOut],
        description="backends the element was read without (no graph: no context nodes)",
    )


class HealthOut(BaseModel):
    """Liveness: the process answers."""

    model_config = ConfigDict(frozen=True)

    status: Literal["ok"] = "ok"


class BackendOut(BaseModel):
    """One connector's answer to its readiness probe."""

    model_config = ConfigDict(frozen=True)

    name: str
    capabilities: list[str]
    ok: bool
    latency_ms: float
    error: str | None = None


class ReadyOut(BaseModel):
    """Readiness: every backend answered (200), or which did not (503)."""

    model_config = ConfigDict(frozen=True)

    status: Literal["ready", "unavailable"]
    backends: list[BackendOut]


def json_answer(
    out: BaseModel, *, headers: Mapping[str, str] | None = None, status_code: int = 200
) -> Response:
    """`out` as a JSON response, serialised by pydantic's core in one pass.

    Not `JSONResponse(out.model_dump(mode="json"))`: building a dict of every result and
    encoding it again with the standard library cost a tenth of a search's CPU in the service.
    """
    return Response(
        out.model_dump_json().encode(),
        status_code=status_code,
        media_type="application/json",
        headers=dict(headers) if headers is not None else None,
    )
