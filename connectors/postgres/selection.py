"""Structured retrieval on PostgreSQL: one keyset page of states in a stable order."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from connectors.contract.filter_tree import RelationPredicate, pushdown
from connectors.contract.predicates import Op, Predicate
from connectors.contract.records import OPEN, SearchFilter
from connectors.contract.selection import StateOrder, StateSelection, column_predicates
from connectors.contract.system_of_record import LATEST_COLUMNS, STATE_COLUMNS, column_list
from connectors.postgres.filter_sql import compile_filter, storable, tree_sql

_STATE_U = column_list(STATE_COLUMNS, "u", json_as="{}::text")
_STATE_T = column_list(STATE_COLUMNS, "t", json_as="{}::text")
_COLUMN_OPS = {Op.EQ: "=", Op.GT: ">", Op.GTE: ">=", Op.LT: "<", Op.LTE: "<="}
_NAMING = frozenset({"element_id", "name"})  # indexed columns that name few neighbours
_TEXT_COLUMNS = frozenset({"element_id", "element_type", "name"})


def _order_value(order: StateOrder) -> str:
    """The order key of a row of `t` read from its filter values, NULL when missing.

    Text sorts by code point (`COLLATE "C"` on UTF-8), as Python and SQLite compare it.
    """
    value = "t.filter_values -> %(o_field)s"
    if order.kind == "number":
        return f"CASE jsonb_typeof({value}) WHEN 'number' THEN ({value})::numeric END"
    return (
        f"""(CASE jsonb_typeof({value}) WHEN 'string' THEN {value} #>> '{{}}' END) COLLATE "C\""""
    )


def _column(alias: str, column: str) -> str:
    """A state column as the stores compare it: text by code point."""
    return f'{alias}.{column} COLLATE "C"' if column in _TEXT_COLUMNS else f"{alias}.{column}"


def _column_sql(
    predicates: Sequence[Predicate], alias: str, params: dict[str, Any], prefix: str
) -> str:
    """Predicates on fields that are also columns, applied to the columns (`AND ...` each).

    Exact beside the JSON condition they repeat (StoredState: such values equal their
    column); they are there so that an index on the column can find the rows. Text that
    PostgreSQL cannot hold is left to the JSON condition.
    """
    sql: list[str] = []
    for n, (column, predicate) in enumerate(column_predicates(predicates)):
        operands = predicate.value if isinstance(predicate.value, tuple) else (predicate.value,)
        if any(isinstance(v, str) and not storable(v) for v in operands):
            continue
        name = f"{prefix}{n}"
        # Names as the index on them is built (by code point); ids as the primary key's.
        target = _column(alias, column) if column == "name" else f"{alias}.{column}"
        if predicate.op is Op.IN:
            params[name] = list(operands)
            sql.append(f" AND {target} = ANY(%({name})s::text[])")
        else:
            params[name] = predicate.value
            sql.append(f" AND {target} {_COLUMN_OPS[predicate.op]} %({name})s")
    return "".join(sql)


