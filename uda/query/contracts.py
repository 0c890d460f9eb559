"""The read seam's contract: `SearchRequest` in, `SearchResult`s out (docs/design.md)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal, TypedDict, Unpack, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from connectors.contract.predicates import INT64_MAX
from uda.errors import InvalidRequestError
from uda.hlc import from_datetime
from uda.query import bounds
from uda.query.fusion import Leg
from uda.query.projection import MAX_FIELDS, check_fields

Centrality = Literal["degree", "pagerank"]
# How expansion walks edges. "context": either way at the first hop, then only along the
# edges' direction, so a document reaches its repository, its decision and that decision's
# author, but not the repository's other thousand documents. "association": either way at
# every hop, for graphs whose meaning is shared neighbours (passage -> entity <- passage).
Traverse = Literal["context", "association"]


class SearchRequest(BaseModel):
    """One search. Field names and defaults are the contract; the extensions are optional."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    query: str | None = Field(default=None, min_length=1, max_length=4000)
    limit: int = Field(default=5, ge=1, le=100)
    clearance_scope: list[str] = Field(default_factory=list[str])
    context_filters: dict[str, Any] = Field(default_factory=dict[str, Any])
    # -- extensions ----------------------------------------------------------------------
    element_types: list[str] | None = None
    # Graph settings left unset (None) are the automatic mode's (uda/query/auto).
    expand_depth: int | None = Field(default=None, ge=0, le=2)
    relations: list[str] | None = None
    as_of: int | datetime | None = None
    weights: dict[Leg, float] | None = None
    half_life: float | None = Field(default=None, gt=0, description="decay half-life in days")
    decay_floor: float | None = Field(default=None, ge=0, le=1)
    decay: bool = True
    centrality: Centrality | None = None
    graph_candidates: bool | None = None
    traverse: Traverse | None = None
    pool_size: int | None = Field(default=None, ge=1, le=1000)
    # Structured retrieval (query None): the order, "-" first for descending.
    order_by: str | None = Field(default=None, min_length=1, max_length=200)
    # The previous page's `next_cursor`, with the same request otherwise (limit may change).
    cursor: str | None = Field(default=None, min_length=1, max_length=2000)
    # Seconds the whole search may take (default: the profile's `search_timeout_s`). A
    # backend that cannot answer in time is left out and the answer says so (`degraded`).
    timeout: float | None = Field(default=None, gt=0, le=60)
    # Properties to return whole ("*": everything, context nodes too). By default long text
    # is clipped and each result's `truncated` says what and how long (uda/query/projection).
    fields: list[str] | None = Field(default=None, max_length=MAX_FIELDS)

    @field_validator("limit", "expand_depth", "pool_size", mode="before")
    @classmethod
    def _not_a_bool(cls, value: object) -> object:
        # JSON true is not an integer; pydantic's lax mode would read it as 1.
        if isinstance(value, bool):
            raise ValueError("expected an integer, not a boolean")
        return value

    @field_validator("as_of")
    @classmethod
    def _as_of_on_the_clock(cls, value: int | datetime | None) -> int | datetime | None:
        # An instant the hybrid logical clock cannot express is a bad request, not a crash.
        if isinstance(value, datetime):
            from_datetime(value)
        elif value is not None and not 0 <= value <= INT64_MAX:
            raise ValueError("an HLC stamp is a non-negative 64-bit integer")
        return value

    @field_validator("fields")
    @classmethod
    def _fields_known(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else check_fields(value)

    @field_validator("query")
    @classmethod
    def _query_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("query must not be blank")
        return value

    @model_validator(mode="after")
    def _one_mode(self) -> SearchRequest:
        # A ranked search orders by relevance; without a query, something must say what to
        # return and in what order, or the answer would be "everything, in no order".
        if self.query is None and not self.context_filters and self.order_by is None:
            raise PydanticCustomError(
                "query_or_structure",
                "give a query, or context_filters and/or order_by for a structured retrieval",
            )
        if self.query is not None and self.order_by is not None:
            raise PydanticCustomError(
                "order_by_ranked",
                "order_by orders a structured retrieval (query=None); a ranked search is "
                "ordered by relevance",
            )
        return self

    @field_validator("weights")
    @classmethod
    def _weights_not_negative(cls, value: dict[Leg, float] | None) -> dict[Leg, float] | None:
        if value is not None and any(w < 0 for w in value.values()):
            raise ValueError("weights must not be negative")
        return value

    @classmethod
    def build(cls, **fields: Any) -> SearchRequest:
        """Validate, raising `InvalidRequestError` that names the first bad field and value."""
        bounds.check(fields)  # first: nothing below walks a value beyond the bounds
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise request_error(exc) from None


class SearchOptions(TypedDict, total=False):
    """Optional search settings as keyword arguments: the request's extensions, one per field.

    Every client (embedded, remote, sync and async) takes these, so a type checker sees the
    same names and types as `SearchRequest` declares.
    """

    element_types: list[str]
    expand_depth: int
    relations: list[str]
    as_of: int | datetime
    weights: Mapping[str, float]
    half_life: float
    decay_floor: float
    decay: bool
    centrality: Centrality
    graph_candidates: bool
    traverse: Traverse
    pool_size: int
    order_by: str
    cursor: str
    timeout: float
    fields: list[str]


def search_request(
    query: str | None = None,
    limit: int = 5,
    clearance_scope: Iterable[str] | None = None,
    context_filters: Mapping[str, Any] | None = None,
    **options: Unpack[SearchOptions],
) -> SearchRequest:
    """The keyword form of every client's `search`, as one validated request.

    `clearance_scope=None` leaves the field unset rather than empty: the embedded planner
    reads an unset clearance as `public` only, the HTTP service as the caller's whole grant,
    and the remote client sends only the fields that are set.

    Raises:
        InvalidRequestError: naming the first bad field and value.
    """
    fields: dict[str, Any] = {
        "query": query,
        "limit": limit,
        "context_filters": {}
        if context_filters is None
        else copied_if(context_filters, Mapping, dict),
        **options,
    }
    if clearance_scope is not None:
        fields["clearance_scope"] = copied_if(clearance_scope, Iterable, list)
    return SearchRequest.build(**fields)


def copied_if(value: Any, kind: type, copy: Any) -> Any:
    """A copy of `value` if it is of `kind` (not a string), else `value` as given.

    What is not of its kind is for the model to refuse by name: `list(True)` would fail
    here with a bare TypeError, and `list("public")` would quietly be six entries.
    """
    if isinstance(value, kind) and not isinstance(value, str | bytes):
        return copy(value)
    return value


_WHOLE_REQUEST_ERRORS = {"query_or_structure": "query", "order_by_ranked": "order_by"}


def error_location(error: ErrorDetails) -> tuple[int | str, ...]:
    """Where an error is: a rule over several fields names the one its message says to change."""
    field = _WHOLE_REQUEST_ERRORS.get(error["type"])
    return error["loc"] if field is None else (field,)


def request_error(exc: ValidationError) -> InvalidRequestError:
    """Turn pydantic's report into one error naming the field and the value."""
    first = exc.errors()[0]
    field = ".".join(str(p) for p in error_location(first)) or "request"
    value: Any = first.get("input")
    if first["type"] in _WHOLE_REQUEST_ERRORS:
        value = cast("dict[str, Any]", value).get(field) if isinstance(value, dict) else None
    shown = repr(value)  # within the bounds: `build` checked them before pydantic ran
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return InvalidRequestError(f"{field}: {first['msg']} (got {shown})", field=field, value=value)


class SearchResult(BaseModel):
    """One result: a typed element, its fused score, its properties and its context nodes."""

    model_config = ConfigDict(frozen=True)

    element_id: str
    element_type: str
    score: float
    properties: dict[str, Any]
    context_nodes: list[dict[str, Any]]
    name: str | None = None
    snippet: str | None = None
    snippet_offset: int | None = Field(
        default=None,
        description="where the snippet starts in the element's text, in characters (null: "
        "not found verbatim)",
    )
    truncated: dict[str, int] = Field(
        default_factory=dict[str, int],
        description='what this answer clipped: a field\'s path ("text", "extras.notes", '
        '"context_nodes[2].text") and its full length in characters; empty when whole. '
        'Ask for `fields` (or ["*"]) to have them whole.',
    )
