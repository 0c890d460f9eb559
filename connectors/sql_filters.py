"""Compile a pushdown `SearchFilter` to a parameterised SQL condition (SQLite dialect).

Only fixed SQL fragments are produced; every value, field path and id list is a parameter.
"""

from __future__ import annotations

import json
from typing import Any

from connectors.contract.predicates import Op
from connectors.contract.records import OPEN, SearchFilter

_SQL_OPS = {Op.EQ: "=", Op.GT: ">", Op.GTE: ">=", Op.LT: "<", Op.LTE: "<="}


def compile_filter(search_filter: SearchFilter, *, table: str) -> tuple[str, list[Any]]:
    """A WHERE condition over `table`'s chunk columns and its parameters, in order.

    `table` is a fixed alias chosen by the caller, never user input.
    """
    t = table
    clauses = [f"{t}.sensitivity_rank <= ?"]
    params: list[Any] = [search_filter.max_sensitivity_rank]
    if not search_filter.all_projects:
        clauses.append(f"({t}.scope IS NULL OR {t}.scope IN (SELECT value FROM json_each(?)))")  # noqa: S608
        params.append(json.dumps(list(search_filter.projects)))
    if search_filter.as_of is None:
        clauses.append(f"{t}.valid_to = {OPEN}")
    else:
        clauses.append(f"{t}.valid_from <= ? AND {t}.valid_to > ?")
        params += [search_filter.as_of, search_filter.as_of]
    if search_filter.element_types is not None:
        clauses.append(f"{t}.element_type IN (SELECT value FROM json_each(?))")  # noqa: S608
        params.append(json.dumps(list(search_filter.element_types)))
    for predicate in search_filter.predicates:
        path = "$." + json.dumps(predicate.field)
        value_sql = f"json_extract({t}.filter_values, ?)"
        if predicate.op is Op.IN:
            clauses.append(f"{value_sql} IN (SELECT value FROM json_each(?))")  # noqa: S608
            params += [path, json.dumps(list(predicate.value))]  # type: ignore[arg-type]
        elif predicate.op in _SQL_OPS:
            clauses.append(f"{value_sql} {_SQL_OPS[predicate.op]} ?")
            params += [path, predicate.value]
        # Negative operators are not pushed down (see uda.query.filters.PUSHDOWN_OPS).
    return " AND ".join(clauses), params
