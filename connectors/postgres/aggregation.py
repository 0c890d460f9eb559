"""Aggregates on PostgreSQL: one parameterised GROUP BY statement, or None when it cannot be exact.

The same statement as on SQLite (`connectors.sqlite.aggregation`, whose module doc states
the semantics): current visible states of the searchable types satisfying the whole tree,
relation leaves as EXISTS over the visible neighbours along current edges, grouped by own
values, by each distinct value among those neighbours, and by the calendar period of a time.

Exactness. `tree_sql` relaxes one thing on PostgreSQL: numbers of magnitude 2**53 or more
compared with a bound that large. It does so in the leaf's polarity, so a leaf compiled
differently in positive and negative position is refused (None), and the planner counts in
Python. Text PostgreSQL cannot hold is in no stored row, which `tree_sql` already turns into
exact conditions.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from decimal import Decimal
from typing import Any

from connectors.contract.aggregation import (
    TIMESTAMP,
    AggregateGroup,
    GroupKey,
    MetricKind,
    StateAggregates,
    StateAggregation,
    TimeBucket,
    regroup,
)
from connectors.contract.filter_tree import AllOf, AnyOf, FilterNode, Not, RelationPredicate
from connectors.contract.predicates import Predicate
from connectors.contract.records import OPEN
from connectors.postgres.filter_sql import storable, tree_sql

Select = Callable[[str, Mapping[str, Any]], Awaitable[list[Any]]]

_OWN = "t.filter_values"
_NEIGHBOUR = "n.filter_values"


class _Params:
    """Named parameters, each `%(a<n>)s`, in one dict."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.leaves = 0

    def add(self, value: Any, cast: str = "") -> str:
        name = f"a{len(self.values)}"
        self.values[name] = value
        return f"%({name})s{cast}"

    def leaf(self, leaf: Predicate, column: str) -> str | None:
        """The leaf's exact condition, or None when `tree_sql` relaxes it (see above)."""
        prefix = f"l{self.leaves}_"
        self.leaves += 1
        positive: dict[str, Any] = {}
        negative: dict[str, Any] = {}
        condition = tree_sql(leaf, column, positive, prefix)
        negated = tree_sql(Not(child=leaf), column, negative, prefix)
        if positive != negative or negated != f"(NOT {condition})":
            return None
        self.values.update(positive)
        return condition


def _cleared(alias: str, aggregation: StateAggregation, params: _Params) -> str:
    """`alias` is a current state the aggregation's clearance allows (THE rule)."""
    a = alias
    text = (
        f"{a}.valid_to = {OPEN} AND NOT {a}.tombstone AND {a}.sensitivity_rank >= 0 "
        f"AND {a}.sensitivity_rank <= {params.add(aggregation.max_sensitivity_rank)}"
    )
    if aggregation.all_projects:
        return text
    projects = [p for p in aggregation.projects if storable(p)]
    return text + f" AND ({a}.scope IS NULL OR {a}.scope = ANY({params.add(projects, '::text[]')}))"


def _edges(
    relation: str, direction: str, aggregation: StateAggregation, params: _Params
) -> tuple[str, str]:
    """(this end's column, `FROM ... WHERE ...` of the visible neighbours along `relation`)."""
    this, other = ("source_id", "target_id") if direction == "out" else ("target_id", "source_id")
    return this, (
        f"FROM edges e JOIN states n ON n.element_id = e.{other} "
        f"WHERE e.relation = {params.add(relation)} AND e.valid_to = {OPEN} AND "
        + _cleared("n", aggregation, params)
    )


def _tree(node: FilterNode, aggregation: StateAggregation, params: _Params) -> str | None:
    match node:
        case Predicate():
            return params.leaf(node, _OWN)
        case RelationPredicate():
            if not storable(node.relation):
                return "false"  # no stored edge has such a relation
            this, edges = _edges(node.relation, node.direction, aggregation, params)
            predicate = params.leaf(node.predicate, _NEIGHBOUR)
            if predicate is None:
                return None
            return f"EXISTS (SELECT 1 {edges} AND e.{this} = t.element_id AND {predicate})"
        case AllOf() | AnyOf():
            if not node.children:
                return "true" if isinstance(node, AllOf) else "false"
            parts: list[str] = []
            for child in node.children:
                compiled = _tree(child, aggregation, params)
                if compiled is None:
                    return None
                parts.append(compiled)
            return "(" + (" AND " if isinstance(node, AllOf) else " OR ").join(parts) + ")"
        case Not():
            compiled = _tree(node.child, aggregation, params)
            return None if compiled is None else f"(NOT {compiled})"


def _own_value(field: str, kind: MetricKind, params: _Params) -> str:
    """A state's value of `field` if it is of `kind` (as numeric), else NULL."""
    if field == TIMESTAMP:
        return "t.timestamp_ms::numeric"
    value = f"({_OWN} -> {params.add(field)})"
    number = f"jsonb_typeof({value}) = 'number'"
    if kind == "integer":  # as JSON wrote it: `3`, not `3.0`
        number += f" AND scale({value}::numeric) = 0"
    return f"(CASE WHEN {number} THEN {value}::numeric END)"


