"""The `aggregate` agent tool: counts (and min, max, avg) of what the caller may see, by group.

Like every tool it reads the clearance from the deps, never from its arguments; a bad field
comes back as a `UserError` naming it (a retry for pydantic-ai, an error result over MCP).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field

from connectors.contract.aggregation import TimeUnit
from uda.agent import discovery
from uda.agent.deps import UDADeps
from uda.agent.models import FilterSpec
from uda.errors import MissingCapabilityError
from uda.query.aggregates import AggregateRequest, AggregateResponse, Metric, aggregate_request
from uda.query.aggregates.plan import ColumnKind

MAX_ROWS = 200
"""Rows an answer shows; the rest are counted in `groups` and flagged `truncated`."""


class AggregateArgs(BaseModel):
    """Count elements by group and period, or take the min, max or average of a field."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    query: str | None = Field(
        default=None,
        min_length=1,
        max_length=4000,
        description="Optional: aggregate only the top_n results of this search.",
    )
    filters: dict[str, FilterSpec] = Field(
        default_factory=dict[str, FilterSpec],
        description="Flat filters, as for search: {field: value}, {field: [v1, v2]}, "
        '{field: {"$gte": v}}.',
    )
    where: dict[str, Any] | None = Field(
        default=None, description="A filter tree, as for search's where (ANDed with filters)."
    )
    group_by: list[str] = Field(
        default_factory=list[str],
        max_length=3,
        description='Up to 3 fields or relation paths to group by: "status", "element_type", '
        '"partOf.name" (the repository), "~governedBy.name". An element with several such '
        "neighbours counts in each of their groups; with none, in the null group.",
    )
    period: TimeUnit | None = Field(
        default=None, description="Also group by calendar period (UTC) of time_field."
    )
    time_field: str = Field(
        default="timestamp", description="The datetime or date field period reads."
    )
    metric: Metric = Field(default="count", description="count, or min/max/avg of metric_field.")
    metric_field: str | None = Field(
        default=None, description="The number, datetime or date field min, max and avg read."
    )
    cumulative: bool = Field(
        default=False, description="Running values over the periods (needs period)."
    )
    top_n: int | None = Field(
        default=None, ge=1, le=1000, description="With query: how many top results (100)."
    )
    element_types: list[str] | None = Field(
        default=None, description="Only these searchable element types."
    )


class AggregateColumnInfo(BaseModel):
    """One column of the answer."""

    name: str
    kind: ColumnKind


class AggregateAnswer(BaseModel):
    """Groups with their counts (and metric), only over what the caller may see."""

    columns: list[AggregateColumnInfo]
    rows: list[dict[str, Any]]
    matched: int = Field(description="How many visible elements were counted.")
    groups: int = Field(description="How many groups there are (rows may show fewer).")
    truncated: bool = Field(default=False, description=f"Only the first {MAX_ROWS} shown.")
    note: str | None = None


def _request(deps: UDADeps, args: AggregateArgs) -> AggregateRequest:
    discovery.check_filter_fields(args.filters)
    filters: dict[str, Any] = dict(args.filters)
    if args.where:
        filters = {"$and": [dict(args.where), filters]} if filters else dict(args.where)
    options: dict[str, Any] = {
        "group_by": list(args.group_by),
        "metric": args.metric,
        "cumulative": args.cumulative,
    }
    if args.metric_field is not None:
        options["metric_field"] = args.metric_field
    if args.period is not None:
        options["temporal"] = (args.time_field, args.period)
    if args.top_n is not None:
        options["top_n"] = args.top_n
    if args.element_types is not None:
        options["element_types"] = list(args.element_types)
    return aggregate_request(args.query, deps.clearance, filters, **options)


async def _run(deps: UDADeps, request: AggregateRequest) -> AggregateResponse:
    run = getattr(deps.client, "run_aggregate", None)
    if run is None:
        raise MissingCapabilityError(
            "this client cannot aggregate; use a uda client", field="client", value=None
        )
    if inspect.iscoroutinefunction(run):
        answer = cast("Callable[[AggregateRequest], Awaitable[AggregateResponse]]", run)
        return await answer(request)
    blocking = cast("Callable[[AggregateRequest], AggregateResponse]", run)
    return await asyncio.to_thread(blocking, request)


async def aggregate(deps: UDADeps, args: AggregateArgs) -> AggregateAnswer:
    """Count the caller's visible matches by group (and period), or a metric per group.

    Raises:
        UserError: a bad filter, group key, period field or metric field, naming it.
    """
    response = await _run(deps, _request(deps, args))
    shown = response.rows[:MAX_ROWS]
    truncated = len(response.rows) > MAX_ROWS
    note = None
    if not response.rows:
        note = "Nothing you may see matched: an empty answer is not proof that nothing exists."
    elif truncated:
        note = f"{len(response.rows)} groups; narrow the filters or group by less to see all."
    return AggregateAnswer(
        columns=[AggregateColumnInfo(name=c.name, kind=c.kind) for c in response.columns],
        rows=shown,
        matched=response.matched,
        groups=len(response.rows),
        truncated=truncated,
        note=note,
    )


DESCRIPTION = (
    "Count elements matching filters by groups (fields or relation paths such as "
    '"partOf.name") and calendar periods, or take the min, max or average of a number or '
    'date field per group: "how many accepted decisions per month, per repository". Only '
    "what the caller may see is counted; groups of hidden elements do not exist."
)

__all__ = ["DESCRIPTION", "AggregateAnswer", "AggregateArgs", "aggregate"]
