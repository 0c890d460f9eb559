"""Aggregates on SQLite: one parameterised GROUP BY statement, or None when it cannot be exact.

The statement selects the current, visible states of the searchable types that satisfy the
whole filter tree, relation leaves included (an EXISTS over the neighbours one current edge
away whose current state the same clearance allows), and groups them as
`connectors.contract.aggregation` says. Visibility is THE rule restated for current states
(the state read is the newest, so one check; `0 <= rank` included, as `allows_rank` hides a
rank off the scale).

Exactness. Every leaf of the tree is compiled by `tree_sql`, which relaxes what SQLite cannot
decide: to true in positive and false in negative position. A leaf whose compilation depends
on its polarity is therefore relaxed somewhere, and the whole aggregate is refused (None). The
one relaxation that depends on the row, not on the operands (a string comparison on a row
whose JSON holds NUL, which `json_extract` cuts), is turned into SQL NULL instead: on such a
row the tree is NULL exactly when its value depends on that leaf (Kleene's logic), such rows
are kept and flagged, and a flagged answer is refused too. So an answer is exact or absent.

The statement reads the covering partial index `states_aggregate` when nothing but the
clearance, the types and the timestamp are needed (the common "count by month").
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
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
from connectors.contract.filter_tree import (
    AllOf,
    AnyOf,
    FilterNode,
    Not,
    RelationPredicate,
)
from connectors.contract.predicates import Predicate
from connectors.contract.records import OPEN
from connectors.sql_filters import tree_sql

Select = Callable[[str, Sequence[Any]], Awaitable[list[Any]]]

_OWN = "t.filter_values"
_NEIGHBOUR = "n.filter_values"


@dataclass(frozen=True)
class _Sql:
    """A SQL fragment and its positional parameters, in order of appearance."""

    text: str
    params: tuple[Any, ...] = ()


def _cat(*parts: str | _Sql) -> _Sql:
    text: list[str] = []
    params: list[Any] = []
    for part in parts:
        if isinstance(part, str):
            text.append(part)
        else:
            text.append(part.text)
            params += part.params
    return _Sql("".join(text), tuple(params))


def _nul_case(column: str, unknown: str) -> str:
    """How `tree_sql` relaxes a string comparison on a row holding NUL (see its module)."""
    return f"(CASE WHEN instr({column}, '\\u0000') > 0 THEN {unknown} ELSE "


def exact_leaf(leaf: Predicate, column: str) -> tuple[_Sql, bool] | None:
    """The leaf's exact condition and whether it can be NULL (a row holding NUL), or None.

    None when `tree_sql` compiles the leaf differently in positive and in negative position
    for another reason than NUL: then it relaxes it on some rows, and the answer could be
    wrong.
    """
    positive, params = tree_sql(leaf, column)
    negated, negated_params = tree_sql(Not(child=leaf), column)
    if params != negated_params or not (negated.startswith("(NOT ") and negated.endswith(")")):
        return None
    unknown = _nul_case(column, "NULL")

    def nullable(text: str) -> str:
        return text.replace(_nul_case(column, "1"), unknown).replace(
            _nul_case(column, "0"), unknown
        )

    condition = nullable(positive)
    if condition != nullable(negated[len("(NOT ") : -1]):
        return None
    return _Sql(condition, tuple(params)), unknown in condition


def _cleared(alias: str, aggregation: StateAggregation) -> _Sql:
    """`alias` is a current state the aggregation's clearance allows (THE rule, see above)."""
    a = alias
    text = (
        f"{a}.valid_to = {OPEN} AND {a}.tombstone = 0 AND {a}.sensitivity_rank >= 0 "
        f"AND {a}.sensitivity_rank <= ?"
    )
    cleared = _Sql(text, (aggregation.max_sensitivity_rank,))
    if aggregation.all_projects:
        return cleared
    scope = f" AND ({a}.scope IS NULL OR {a}.scope IN (SELECT value FROM json_each(?)))"  # noqa: S608 - fixed fragments
    return _cat(cleared, _Sql(scope, (json.dumps(list(aggregation.projects)),)))


