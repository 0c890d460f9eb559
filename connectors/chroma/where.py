"""Chroma `where` clauses from the filter contract: looser than the filter, never stricter.

Chroma's `where` cannot say everything a `SearchFilter` says. What it cannot say is left
out or loosened, and the connector applies the exact filter (`SearchFilter.allows_chunk`)
to the metadata Chroma returns, so pushing a filter down only narrows what is fetched.
"""

from __future__ import annotations

import math
from typing import Any

from connectors.contract.filter_tree import AllOf, AnyOf, FilterNode, Not, RelationPredicate
from connectors.contract.predicates import ORDERED_OPS, Op, Predicate, Scalar
from connectors.contract.records import OPEN, SearchFilter

NO_SCOPE = ""  # Chroma metadata cannot hold None: the scope of an unscoped chunk
_CHROMA_OPS = {
    Op.EQ: "$eq",
    Op.IN: "$in",
    Op.GT: "$gt",
    Op.GTE: "$gte",
    Op.LT: "$lt",
    Op.LTE: "$lte",
}


def compile_where(search_filter: SearchFilter) -> dict[str, Any]:
    """The Chroma `where` clause for a pushdown filter."""
    clauses: list[dict[str, Any]] = [{"sens": {"$lte": search_filter.max_sensitivity_rank}}]
    if not search_filter.all_projects:
        clauses.append({"scope": {"$in": [NO_SCOPE, *search_filter.projects]}})
    if search_filter.as_of is None:
        clauses.append({"valid_to": {"$eq": OPEN}})
    else:
        clauses.append({"valid_from": {"$lte": search_filter.as_of}})
        clauses.append({"valid_to": {"$gt": search_filter.as_of}})
    if search_filter.element_types is not None:
        clauses.append({"etype": {"$in": list(search_filter.element_types)}})
    # Predicates and the tree, looser where Chroma cannot say them exactly (string ranges,
    # patterns, ...): the fetched metadata is checked with the exact filter.
    values = _all(
        [
            *(_leaf_where(p, negated=False) for p in search_filter.predicates),
            tree_where(search_filter.tree) if search_filter.tree is not None else None,
        ]
    )
    if values is _NEVER:
        return _NOTHING
    if values is not None:
        clauses.append(values)
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


# -- filter trees ----------------------------------------------------------------------------
# Chroma's `where` has no NOT, no test of presence and no patterns, orders numbers only, tells
# booleans from numbers (Python: True == 1), and compares a stored integer with a fractional
# float by truncating the float. A tree is therefore compiled looser, never stricter:
# negations are pushed down to the leaves, and each leaf becomes a `where` that every element
# satisfying it satisfies, or no condition at all. The connector applies the exact filter
# (`SearchFilter.allows_chunk`) to what Chroma returns.
Where = dict[str, Any]
_NEVER: Where = {"$never": True}  # a marker; compiled as `_NOTHING`
_NOTHING: Where = {"$and": [{"version": {"$lt": 0}}, {"version": {"$gt": 0}}]}
_EXACT_BELOW = 2**53  # Chroma may compare numbers as doubles: larger ones are not pushed down
_NEGATED = {Op.EQ: Op.NE, Op.NE: Op.EQ, Op.IN: Op.NIN, Op.NIN: Op.IN}


def tree_where(node: FilterNode, *, negated: bool = False) -> Where | None:
    """A `where` looser than `node` (or its negation): None when nothing can be said.

    `_NEVER` when no element can match (an `$in` of nothing, a NaN bound).
    """
    match node:
        case Predicate():
            return _leaf_where(node, negated=negated)
        case RelationPredicate():
            return None
        case AllOf() | AnyOf():
            parts = [tree_where(child, negated=negated) for child in node.children]
            if isinstance(node, AllOf) != negated:  # a conjunction (De Morgan under NOT)
                return _all(parts)
            return _any(parts)
        case Not():
            return tree_where(node.child, negated=not negated)


