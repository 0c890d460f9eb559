"""Structured retrieval on SQLite: one keyset page of states in a stable order."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from connectors.contract.filter_tree import RelationPredicate, pushdown
from connectors.contract.predicates import Op, Predicate
from connectors.contract.records import OPEN, SearchFilter
from connectors.contract.selection import StateOrder, StateSelection, column_predicates
from connectors.contract.system_of_record import LATEST_COLUMNS, STATE_COLUMNS, column_list
from connectors.sql_filters import compile_filter, tree_sql

_STATE = column_list(STATE_COLUMNS, "u")
_STATE_T = column_list(STATE_COLUMNS, "t")
_COLUMN_OPS = {Op.EQ: "=", Op.GT: ">", Op.GTE: ">=", Op.LT: "<", Op.LTE: "<="}
_NAMING = frozenset({"element_id", "name"})  # indexed columns that name few neighbours


def _order_value(order: StateOrder) -> tuple[str, list[Any]]:
    """The order key of a row of `t`, NULL when missing or of another kind."""
    column = order.column
    if column is not None:
        return f"t.{column}", []
    path = "$." + json.dumps(order.field)
    kinds = "('integer', 'real')" if order.kind == "number" else "('text')"
    return (
        f"CASE WHEN json_type(t.filter_values, ?) IN {kinds} "
        "THEN json_extract(t.filter_values, ?) END",
        [path, path],
    )


def _column_sql(predicates: Sequence[Predicate], alias: str) -> tuple[str, list[Any]]:
    """Predicates on fields that are also columns, applied to the columns (`AND ...` each).

    Exact beside the JSON condition they repeat (StoredState: such values equal their
    column); they are there so that an index on the column can find the rows.
    """
    sql: list[str] = []
    params: list[Any] = []
    for column, predicate in column_predicates(predicates):
        if predicate.op is Op.IN:
            sql.append(f" AND {alias}.{column} IN (SELECT value FROM json_each(?))")  # noqa: S608 - a fixed alias and column
            params.append(json.dumps(list(predicate.value)))  # type: ignore[arg-type]
        else:
            sql.append(f" AND {alias}.{column} {_COLUMN_OPS[predicate.op]} ?")
            params.append(predicate.value)
    return "".join(sql), params


def _related_sql(relation: RelationPredicate, search_filter: SearchFilter) -> tuple[str, list[Any]]:
    """`t` has a neighbour along `relation` the filter's clearance allows and that matches.

    The neighbour's newest state is not checked (the planner does): looser, never stricter.
    When the leaf names its neighbours by id or name (`partOf.name == "payments"`), the
    matching neighbours are few and indexed: their elements are collected once, as a set
    `t.element_id` must be in. Otherwise each candidate row looks for its own neighbour.
    """
    this, other = (
        ("source_id", "target_id") if relation.direction == "out" else ("target_id", "source_id")
    )
    params: list[Any] = [relation.relation]
    clauses = ["e.relation = ?", "n.tombstone = 0"]
    if search_filter.as_of is None:
        clauses += [f"e.valid_to = {OPEN}", f"n.valid_to = {OPEN}"]
    else:
        clauses += ["e.valid_from <= ?", "e.valid_to > ?", "n.hlc <= ?", "n.valid_to > ?"]
        params += [search_filter.as_of] * 4
    clauses.append("n.sensitivity_rank <= ?")
    params.append(search_filter.max_sensitivity_rank)
    if not search_filter.all_projects:
        clauses.append("(n.scope IS NULL OR n.scope IN (SELECT value FROM json_each(?)))")
        params.append(json.dumps(list(search_filter.projects)))
    matches, match_params = tree_sql(relation.predicate, "n.filter_values")
    known = pushdown(relation.predicate)
    columns, column_params = _column_sql(known, "n")
    clauses.append(matches + columns)
    params += match_params + column_params
    joined = " AND ".join(clauses)
    edges = f"edges e JOIN states n ON n.element_id = e.{other}"
    if any(column in _NAMING and p.op in (Op.EQ, Op.IN) for column, p in column_predicates(known)):
        return f"t.element_id IN (SELECT e.{this} FROM {edges} WHERE {joined})", params  # noqa: S608 - fixed fragments; values are parameters
    exists = f"EXISTS (SELECT 1 FROM {edges} WHERE e.{this} = t.element_id AND {joined})"  # noqa: S608 - fixed fragments; values are parameters
    return exists, params


def select_sql(selection: StateSelection) -> tuple[str, list[Any]]:
    """The page's statement and its parameters, in order of appearance.

    Rows are `STATE_COLUMNS` then `LATEST_COLUMNS`. Text compares by code point (SQLite's
    BINARY collation on UTF-8), as Python compares strings.
    """
    where, params = _conditions(selection)
    order = selection.order
    if order.column is not None and (selection.after is None or selection.after.value is not None):
        return _by_column(selection, order.column, where, params)
    return _by_value(selection, where, params)


def _conditions(selection: StateSelection) -> tuple[str, list[Any]]:
    """What every row of the page satisfies, over the states aliased `t`."""
    search_filter = selection.search_filter
    where, params = compile_filter(search_filter, table="t")
    columns, column_params = _column_sql(search_filter.predicates, "t")
    where += columns
    params += column_params
    for relation in selection.related:
        exists, exists_params = _related_sql(relation, search_filter)
        where += f" AND {exists}"
        params += exists_params
    return where + " AND t.tombstone = 0", params


def _latest(selection: StateSelection, alias: str) -> tuple[str, str]:
    """The newest state's columns, and the join that reads them (as of a past stamp)."""
    if selection.search_filter.as_of is None:
        return column_list(LATEST_COLUMNS, alias), ""
    join = f"JOIN states l ON l.element_id = {alias}.element_id AND l.valid_to = {OPEN}"
    return column_list(LATEST_COLUMNS, "l"), join


