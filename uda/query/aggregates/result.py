"""The answer to an aggregate: typed columns, JSON-ready rows, an Arrow table.

Both ways of counting (the statement in the system of record, and Python over the states)
produce the same partial aggregates per (group key values, bucket), and this module alone
turns them into rows, so the two answers are identical by construction once their partials
are.

Columns, in order: one per group key (named as the request spells it), `bucket` (the ISO
date a period starts) when `temporal` is given, `count`, the metric (`min`, `max` or `avg`)
when it is not `count`, and `cumulative` when running values are asked for. Rows are sorted
by the group keys, then the bucket, a missing value (null) after every present one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa

from connectors.contract.aggregation import AggregateGroup
from connectors.contract.predicates import Scalar
from uda.query.aggregates.plan import AggregatePlan, ColumnKind

Number = int | float
GroupId = tuple[tuple[Scalar | None, ...], str | None]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DAY = date(1970, 1, 1)


@dataclass(kw_only=True)
class Partial:
    """One group's running aggregate: what both ways of counting produce."""

    count: int = 0
    minimum: Number | None = None
    maximum: Number | None = None
    total: Number | None = None
    present: int = 0
    values: list[float] | None = None
    """Every float metric value, for an exact average (the Python path keeps them)."""

    def add(self, value: Number | None, *, keep: bool) -> None:
        """Count one match whose metric value is `value` (None: it has none)."""
        self.count += 1
        if value is None:
            return
        self.present += 1
        self.minimum = value if self.minimum is None else min(self.minimum, value)
        self.maximum = value if self.maximum is None else max(self.maximum, value)
        self.total = value if self.total is None else self.total + value
        if keep:
            if self.values is None:
                self.values = []
            self.values.append(float(value))

    def merge(self, other: Partial) -> Partial:
        """The partial of both groups' matches together (for running values)."""
        merged = Partial(
            count=self.count + other.count,
            present=self.present + other.present,
            minimum=_pick(min, self.minimum, other.minimum),
            maximum=_pick(max, self.maximum, other.maximum),
            total=_pick(_add, self.total, other.total),
        )
        if self.values is not None or other.values is not None:
            merged.values = [*(self.values or ()), *(other.values or ())]
        return merged

    @classmethod
    def of(cls, group: AggregateGroup) -> Partial:
        """A group as a system of record reported it."""
        return cls(
            count=group.count,
            minimum=group.minimum,
            maximum=group.maximum,
            total=group.total,
            present=group.present,
        )


def _add(a: Number, b: Number) -> Number:
    return a + b


def _pick(how: Any, a: Number | None, b: Number | None) -> Number | None:
    if a is None:
        return b
    if b is None:
        return a
    return how(a, b)


@dataclass(frozen=True, kw_only=True)
class AggregateColumn:
    """One column of the answer: its name and the kind of its values."""

    name: str
    kind: ColumnKind


_ARROW: dict[ColumnKind, pa.DataType] = {
    "string": pa.string(),
    "integer": pa.int64(),
    "float": pa.float64(),
    "boolean": pa.bool_(),
    "datetime": pa.timestamp("ms", tz="UTC"),
    "date": pa.date32(),
}


