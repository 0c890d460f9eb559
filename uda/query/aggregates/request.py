"""`AggregateRequest`: what to count, by what, over which matches (docs/adr/0024).

The filter, clearance, element types and time of a search (`SearchRequest`'s fields of the
same names and meanings); `group_by` keys, an optional calendar `temporal` key, a `metric`
over one field, and running totals. Without a query the aggregate is over every visible
match; with one, over the first `top_n` results of the ranked search.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal, TypedDict, Unpack

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from connectors.contract.aggregation import TimeUnit
from connectors.contract.predicates import INT64_MAX
from uda.hlc import from_datetime
from uda.query import bounds
from uda.query.contracts import copied_if, request_error

Metric = Literal["count", "min", "max", "avg"]
MAX_GROUP_KEYS = 3
DEFAULT_TOP_N = 100
MAX_TOP_N = 1000


class AggregateRequest(BaseModel):
    """One aggregate. Unset fields mean what they mean for `SearchRequest`."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    query: str | None = Field(default=None, min_length=1, max_length=4000)
    clearance_scope: list[str] = Field(default_factory=list[str])
    context_filters: dict[str, Any] = Field(default_factory=dict[str, Any])
    group_by: list[str] = Field(
        default_factory=list[str],
        max_length=MAX_GROUP_KEYS,
        description="Fields or relation paths (`status`, `partOf.name`, `~governedBy.name`).",
    )
    temporal: tuple[str, TimeUnit] | None = Field(
        default=None,
        description='A datetime or date field and a period: ["timestamp", "month"] (UTC).',
    )
    metric: Metric = "count"
    metric_field: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        validate_default=True,
        description="The number, datetime or date field `min`, `max` and `avg` read.",
    )
    cumulative: bool = Field(
        default=False, description="Running values over the temporal buckets of each group."
    )
    top_n: int = Field(
        default=DEFAULT_TOP_N,
        ge=1,
        le=MAX_TOP_N,
        description="With a query: aggregate its first top_n results.",
    )
    element_types: list[str] | None = None
    as_of: int | datetime | None = None

    @field_validator("query")
    @classmethod
    def _query_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("query must not be blank")
        return value

    @field_validator("group_by")
    @classmethod
    def _keys_once(cls, value: list[str]) -> list[str]:
        for key in value:
            if not 1 <= len(key) <= 200:
                raise ValueError("a group key has 1 to 200 characters")
        if len(set(value)) != len(value):
            raise ValueError("each group key at most once")
        return value

    @field_validator("metric_field")
    @classmethod
    def _metric_needs_field(cls, value: str | None, info: ValidationInfo) -> str | None:
        metric = info.data.get("metric")
        if metric == "count" and value is not None:
            raise ValueError("count counts matches and reads no field; leave metric_field out")
        if metric in ("min", "max", "avg") and value is None:
            raise ValueError(f"{metric} needs the field it reads")
        return value

    @field_validator("cumulative")
    @classmethod
    def _cumulative_needs_time(cls, value: bool, info: ValidationInfo) -> bool:
        # When temporal itself is invalid it is not in `info.data`; its own error is reported.
        if value and "temporal" in info.data and info.data["temporal"] is None:
            raise ValueError("running values run over time: give temporal too")
        return value

    @field_validator("top_n", mode="before")
    @classmethod
    def _top_n_not_a_bool(cls, value: object) -> object:
        if isinstance(value, bool):
            raise ValueError("expected an integer, not a boolean")
        return value

    @field_validator("top_n")
    @classmethod
    def _top_n_with_a_query(cls, value: int, info: ValidationInfo) -> int:
        if "query" in info.data and info.data["query"] is None:
            raise ValueError("top_n bounds a ranked aggregate: give a query too")
        return value

    @field_validator("as_of")
    @classmethod
    def _as_of_on_the_clock(cls, value: int | datetime | None) -> int | datetime | None:
        if isinstance(value, datetime):
            from_datetime(value)
        elif value is not None and not 0 <= value <= INT64_MAX:
            raise ValueError("an HLC stamp is a non-negative 64-bit integer")
        return value

    @classmethod
    def build(cls, **fields: Any) -> AggregateRequest:
        """Validate, raising `InvalidRequestError` that names the first bad field and value."""
        bounds.check(fields)  # first: nothing below walks a value beyond the bounds
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise request_error(exc) from None


class AggregateOptions(TypedDict, total=False):
    """The optional fields of an aggregate as keyword arguments (every client takes them)."""

    group_by: Iterable[str]
    temporal: tuple[str, TimeUnit]
    metric: Metric
    metric_field: str
    cumulative: bool
    top_n: int
    element_types: list[str]
    as_of: int | datetime


def aggregate_request(
    query: str | None = None,
    clearance_scope: Iterable[str] | None = None,
    context_filters: Mapping[str, Any] | None = None,
    **options: Unpack[AggregateOptions],
) -> AggregateRequest:
    """The keyword form of every client's `aggregate`, as one validated request.

    `clearance_scope=None` leaves the field unset, as for `search_request`: `public` only on
    the embedded client, the whole grant over HTTP.

    Raises:
        InvalidRequestError: naming the first bad field and value.
    """
    filters: Any = {} if context_filters is None else copied_if(context_filters, Mapping, dict)
    fields: dict[str, Any] = {"query": query, "context_filters": filters}
    fields.update(options)
    if "group_by" in fields:
        fields["group_by"] = copied_if(fields["group_by"], Iterable, list)
    if "temporal" in fields and isinstance(fields["temporal"], list):
        fields["temporal"] = tuple(fields["temporal"])  # pyright: ignore[reportUnknownArgumentType]
    if clearance_scope is not None:
        fields["clearance_scope"] = copied_if(clearance_scope, Iterable, list)
    return AggregateRequest.build(**fields)


__all__ = [
    "DEFAULT_TOP_N",
    "MAX_GROUP_KEYS",
    "MAX_TOP_N",
    "AggregateOptions",
    "AggregateRequest",
    "Metric",
    "aggregate_request",
]