def _all(parts: list[Where | None]) -> Where | None:
    if any(part is _NEVER for part in parts):
        return _NEVER
    kept = [part for part in parts if part is not None]
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else {"$and": kept}


def _any(parts: list[Where | None]) -> Where | None:
    if any(part is None for part in parts):
        return None
    kept = [part for part in parts if part is not _NEVER]
    if not kept:
        return _NEVER
    return kept[0] if len(kept) == 1 else {"$or": kept}


def _leaf_where(predicate: Predicate, *, negated: bool) -> Where | None:
    op, value, key = predicate.op, predicate.value, f"f_{predicate.field}"
    if negated:
        if op not in _NEGATED:
            return None  # the negation of a range, a pattern or `$exists`: not expressible
        op = _NEGATED[op]
    if op in (Op.EQ, Op.NE, Op.IN, Op.NIN):
        many = op in (Op.IN, Op.NIN)
        if isinstance(value, tuple) != many:
            return None
        values = value if isinstance(value, tuple) else (value,)
        if op in (Op.EQ, Op.IN):
            return _any([_equal(key, v) for v in values])
        return _all([_unequal(key, v) for v in values])
    if op in ORDERED_OPS:
        if op is Op.BETWEEN:
            if not (isinstance(value, tuple) and len(value) == 2):
                return None
            bounds = (("$gte", value[0]), ("$lte", value[1]))
        elif isinstance(value, tuple):
            return None
        else:
            bounds = ((_CHROMA_OPS[op], value),)
        return _all([_ordered(key, operator, bound) for operator, bound in bounds])
    if op in (Op.LIKE, Op.ILIKE) and not isinstance(value, str):
        return _NEVER  # a pattern that is not a string matches nothing
    return None  # `$exists` and patterns


def _sendable(value: Scalar) -> bool:
    """Whether Chroma takes the value in a `where` and compares it as Python does."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False  # a lone surrogate
        return True
    return isinstance(value, bool) or (math.isfinite(value) and abs(value) < _EXACT_BELOW)


def _equals(value: Scalar) -> list[Scalar]:
    """The values Chroma must be asked for to find every stored value Python finds equal."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, bool):
        return [value, int(value)]
    return [value, bool(value)] if value in (0, 1) else [value]


def _equal(key: str, value: Scalar) -> Where | None:
    if isinstance(value, float) and math.isnan(value):
        return _NEVER
    if not _sendable(value):
        return None
    return _any([{key: {"$eq": v}} for v in _equals(value)])


def _unequal(key: str, value: Scalar) -> Where | None:
    # Chroma's `$ne` keeps missing fields and values of another type, as Python's `!=` does.
    if not _sendable(value):
        return None
    unequal = _all([{key: {"$ne": v}} for v in _equals(value)])
    if isinstance(value, float) and not value.is_integer():
        # Chroma compares a stored integer with a float by truncating the float: `$ne 0.5`
        # drops a stored 0. Every integer differs from a fractional value: keep them.
        return _any([unequal, {key: {"$eq": math.trunc(value)}}])
    return unequal


def _ordered(key: str, operator: str, bound: Scalar) -> Where | None:
    if isinstance(bound, float) and math.isnan(bound):
        return _NEVER  # no comparison with NaN holds
    if isinstance(bound, str) or not _sendable(bound):
        return None  # Chroma orders numbers only
    if isinstance(bound, float) and not bound.is_integer():
        # A stored integer is compared with the float truncated (see `_unequal`): compare
        # with the integer bound that decides integers exactly and floats more loosely.
        below = operator in ("$lt", "$lte")
        return {key: {"$lt": math.ceil(bound)} if below else {"$gt": math.floor(bound)}}
    # Chroma's order skips booleans, strings and missing fields, as Python's does.
    return {key: {operator: int(bound) if isinstance(bound, bool) else bound}}


__all__ = ["NO_SCOPE", "compile_where", "tree_where"]
