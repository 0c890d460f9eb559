"""Aggregates: counts, extremes and averages of the visible matches by group (ADR 24).

`AggregateRequest` says what to count; `uda.query.aggregates.engine.Aggregator` answers it
(one statement in the system of record when that is exact, else the reference count in
Python); `AggregateResponse` holds the typed rows and their Arrow table. The engine is not
imported here, so that a remote client reading answers does not load the planner.
"""

from __future__ import annotations

from uda.query.aggregates.request import (
    AggregateOptions,
    AggregateRequest,
    Metric,
    aggregate_request,
)
from uda.query.aggregates.result import AggregateColumn, AggregateResponse

__all__ = [
    "AggregateColumn",
    "AggregateOptions",
    "AggregateRequest",
    "AggregateResponse",
    "Metric",
    "aggregate_request",
]