def _by_column(
    selection: StateSelection, column: str, where: str, params: list[Any]
) -> tuple[str, list[Any]]:
    """Ordered by a column (never missing): one flat statement.

    The keyset is then a range on the column that an index can seek to, so page 50 costs
    what page 1 costs.
    """
    order = selection.order
    after = selection.after
    keyset = "1"
    if after is not None:
        beyond = "<" if order.descending else ">"
        # The first term is a plain range (sargable); the second breaks ties by element_id.
        keyset = f"t.{column} {beyond}= ? AND (t.{column} {beyond} ? OR t.element_id > ?)"
        params += [after.value, after.value, after.element_id]
    params.append(selection.limit)
    latest, join = _latest(selection, "t")
    direction = "DESC" if order.descending else "ASC"
    sql = f"""
SELECT {_STATE_T}, {latest}
FROM (SELECT s.*, s.hlc AS valid_from FROM states s) t
{join}
WHERE {where} AND {keyset}
ORDER BY t.{column} {direction}, t.element_id
LIMIT ?
"""  # noqa: S608 - only fixed fragments are formatted in; values are parameters
    return sql, params


def _by_value(selection: StateSelection, where: str, params: list[Any]) -> tuple[str, list[Any]]:
    """Ordered by a filter value, missing values last: the key is computed per row."""
    order = selection.order
    key, key_params = _order_value(order)
    params = key_params + params
    latest, join = _latest(selection, "u")
    after = selection.after
    keyset = "1"
    if after is not None and after.value is None:
        keyset = "u.k IS NULL AND u.element_id > ?"
        params.append(after.element_id)
    elif after is not None:
        beyond = "<" if order.descending else ">"
        keyset = (
            f"(u.k IS NOT NULL AND (u.k {beyond} ? OR (u.k = ? AND u.element_id > ?))) "
            "OR u.k IS NULL"
        )
        params += [after.value, after.value, after.element_id]
    params.append(selection.limit)
    direction = "DESC" if order.descending else "ASC"
    sql = f"""
SELECT {_STATE}, {latest}
FROM (
    SELECT t.*, {key} AS k
    FROM (SELECT s.*, s.hlc AS valid_from FROM states s) t
    WHERE {where}
) u
{join}
WHERE {keyset}
ORDER BY u.k IS NULL, u.k {direction}, u.element_id
LIMIT ?
"""  # noqa: S608 - only fixed fragments are formatted in; values are parameters
    return sql, params
