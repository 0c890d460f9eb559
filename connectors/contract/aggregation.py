"""Aggregates from the system of record: counts and extremes by group, in one statement.

`RelationalCapable.aggregate_states` answers a `StateAggregation` with one group per
distinct (group key values, time bucket) among the matching states, or None when the store
cannot answer *exactly* (the planner then counts in Python, over the same states it would
return). "Exactly" is the point: an aggregate is only pushed down when the statement
selects the states that THE visibility rule (`uda.query.clearance.state_visible`) and the
reference evaluator (`filter_tree.evaluate`) would select, and groups them as the reference
functions below do.

What a store must select, for current states only (an `as_of` answer is never pushed down):

- the current state of each element (its newest, so "the state read and the newest state
  are visible" is one check), not a tombstone, with `0 <= sensitivity_rank <=
  max_sensitivity_rank` and a scope that is null, or one of `projects`, or any when
  `all_projects`; of one of `element_types`;
- satisfying `tree` as `evaluate` does, a relation leaf reading the neighbours one current
  edge away (in the leaf's direction) whose current state the same clearance allows;
- grouped by each `GroupKey`: an own key by the state's filter value (missing: None); a
  relation key by each distinct present value of the field among those visible
  neighbours, so that a state counts once in each (None when it has none);
- and by `temporal` (`bucket_of`), with the count, and over `metric_field` the minimum,
  maximum, sum and number of the values of `metric_kind` (`metric_value`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Literal

from connectors.contract.filter_tree import Direction, FilterNode
from connectors.contract.predicates import Scalar

TimeUnit = Literal["day", "week", "month", "quarter", "year"]
TIME_UNITS: tuple[TimeUnit, ...] = ("day", "week", "month", "quarter", "year")
MetricKind = Literal["number", "integer"]
"""What counts as a metric value: any number (not a boolean), or integers only (the epoch
milliseconds of datetimes, the epoch days of dates)."""

TIMESTAMP = "timestamp"
"""The field read from the state's `timestamp_ms` column (equal to its filter value)."""
DAY_MS = 86_400_000
_EPOCH = date(1970, 1, 1)


@dataclass(frozen=True, kw_only=True)
class GroupKey:
    """One group key: an own field, or a field of the neighbours along a relation."""

    field: str
    relation: str | None = None
    direction: Direction = "out"

    @property
    def path(self) -> str:
        """The key as the grammar spells it: `status`, `partOf.name`, `~governedBy.name`."""
        if self.relation is None:
            return self.field
        return f"{'~' if self.direction == 'in' else ''}{self.relation}.{self.field}"


@dataclass(frozen=True, kw_only=True)
class TimeBucket:
    """Bucket states by the calendar period (UTC) of a datetime or date field."""

    field: str
    unit: TimeUnit
    days: bool = False
    """The field holds epoch days (a date); else epoch milliseconds (a datetime)."""


@dataclass(frozen=True, kw_only=True)
class StateAggregation:
    """What to count, as the system of record is asked for it (see the module doc)."""

    max_sensitivity_rank: int
    projects: tuple[str, ...]
    all_projects: bool
    element_types: tuple[str, ...]
    tree: FilterNode
    group_by: tuple[GroupKey, ...] = ()
    temporal: TimeBucket | None = None
    metric_field: str | None = None
    metric_kind: MetricKind = "number"
    metric_total: bool = False
    """Whether the sum of the metric values is wanted (an average): else `total` is None."""


@dataclass(frozen=True, kw_only=True)
class AggregateGroup:
    """One group's partial aggregate.

    `keys` are the group key values in `group_by` order, as JSON decodes them (None: no
    value); `bucket` the ISO date the period starts (None: no time, or no temporal key).
    `minimum`, `maximum` and `total` are over the `present` metric values (None when none).
    """

    keys: tuple[Scalar | None, ...]
    bucket: str | None
    count: int
    minimum: int | float | None = None
    maximum: int | float | None = None
    total: int | float | None = None
    present: int = 0