@dataclass(kw_only=True)
class AggregateResponse:
    """An aggregate's answer.

    Attributes:
        columns: the columns, in order, with their kinds.
        rows: one dict per group (column name -> JSON value; datetimes and dates as ISO
            strings), sorted as the module doc says.
        matched: how many distinct visible matches were counted (an element with several
            neighbour values counts in several groups, once here).
        path: `"pushdown"` (one statement in the system of record) or `"python"`.
        clearance: the clearance entries the aggregate ran with.
        timings_ms: where the time went.
    """

    columns: list[AggregateColumn]
    rows: list[dict[str, Any]]
    matched: int
    path: str
    clearance: list[str]
    timings_ms: dict[str, float] = field(default_factory=dict[str, float])

    def to_arrow(self) -> pa.Table:
        """The rows as an Arrow table typed by the columns' kinds."""
        arrays = [
            pa.array([_arrow_value(row[c.name], c.kind) for row in self.rows], _ARROW[c.kind])
            for c in self.columns
        ]
        schema = pa.schema([pa.field(c.name, _ARROW[c.kind]) for c in self.columns])
        return pa.Table.from_arrays(arrays, schema=schema)  # pyright: ignore[reportUnknownMemberType]

    def to_dict(self) -> dict[str, Any]:
        """The answer as JSON-ready data (what the HTTP service sends)."""
        return {
            "columns": [{"name": c.name, "kind": c.kind} for c in self.columns],
            "rows": [dict(row) for row in self.rows],
            "matched": self.matched,
            "path": self.path,
            "clearance": list(self.clearance),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AggregateResponse:
        """The inverse of `to_dict` (what the remote client reads)."""
        return cls(
            columns=[AggregateColumn(name=c["name"], kind=c["kind"]) for c in data["columns"]],
            rows=[dict(row) for row in data["rows"]],
            matched=int(data["matched"]),
            path=str(data["path"]),
            clearance=list(data.get("clearance") or []),
        )


def _arrow_value(value: Any, kind: ColumnKind) -> Any:
    if value is None:
        return None
    if kind == "datetime":
        return datetime.fromisoformat(value)
    if kind == "date":
        return date.fromisoformat(value)
    return value


def key_value(value: Any, kind: ColumnKind) -> Scalar | None:
    """A group key value, as both ways of counting must present it before grouping.

    JSON decoders differ on numbers (PostgreSQL writes `1e300` out in full, which Python reads
    as an integer): a float field's values are floats here, whatever the decoder made.
    """
    if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _shown(value: Scalar | None, kind: ColumnKind) -> Any:
    """A stored (normalised) value as a row shows it: times as ISO strings."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if kind == "datetime" and isinstance(value, int):
        moment = _EPOCH + timedelta(milliseconds=value)
        return moment.isoformat(timespec="milliseconds")
    if kind == "date" and isinstance(value, int):
        return (_EPOCH_DAY + timedelta(days=value)).isoformat()
    if kind == "float":
        return float(value)
    return value


def _metric(plan: AggregatePlan, partial: Partial) -> Any:
    """The metric of one group (or of a running total), as a row shows it."""
    metric = plan.request.metric
    if metric == "count":
        return partial.count
    kind = plan.metric_column or "float"
    if partial.present == 0:
        return None
    if metric == "min":
        return _shown(partial.minimum, kind)
    if metric == "max":
        return _shown(partial.maximum, kind)
    if kind in ("datetime", "date"):  # the mean instant, rounded down to the unit
        assert isinstance(partial.total, int)  # noqa: S101 - integer metrics sum to ints
        return _shown(partial.total // partial.present, kind)
    if partial.values is not None:  # floats: their exactly rounded sum, in any order
        return math.fsum(partial.values) / partial.present
    return (partial.total or 0) / partial.present  # integers: an exact sum


def columns_of(plan: AggregatePlan) -> list[AggregateColumn]:
    """The answer's columns (see the module doc)."""
    request = plan.request
    out = [
        AggregateColumn(name=path, kind=k.kind)
        for path, k in zip(request.group_by, plan.keys, strict=True)
    ]
    if request.temporal is not None:
        out.append(AggregateColumn(name="bucket", kind="date"))
    out.append(AggregateColumn(name="count", kind="integer"))
    value_kind: ColumnKind = "integer"
    if request.metric != "count":
        value_kind = plan.metric_column or "float"
        out.append(AggregateColumn(name=request.metric, kind=value_kind))
    if request.cumulative:
        out.append(AggregateColumn(name="cumulative", kind=value_kind))
    return out


def _order(value: Any) -> tuple[int, str, Any]:
    """Sort present values first (by kind, then value), missing ones last."""
    if value is None:
        return (1, "", 0)
    return (0, type(value).__name__, value)


def answer(
    plan: AggregatePlan,
    partials: Mapping[GroupId, Partial],
    *,
    matched: int,
    path: str,
    clearance: Sequence[str],
) -> AggregateResponse:
    """The rows of the non-empty groups, sorted, with running values where asked."""
    request = plan.request
    ordered = sorted(
        ((keys, bucket, p) for (keys, bucket), p in partials.items() if p.count > 0),
        key=lambda item: (tuple(_order(v) for v in item[0]), _order(item[1])),
    )
    rows: list[dict[str, Any]] = []
    running: dict[tuple[Scalar | None, ...], Partial] = {}
    for keys, bucket, partial in ordered:
        row: dict[str, Any] = {
            path_: _shown(value, k.kind)
            for path_, value, k in zip(request.group_by, keys, plan.keys, strict=True)
        }
        if request.temporal is not None:
            row["bucket"] = bucket
        row["count"] = partial.count
        if request.metric != "count":
            row[request.metric] = _metric(plan, partial)
        if request.cumulative:
            if bucket is None:  # no time: not part of any running value
                row["cumulative"] = None
            else:
                so_far = running.get(keys)
                so_far = partial if so_far is None else so_far.merge(partial)
                running[keys] = so_far
                row["cumulative"] = _metric(plan, so_far)
        rows.append(row)
    return AggregateResponse(
        columns=columns_of(plan),
        rows=rows,
        matched=matched,
        path=path,
        clearance=list(clearance),
    )


def partials_of(groups: Iterable[AggregateGroup], plan: AggregatePlan) -> dict[GroupId, Partial]:
    """A system of record's groups as partials, keyed as the Python path keys them."""
    out: dict[GroupId, Partial] = {}
    for group in groups:
        keys = tuple(key_value(v, k.kind) for v, k in zip(group.keys, plan.keys, strict=True))
        partial = Partial.of(group)
        known = out.get((keys, group.bucket))
        out[(keys, group.bucket)] = partial if known is None else known.merge(partial)
    return out


__all__ = [
    "AggregateColumn",
    "AggregateResponse",
    "GroupId",
    "Partial",
    "answer",
    "columns_of",
    "key_value",
    "partials_of",
]