def _related_sql(
    relation: RelationPredicate, search_filter: SearchFilter, params: dict[str, Any], prefix: str
) -> str:
    """`t` has a neighbour along `relation` the filter's clearance allows and that matches.

    The neighbour's newest state is not checked (the planner does): looser, never stricter.
    A leaf that names its neighbours by id or name collects their elements once, as a set
    (the neighbours are few and indexed); otherwise each row looks for its own neighbour.
    """
    this, other = (
        ("source_id", "target_id") if relation.direction == "out" else ("target_id", "source_id")
    )
    params[f"{prefix}rel"] = relation.relation
    params[f"{prefix}rank"] = search_filter.max_sensitivity_rank
    clauses = [
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
    known = pushdown(relation.predicate)
    clauses.append(
        tree_sql(relation.predicate, "n.filter_values", params, f"{prefix}p")
        + _column_sql(known, "n", params, f"{prefix}c")
    )
    joined = " AND ".join(clauses)
    edges = f"edges e JOIN states n ON n.element_id = e.{other}"
    if any(column in _NAMING and p.op in (Op.EQ, Op.IN) for column, p in column_predicates(known)):
        return f"t.element_id IN (SELECT e.{this} FROM {edges} WHERE {joined})"  # noqa: S608 - fixed fragments; values are parameters
    return f"EXISTS (SELECT 1 FROM {edges} WHERE e.{this} = t.element_id AND {joined})"  # noqa: S608 - fixed fragments; values are parameters


def _conditions(selection: StateSelection) -> tuple[str, dict[str, Any]]:
    """What every row of the page satisfies, over the states aliased `t`."""
    search_filter = selection.search_filter
    where, params = compile_filter(search_filter, table="t")
    where += _column_sql(search_filter.predicates, "t", params, "o_c")
    for n, relation in enumerate(selection.related):
        where += f" AND {_related_sql(relation, search_filter, params, f'o_r{n}_')}"
    return where + " AND NOT t.tombstone", params


def _latest(selection: StateSelection, alias: str) -> tuple[str, str]:
    """The newest state's columns, and the join that reads them (as of a past stamp)."""
    if selection.search_filter.as_of is None:
        return column_list(LATEST_COLUMNS, alias), ""
    join = f"JOIN states l ON l.element_id = {alias}.element_id AND l.valid_to = {OPEN}"
    return column_list(LATEST_COLUMNS, "l"), join


def _bound(order: StateOrder, value: object, params: dict[str, Any]) -> str:
    """The keyset's order value as a parameter, compared exactly."""
    if order.kind == "number":
        # The value as the JSON text Python wrote for it, so the comparison is exact.
        params["o_after"] = Decimal(repr(value))
        return "%(o_after)s::numeric"
    params["o_after"] = value
    return '%(o_after)s::text COLLATE "C"'


def select_sql(selection: StateSelection) -> tuple[str, dict[str, Any]]:
    """The page's statement and its named parameters.

    Rows are `STATE_COLUMNS` (JSON as text, for `LazyJSON`) then `LATEST_COLUMNS`.
    """
    where, params = _conditions(selection)
    params["o_limit"] = selection.limit
    order = selection.order
    column = order.column
    if column is not None and (selection.after is None or selection.after.value is not None):
        return _by_column(selection, column, where, params), params
    return _by_value(selection, where, params), params


def _by_column(selection: StateSelection, column: str, where: str, params: dict[str, Any]) -> str:
    """Ordered by a column (never missing): one flat statement.

    The keyset is then a range on the column that an index seeks to, so page 50 costs what
    page 1 costs.
    """
    order = selection.order
    after = selection.after
    key = _column("t", column)
    element_id = _column("t", "element_id")
    keyset = "TRUE"
    if after is not None:
        params["o_id"] = after.element_id
        beyond = "<" if order.descending else ">"
        bound = _bound(order, after.value, params)
        keyset = f"{key} {beyond}= {bound} AND ({key} {beyond} {bound} OR {element_id} > %(o_id)s)"
    latest, join = _latest(selection, "t")
    direction = "DESC" if order.descending else "ASC"
    return f"""
SELECT {_STATE_T}, {latest}
FROM (SELECT s.*, s.hlc AS valid_from FROM states s) t
{join}
WHERE {where} AND {keyset}
ORDER BY {key} {direction}, {element_id}
LIMIT %(o_limit)s
"""  # noqa: S608 - only fixed fragments are formatted in; values are parameters


def _by_value(selection: StateSelection, where: str, params: dict[str, Any]) -> str:
    """Ordered by a filter value, missing values last: the key is computed per row."""
    order = selection.order
    params["o_field"] = order.field
    latest, join = _latest(selection, "u")
    after = selection.after
    keyset = "TRUE"
    element_id = 'u.element_id COLLATE "C"'
    if after is not None:
        params["o_id"] = after.element_id
    if after is not None and after.value is None:
        keyset = f"u.k IS NULL AND {element_id} > %(o_id)s"
    elif after is not None:
        beyond = "<" if order.descending else ">"
        bound = _bound(order, after.value, params)
        keyset = (
            f"(u.k IS NOT NULL AND (u.k {beyond} {bound} OR (u.k = {bound} "
            f"AND {element_id} > %(o_id)s))) OR u.k IS NULL"
        )
    direction = "DESC" if order.descending else "ASC"
    return f"""
SELECT {_STATE_U}, {latest}
FROM (
    SELECT t.*, {_order_value(order)} AS k
    FROM (SELECT s.*, s.hlc AS valid_from FROM states s) t
    WHERE {where}
) u
{join}
WHERE {keyset}
ORDER BY u.k IS NULL, u.k {direction}, {element_id}
LIMIT %(o_limit)s
"""  # noqa: S608 - only fixed fragments are formatted in; values are parameters
