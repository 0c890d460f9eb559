"""An aggregate resolved against the ontology: which fields, of which kinds, read how.

Group keys, the time field and the metric field are checked against the filter grammar's
field catalogue (`uda.query.filters.filterable_fields`) and relation paths against the
registered relations; a bad one is an `InvalidAggregateError` naming the field of the
request (`group_by.0`, `temporal`, `metric_field`) and the nearest valid name.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from datetime import date, datetime
from enum import Enum
from typing import Any, Literal

from connectors.contract.aggregation import GroupKey, MetricKind, TimeBucket
from connectors.contract.filter_tree import Direction
from ontology import relation_spec, relation_types
from uda.errors import InvalidAggregateError
from uda.query.aggregates.request import AggregateRequest
from uda.query.filters.fields import base_type, filterable_fields, suggest

ColumnKind = Literal["string", "integer", "float", "boolean", "datetime", "date"]
"""How a column's values are typed: in rows (JSON values; datetimes and dates as ISO
strings) and in Arrow (string, int64, float64, bool, timestamp[ms, UTC], date32)."""


@dataclass(frozen=True, kw_only=True)
class KeyPlan:
    """One group key and the kind of its values."""

    key: GroupKey
    kind: ColumnKind


@dataclass(frozen=True, kw_only=True)
class AggregatePlan:
    """What the engine counts and how its answer is typed."""

    request: AggregateRequest
    keys: tuple[KeyPlan, ...]
    temporal: TimeBucket | None
    metric_kind: MetricKind = "number"
    metric_column: ColumnKind | None = None
    """The kind of the metric's values (`float`, `datetime` or `date`); None for count."""
    metric_is_float: bool = False
    """The metric field holds floats: their sum depends on the order it is taken in."""

    @property
    def metric_field(self) -> str | None:
        """The field `min`, `max` and `avg` read."""
        return self.request.metric_field

    @property
    def relation_keys(self) -> tuple[GroupKey, ...]:
        """The keys read from neighbours."""
        return tuple(k.key for k in self.keys if k.key.relation is not None)


def column_kind(annotation: Any) -> ColumnKind:
    """The kind of a field's values, from its annotation."""
    target = base_type(annotation)
    if isinstance(target, type) and issubclass(target, Enum):
        return "string"
    kinds: dict[object, ColumnKind] = {
        bool: "boolean",
        int: "integer",
        float: "float",
        datetime: "datetime",
        date: "date",
    }
    return kinds.get(typing.cast("object", target), "string")


def _fields_of(kinds: set[ColumnKind]) -> dict[str, ColumnKind]:
    found = {name: column_kind(a) for name, a in filterable_fields().items()}
    return {name: kind for name, kind in found.items() if kind in kinds}


def _field(name: str, where: str, known: dict[str, ColumnKind], what: str) -> ColumnKind:
    kind = known.get(name)
    if kind is None:
        raise InvalidAggregateError(
            f"{where}: no {what} named {name!r}{suggest(name, known)}; "
            f"{what}s: {', '.join(sorted(known))}",
            field=where,
            value=name,
        )
    return kind


def _group_key(path: str, where: str) -> KeyPlan:
    fields = _fields_of({"string", "integer", "float", "boolean", "datetime", "date"})
    if "." not in path and not path.startswith("~"):
        return KeyPlan(key=GroupKey(field=path), kind=_field(path, where, fields, "field"))
    direction: Direction = "in" if path.startswith("~") else "out"
    relation, _, name = path.removeprefix("~").partition(".")
    if relation_spec(relation) is None:
        raise InvalidAggregateError(
            f"{where}: unknown relation {relation!r} in {path!r}"
            f"{suggest(relation, relation_types())}; relations: {', '.join(relation_types())}",
            field=where,
            value=path,
        )
    if not name or "." in name:
        raise InvalidAggregateError(
            f"{where}: a relation path is relation.field (one hop), got {path!r}",
            field=where,
            value=path,
        )
    kind = _field(name, where, fields, "field")
    return KeyPlan(key=GroupKey(field=name, relation=relation, direction=direction), kind=kind)


def resolve(request: AggregateRequest) -> AggregatePlan:
    """Check the request's fields against the ontology and type its answer.

    Raises:
        InvalidAggregateError: a group key, time field or metric field that cannot be used,
            naming the request's field and the nearest valid name.
    """
    keys = tuple(_group_key(path, f"group_by.{n}") for n, path in enumerate(request.group_by))
    temporal: TimeBucket | None = None
    if request.temporal is not None:
        name, unit = request.temporal
        kind = _field(name, "temporal", _fields_of({"datetime", "date"}), "datetime or date field")
        temporal = TimeBucket(field=name, unit=unit, days=kind == "date")
    if request.metric_field is None:
        return AggregatePlan(request=request, keys=keys, temporal=temporal)
    numeric = _fields_of({"integer", "float", "datetime", "date"})
    kind = _field(request.metric_field, "metric_field", numeric, "number, datetime or date field")
    timed = kind in ("datetime", "date")
    return AggregatePlan(
        request=request,
        keys=keys,
        temporal=temporal,
        metric_kind="integer" if timed else "number",
        metric_column=kind if timed else "float",
        metric_is_float=kind == "float",
    )


__all__ = ["AggregatePlan", "ColumnKind", "KeyPlan", "column_kind", "resolve"]