@dataclass(frozen=True, kw_only=True)
class StateAggregates:
    """Every non-empty group, and how many distinct states matched."""

    groups: tuple[AggregateGroup, ...]
    matched: int


def day_of(value: object, bucket: TimeBucket) -> int | None:
    """The UTC day (days since 1970-01-01) of a time value; None when it is no time.

    Only an integer (not a boolean) is a time: epoch milliseconds, floored to their day, or
    epoch days. A store may group by this day and leave the periods to `regroup`.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if bucket.days else value // DAY_MS


def period_of(day: int | None, unit: TimeUnit) -> str | None:
    """The ISO date (`YYYY-MM-DD`) the period holding `day` starts; None without one.

    A week starts on Monday (ISO 8601); a quarter on January, April, July or October 1.
    """
    if day is None:
        return None
    try:
        moment = _EPOCH + timedelta(days=day)
    except OverflowError:
        return None
    match unit:
        case "day":
            start = moment
        case "week":
            start = moment - timedelta(days=moment.weekday())
        case "month":
            start = moment.replace(day=1)
        case "quarter":
            start = moment.replace(month=(moment.month - 1) // 3 * 3 + 1, day=1)
        case "year":
            start = moment.replace(month=1, day=1)
    return start.isoformat()


def bucket_of(value: object, bucket: TimeBucket) -> str | None:
    """The ISO date the UTC period of a time value starts (`day_of`, then `period_of`)."""
    return period_of(day_of(value, bucket), bucket.unit)


def regroup(
    groups: Iterable[tuple[tuple[Scalar | None, ...], int | None, AggregateGroup]],
    unit: TimeUnit | None,
) -> tuple[AggregateGroup, ...]:
    """Groups a store made by (keys, day) merged into groups by (keys, period of `unit`).

    Counting by day and merging in Python gives what grouping by period would, exactly
    (counts and integer sums add, extremes take the extreme), and keeps calendar arithmetic
    out of SQL. `unit` None: no time key (the days are None).
    """
    merged: dict[tuple[tuple[Scalar | None, ...], str | None], AggregateGroup] = {}
    for keys, day, group in groups:
        bucket = None if unit is None else period_of(day, unit)
        known = merged.get((keys, bucket))
        if known is None:
            merged[(keys, bucket)] = replace(group, keys=keys, bucket=bucket)
            continue
        merged[(keys, bucket)] = AggregateGroup(
            keys=keys,
            bucket=bucket,
            count=known.count + group.count,
            minimum=_extreme(min, known.minimum, group.minimum),
            maximum=_extreme(max, known.maximum, group.maximum),
            total=_extreme(_plus, known.total, group.total),
            present=known.present + group.present,
        )
    return tuple(merged.values())


def _extreme(
    pick: Callable[[float, float], float], a: int | float | None, b: int | float | None
) -> int | float | None:
    if a is None or b is None:
        return b if a is None else a
    return pick(a, b)


def _plus(a: float, b: float) -> float:
    return a + b


def metric_value(value: object, kind: MetricKind) -> int | float | None:
    """`value` as a metric value of `kind`, or None when it is not one."""
    if isinstance(value, bool):
        return None
    if kind == "integer":
        return value if isinstance(value, int) else None
    return value if isinstance(value, int | float) else None


def own_value(field: str, values: Mapping[str, Scalar], timestamp_ms: int) -> Scalar | None:
    """A state's value of `field` for a time bucket or a metric (`timestamp`: its column)."""
    return timestamp_ms if field == TIMESTAMP else values.get(field)


__all__ = [
    "DAY_MS",
    "TIMESTAMP",
    "TIME_UNITS",
    "AggregateGroup",
    "GroupKey",
    "MetricKind",
    "StateAggregates",
    "StateAggregation",
    "TimeBucket",
    "TimeUnit",
    "bucket_of",
    "day_of",
    "metric_value",
    "own_value",
    "period_of",
    "regroup",
]