def _edges(relation: str, direction: str, aggregation: StateAggregation) -> tuple[str, _Sql]:
    """(this end's column, `FROM ... WHERE ...` of the visible neighbours along `relation`)."""
    this, other = ("source_id", "target_id") if direction == "out" else ("target_id", "source_id")
    joined = _cat(
        f"FROM edges e JOIN states n ON n.element_id = e.{other} "
        f"WHERE e.relation = ? AND e.valid_to = {OPEN} AND ",
        _cleared("n", aggregation),
    )
    return this, _Sql(joined.text, (relation, *joined.params))


def _related(leaf: RelationPredicate, aggregation: StateAggregation) -> tuple[_Sql, bool] | None:
    """The relation leaf: a visible neighbour along it satisfies its predicate."""
    compiled = exact_leaf(leaf.predicate, _NEIGHBOUR)
    if compiled is None:
        return None
    predicate, nullable = compiled
    this, edges = _edges(leaf.relation, leaf.direction, aggregation)
    where = _cat(edges, f" AND e.{this} = t.element_id")
    if not nullable:
        return _cat("EXISTS (SELECT 1 ", where, " AND ", predicate, ")"), False
    # 1 if a neighbour matches, NULL if none does but one is undecided, else 0.
    return (
        _cat(
            "(SELECT CASE WHEN max(p) = 1 THEN 1 WHEN count(*) > count(p) THEN NULL ELSE 0 END "
            "FROM (SELECT ",
            predicate,
            " AS p ",
            where,
            "))",
        ),
        True,
    )


def _tree(node: FilterNode, aggregation: StateAggregation) -> tuple[_Sql, bool] | None:
    """The whole tree as one condition (0, 1, or NULL when undecided), or None if inexact."""
    match node:
        case Predicate():
            return exact_leaf(node, _OWN)
        case RelationPredicate():
            return _related(node, aggregation)
        case AllOf() | AnyOf():
            if not node.children:
                return (_Sql("1"), False) if isinstance(node, AllOf) else (_Sql("0"), False)
            glue = " AND " if isinstance(node, AllOf) else " OR "
            parts: list[str | _Sql] = []
            nullable = False
            for child in node.children:
                compiled = _tree(child, aggregation)
                if compiled is None:
                    return None
                parts += [glue, compiled[0]]
                nullable = nullable or compiled[1]
            return _cat("(", *parts[1:], ")"), nullable
        case Not():
            compiled = _tree(node.child, aggregation)
            if compiled is None:
                return None
            return _cat("(NOT ", compiled[0], ")"), compiled[1]


def _path(field: str) -> str:
    return "$." + json.dumps(field)


def _own_value(field: str, kind: MetricKind) -> _Sql:
    """A state's value of `field` if it is of `kind`, else NULL."""
    if field == TIMESTAMP:
        return _Sql("t.timestamp_ms")
    kinds = "= 'integer'" if kind == "integer" else "IN ('integer', 'real')"
    path = _path(field)
    return _Sql(
        f"CASE WHEN json_type({_OWN}, ?) {kinds} THEN json_extract({_OWN}, ?) END", (path, path)
    )


def _day(bucket: TimeBucket) -> _Sql:
    """The UTC day of the state's time (`day_of`), NULL without one; periods come after."""
    value = _own_value(bucket.field, "integer")
    if bucket.days:
        return value
    # Floor division: SQLite's `/` truncates towards zero.
    return _cat("(", value, " / 86400000 - (", value, " % 86400000 < 0))")


def _neighbour_values(key: GroupKey, aggregation: StateAggregation) -> _Sql:
    """(id, JSON value) of each visible neighbour along the key's relation that has one."""
    assert key.relation is not None  # noqa: S101 - only relation keys come here
    this, edges = _edges(key.relation, key.direction, aggregation)
    path = _path(key.field)
    return _cat(
        _Sql(f"SELECT e.{this} AS id, {_NEIGHBOUR} -> ? AS v ", (path,)),
        edges,
        _Sql(f" AND json_type({_NEIGHBOUR}, ?) <> 'null'", (path,)),
    )


