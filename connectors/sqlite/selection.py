"""Structured retrieval on SQLite: one keyset page of states in a stable order."""

from __future__ import annotations

import json
from typing import Any

from connectors.contract.filter_tree import RelationPredicate
from connectors.contract.records import OPEN, SearchFilter
from connectors.contract.selection import StateOrder, StateSelection
from connectors.contract.system_of_record import LATEST_COLUMNS, STATE_COLUMNS, column_list
from connectors.sql_filters import compile_filter, tree_sql

_STATE = column_list(STATE_COLUMNS, "u")


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


def _related_sql(relation: RelationPredicate, search_filter: SearchFilter) -> tuple[str, list[Any]]:
    """`t` has a neighbour along `relation` the filter's clearance allows and that matches.

    The neighbour's newest state is not checked (the planner does): looser, never stricter.
    """
    this, other = (
        ("source_id", "target_id") if relation.direction == "out" else ("target_id", "source_id")
    )
    params: list[Any] = [relation.relation]
    clauses = [f"e.{this} = t.element_id", "e.relation = ?", "n.tombstone = 0"]
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
    clauses.append(matches)
    params += match_params
    joined = " AND ".join(clauses)
    exists = (
        f"EXISTS (SELECT 1 FROM edges e JOIN states n ON n.element_id = e.{other} WHERE {joined})"  # noqa: S608 - fixed fragments; values are parameters
    )
    return exists, params


def select_sql(selection: StateSelection) -> tuple[str, list[Any]]:
    """The page's statement and its parameters, in order of appearance.

    Rows are `STATE_COLUMNS` then `LATEST_COLUMNS`. Text compares by code point (SQLite's
    BINARY collation on UTF-8), as Python compares strings.
    """
    order = selection.order
    key, params = _order_value(order)
    where, filter_params = compile_filter(selection.search_filter, table="t")
    params += filter_params
    for relation in selection.related:
        exists, exists_params = _related_sql(relation, selection.search_filter)
        where += f" AND {exists}"
        params += exists_params
    if selection.search_filter.as_of is None:
        latest, join = column_list(LATEST_COLUMNS, "u"), ""
    else:
        latest = column_list(LATEST_COLUMNS, "l")
        join = f"JOIN states l ON l.element_id = u.element_id AND l.valid_to = {OPEN}"
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
    WHERE {where} AND t.tombstone = 0
) u
{join}
WHERE {keyset}
ORDER BY u.k IS NULL, u.k {direction}, u.element_id
LIMIT ?
"""  # noqa: S608 - only fixed fragments are formatted in; values are parameters
    return sql, params
