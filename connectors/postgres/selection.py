"""Structured retrieval on PostgreSQL: one keyset page of states in a stable order."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from connectors.contract.filter_tree import RelationPredicate
from connectors.contract.records import OPEN, SearchFilter
from connectors.contract.selection import StateOrder, StateSelection
from connectors.contract.system_of_record import LATEST_COLUMNS, STATE_COLUMNS, column_list
from connectors.postgres.sql import compile_filter, storable, tree_sql

_STATE = column_list(STATE_COLUMNS, "u", json_as="{}::text")


def _order_value(order: StateOrder) -> str:
    """The order key of a row of `t`, NULL when missing or of another kind.

    Text sorts by code point (`COLLATE "C"` on UTF-8), as Python and SQLite compare it.
    """
    column = order.column
    if column is not None:
        return f't.{column} COLLATE "C"' if order.kind == "text" else f"t.{column}"
    value = "t.filter_values -> %(o_field)s"
    if order.kind == "number":
        return f"CASE jsonb_typeof({value}) WHEN 'number' THEN ({value})::numeric END"
    return (
        f"""(CASE jsonb_typeof({value}) WHEN 'string' THEN {value} #>> '{{}}' END) COLLATE "C\""""
    )


def _related_sql(
    relation: RelationPredicate, search_filter: SearchFilter, params: dict[str, Any], prefix: str
) -> str:
    """`t` has a neighbour along `relation` the filter's clearance allows and that matches.

    The neighbour's newest state is not checked (the planner does): looser, never stricter.
    """
    this, other = (
        ("source_id", "target_id") if relation.direction == "out" else ("target_id", "source_id")
    )
    params[f"{prefix}rel"] = relation.relation
    params[f"{prefix}rank"] = search_filter.max_sensitivity_rank
    clauses = [
        f"e.{this} = t.element_id",
        f"e.relation = %({prefix}rel)s",
        "NOT n.tombstone",
        f"n.sensitivity_rank <= %({prefix}rank)s",
    ]
    if search_filter.as_of is None:
        clauses += [f"e.valid_to = {OPEN}", f"n.valid_to = {OPEN}"]
    else:
        params[f"{prefix}as_of"] = search_filter.as_of
        at = f"%({prefix}as_of)s"
        clauses += [
            f"e.valid_from <= {at}",
            f"e.valid_to > {at}",
            f"n.hlc <= {at}",
            f"n.valid_to > {at}",
        ]
    if not search_filter.all_projects:
        params[f"{prefix}projects"] = [p for p in search_filter.projects if storable(p)]
        clauses.append(f"(n.scope IS NULL OR n.scope = ANY(%({prefix}projects)s::text[]))")
    clauses.append(tree_sql(relation.predicate, "n.filter_values", params, f"{prefix}p"))
    joined = " AND ".join(clauses)
    return (
        f"EXISTS (SELECT 1 FROM edges e JOIN states n ON n.element_id = e.{other} WHERE {joined})"  # noqa: S608 - fixed fragments; values are parameters
    )


def select_sql(selection: StateSelection) -> tuple[str, dict[str, Any]]:
    """The page's statement and its named parameters.

    Rows are `STATE_COLUMNS` (JSON as text, for `LazyJSON`) then `LATEST_COLUMNS`.
    """
    order = selection.order
    where, params = compile_filter(selection.search_filter, table="t")
    for n, relation in enumerate(selection.related):
        where += f" AND {_related_sql(relation, selection.search_filter, params, f'o_r{n}_')}"
    params["o_field"] = order.field
    params["o_limit"] = selection.limit
    if selection.search_filter.as_of is None:
        latest, join = column_list(LATEST_COLUMNS, "u"), ""
    else:
        latest = column_list(LATEST_COLUMNS, "l")
        join = f"JOIN states l ON l.element_id = u.element_id AND l.valid_to = {OPEN}"
    after = selection.after
    keyset = "TRUE"
    element_id = 'u.element_id COLLATE "C"'
    if after is not None:
        params["o_id"] = after.element_id
    if after is not None and after.value is None:
        keyset = f"u.k IS NULL AND {element_id} > %(o_id)s"
    elif after is not None:
        beyond = "<" if order.descending else ">"
        if order.kind == "number":
            # The value as the JSON text Python wrote for it, so the comparison is exact.
            params["o_after"] = Decimal(repr(after.value))
            bound = "%(o_after)s::numeric"
        else:
            params["o_after"] = after.value
            bound = '%(o_after)s::text COLLATE "C"'
        keyset = (
            f"(u.k IS NOT NULL AND (u.k {beyond} {bound} OR (u.k = {bound} "
            f"AND {element_id} > %(o_id)s))) OR u.k IS NULL"
        )
    direction = "DESC" if order.descending else "ASC"
    sql = f"""
SELECT {_STATE}, {latest}
FROM (
    SELECT t.*, {_order_value(order)} AS k
    FROM (SELECT s.*, s.hlc AS valid_from FROM states s) t
    WHERE {where} AND NOT t.tombstone
) u
{join}
WHERE {keyset}
ORDER BY u.k IS NULL, u.k {direction}, {element_id}
LIMIT %(o_limit)s
"""  # noqa: S608 - only fixed fragments are formatted in; values are parameters
    return sql, params