def _day(bucket: TimeBucket, params: _Params) -> str:
    """The UTC day of the state's time (`day_of`), NULL without one; periods come after."""
    value = f"({_own_value(bucket.field, 'integer', params)})::bigint"
    if bucket.days:
        return value
    return f"({value} / 86400000 - (mod({value}, 86400000) < 0)::int)"  # floor division


def _neighbour_values(key: GroupKey, aggregation: StateAggregation, params: _Params) -> str:
    """(id, JSON text) of each visible neighbour along the key's relation that has a value."""
    assert key.relation is not None  # noqa: S101 - only relation keys come here
    field = params.add(key.field)
    this, edges = _edges(key.relation, key.direction, aggregation, params)
    return (
        f"SELECT e.{this} AS id, ({_NEIGHBOUR} -> {field})::text AS v {edges} "
        f"AND jsonb_typeof({_NEIGHBOUR} -> {field}) <> 'null'"
    )


def aggregate_sql(aggregation: StateAggregation) -> tuple[str, dict[str, Any]] | None:
    """The statement and its named parameters, or None when it could not be exact.

    Rows: the group key values (JSON text), the day (`day_of`), the count, the metric's
    minimum, maximum, sum and number, and the number of distinct states matched (None
    without relation keys).
    """
    params = _Params()
    keys = aggregation.group_by
    own = "".join(
        f"({_OWN} -> {params.add(key.field)})::text AS k{n}, "
        for n, key in enumerate(keys)
        if key.relation is None
    )
    bucket = "NULL::bigint" if aggregation.temporal is None else _day(aggregation.temporal, params)
    metric = "NULL::numeric"
    if aggregation.metric_field is not None:
        metric = _own_value(aggregation.metric_field, aggregation.metric_kind, params)
    condition = _tree(aggregation.tree, aggregation, params)
    if condition is None:
        return None
    types = [t for t in aggregation.element_types if storable(t)]
    # Only fixed fragments are formatted in; every value is a parameter.
    matches = (
        f"SELECT t.element_id AS eid, {own}{bucket} AS b, {metric} AS mv FROM states t "  # noqa: S608
        f"WHERE {_cleared('t', aggregation, params)} "
        f"AND t.element_type = ANY({params.add(types, '::text[]')}) AND {condition}"
    )
    names = ", ".join([*(f"k{n}" for n in range(len(keys))), "b"])
    total = "sum(mv)" if aggregation.metric_total else "NULL::numeric"
    measures = f"count(*), min(mv), max(mv), {total}, count(mv)"
    if all(key.relation is None for key in keys):
        sql = f"SELECT {names}, {measures}, NULL::bigint FROM ({matches}) m GROUP BY {names}"  # noqa: S608
        return sql, params.values
    columns = ""
    joins = ""
    for n, key in enumerate(keys):
        if key.relation is None:
            columns += f", h.k{n} AS k{n}"
        else:
            columns += f", g{n}.v AS k{n}"
            joins += f" LEFT JOIN ({_neighbour_values(key, aggregation, params)}) g{n} "
            joins += f"ON g{n}.id = h.eid"
    sql = (
        f"WITH h AS MATERIALIZED ({matches}) "  # noqa: S608
        f"SELECT {names}, {measures}, (SELECT count(*) FROM h) FROM ("
        f"SELECT DISTINCT h.eid, h.b, h.mv{columns} FROM h{joins}) d GROUP BY {names}"
    )
    return sql, params.values


def _number(value: Decimal | None, kind: MetricKind) -> int | float | None:
    """A numeric as Python reads the JSON number: an integer when it is one, else a float.

    (An integer metric's values and sums are integers; a float field's values become floats
    again when the answer is shown, so `1.0` read back as `1` changes nothing.)
    """
    if value is None:
        return None
    if kind == "integer" or value == value.to_integral_value():
        return int(value)
    return float(value)


def _key(text: str | None) -> Any:
    return None if text is None else json.loads(text)


async def aggregate_states(select: Select, aggregation: StateAggregation) -> StateAggregates | None:
    """The aggregates of `aggregation` through `select` (the connector's reader), or None."""
    compiled = aggregate_sql(aggregation)
    if compiled is None:
        return None
    rows = await select(*compiled)
    width = len(aggregation.group_by)
    kind = aggregation.metric_kind
    days = [
        (
            tuple(_key(text) for text in row[:width]),
            None if row[width] is None else int(row[width]),
            AggregateGroup(
                keys=(),
                bucket=None,
                count=int(row[width + 1]),
                minimum=_number(row[width + 2], kind),
                maximum=_number(row[width + 3], kind),
                total=_number(row[width + 4], kind),
                present=int(row[width + 5]),
            ),
        )
        for row in rows
    ]
    temporal = aggregation.temporal
    groups = regroup(days, None if temporal is None else temporal.unit)
    distinct = rows[0][width + 6] if rows else None
    matched = sum(g.count for g in groups) if distinct is None else int(distinct)
    return StateAggregates(groups=groups, matched=matched)


__all__ = ["aggregate_sql", "aggregate_states"]