def aggregate_sql(aggregation: StateAggregation) -> tuple[str, list[Any]] | None:
    """The statement and its parameters, or None when it could not be exact.

    Rows: the group key values (JSON text), the day (`day_of`), the count, the metric's minimum,
    maximum, sum and number, whether a row was undecided (see the module doc), and the
    number of distinct states matched.
    """
    compiled = _tree(aggregation.tree, aggregation)
    if compiled is None:
        return None
    condition, nullable = compiled
    keys = aggregation.group_by
    own = [
        _Sql(f"{_OWN} -> ? AS k{n}, ", (_path(key.field),))
        for n, key in enumerate(keys)
        if key.relation is None
    ]
    bucket = _Sql("NULL") if aggregation.temporal is None else _day(aggregation.temporal)
    metric = _Sql("NULL")
    if aggregation.metric_field is not None:
        metric = _own_value(aggregation.metric_field, aggregation.metric_kind)
    matches = _cat(
        "SELECT t.element_id AS eid, ",
        *own,
        bucket,
        " AS b, ",
        metric,
        " AS mv, ",
        condition,
        " AS ok FROM states t WHERE ",
        _cleared("t", aggregation),
        _Sql(
            " AND t.element_type IN (SELECT value FROM json_each(?))",
            (json.dumps(list(aggregation.element_types)),),
        ),
    )
    names = ", ".join([*(f"k{n}" for n in range(len(keys))), "b"])
    total = "sum(mv)" if aggregation.metric_total else "NULL"
    measures = f"count(*), min(mv), max(mv), {total}, count(mv)"
    undecided = "max(ok IS NULL)" if nullable else "0"
    if all(key.relation is None for key in keys):
        statement = _cat(
            f"SELECT {names}, {measures}, {undecided}, NULL FROM (",  # noqa: S608
            matches,
            f") WHERE ok IS NOT 0 GROUP BY {names}",
        )
        return statement.text, list(statement.params)
    columns: list[str | _Sql] = []
    joins: list[str | _Sql] = []
    for n, key in enumerate(keys):
        if key.relation is None:
            columns.append(f", h.k{n} AS k{n}")
        else:
            columns.append(f", g{n}.v AS k{n}")
            joins += [
                " LEFT JOIN (",
                _neighbour_values(key, aggregation),
                f") g{n} ON g{n}.id = h.eid",
            ]
    undecided = "(SELECT max(ok IS NULL) FROM h)" if nullable else "0"
    statement = _cat(
        "WITH h AS MATERIALIZED (SELECT * FROM (",
        matches,
        ") WHERE ok IS NOT 0) ",
        f"SELECT {names}, {measures}, {undecided}, (SELECT count(*) FROM h) FROM ("  # noqa: S608
        "SELECT DISTINCT h.eid, h.b, h.mv",
        *columns,
        " FROM h",
        *joins,
        f") GROUP BY {names}",
    )
    return statement.text, list(statement.params)


def _key(text: str | None) -> Any:
    return None if text is None else json.loads(text)


async def aggregate_states(select: Select, aggregation: StateAggregation) -> StateAggregates | None:
    """The aggregates of `aggregation` through `select` (a connector's reader), or None."""
    compiled = aggregate_sql(aggregation)
    if compiled is None:
        return None
    rows = await select(*compiled)
    width = len(aggregation.group_by)
    if any(row[width + 6] for row in rows):
        return None  # a row the statement could not decide: count in Python instead
    days = [
        (
            tuple(_key(text) for text in row[:width]),
            row[width],
            AggregateGroup(
                keys=(),
                bucket=None,
                count=row[width + 1],
                minimum=row[width + 2],
                maximum=row[width + 3],
                total=row[width + 4],
                present=row[width + 5],
            ),
        )
        for row in rows
    ]
    temporal = aggregation.temporal
    groups = regroup(days, None if temporal is None else temporal.unit)
    distinct = rows[0][width + 7] if rows else None
    matched = sum(g.count for g in groups) if distinct is None else int(distinct)
    return StateAggregates(groups=groups, matched=matched)


__all__ = ["aggregate_sql", "aggregate_states", "exact_leaf"]
