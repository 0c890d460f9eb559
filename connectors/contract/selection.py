"""Structured retrieval from the system of record: states in a stable order, a page at a time.

A ranked search finds candidates by relevance; a structured one (`search(query=None, ...)`)
asks the system of record for every state passing a filter, ordered by one key and then by
`element_id`, resuming after the last row it saw (keyset pagination: page 50 costs what
page 1 costs). The store pushes down what `SearchFilter` says; the planner re-checks every
row authoritatively, as for ranked candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from connectors.contract.filter_tree import RelationPredicate
from connectors.contract.predicates import Op, Predicate, Scalar
from connectors.contract.records import SearchFilter
from connectors.contract.system_of_record import StoredState

OrderKind = Literal["text", "number"]

ORDER_COLUMNS: dict[str, tuple[str, OrderKind]] = {
    "element_id": ("element_id", "text"),
    "element_type": ("element_type", "text"),
    "name": ("name", "text"),
    "timestamp": ("timestamp_ms", "number"),
}
"""Order keys a state row holds as a column (never missing): key -> (column, kind)."""


FIELD_COLUMNS: dict[str, str] = {
    "element_id": "element_id",
    "element_type": "element_type",
    "name": "name",
    "timestamp": "timestamp_ms",
}
"""Filter fields a state also holds as a column: a state's filter value of one of these,
when present, equals its column (the write path fills both from the element), so a store
may apply a predicate on them to the column as well, where an index can find the rows."""

_COLUMN_OPS = frozenset({Op.EQ, Op.IN, Op.GT, Op.GTE, Op.LT, Op.LTE})


def column_predicates(predicates: Sequence[Predicate]) -> list[tuple[str, Predicate]]:
    """The predicates a store may also apply to state columns, with their column.

    Only operands of the column's kind qualify (text for text columns, numbers for the
    timestamp): anything else could compare differently on the column than on the value.
    """
    out: list[tuple[str, Predicate]] = []
    for predicate in predicates:
        column = FIELD_COLUMNS.get(predicate.field)
        if column is None or predicate.op not in _COLUMN_OPS:
            continue
        operands = predicate.value if isinstance(predicate.value, tuple) else (predicate.value,)
        if predicate.op is Op.IN and not operands:
            continue
        if column == "timestamp_ms":
            fits = all(isinstance(v, int | float) and not isinstance(v, bool) for v in operands)
        else:
            fits = predicate.op in (Op.EQ, Op.IN) and all(isinstance(v, str) for v in operands)
        if fits:
            out.append((column, predicate))
    return out


@dataclass(frozen=True, kw_only=True)
class StateOrder:
    """The order of a structured retrieval: one key, then `element_id` ascending.

    `field` is a key of `ORDER_COLUMNS` or a filterable field, read from the state's
    normalised `filter_values`. A filter value of another kind than `kind` (or none) counts
    as missing; missing values sort after every present one, in either direction.
    """

    field: str
    kind: OrderKind
    descending: bool = False

    @property
    def column(self) -> str | None:
        """The state column this key is, or None for a filter value."""
        found = ORDER_COLUMNS.get(self.field)
        return found[0] if found is not None else None

    def value_of(self, state: StoredState) -> Scalar | None:
        """The state's value of this key, as the stores compare it (None: missing)."""
        column = self.column
        if column is not None:
            value: object = getattr(state, column)
        else:
            value = state.filter_values.get(self.field)
        if self.kind == "text":
            return value if isinstance(value, str) else None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return value


@dataclass(frozen=True, kw_only=True)
class Keyset:
    """Where the previous page ended: its last row's order value and element id."""

    value: Scalar | None
    element_id: str

    @classmethod
    def of(cls, order: StateOrder, state: StoredState) -> Keyset:
        """The position just after `state` in `order`."""
        return cls(value=order.value_of(state), element_id=state.element_id)


@dataclass(frozen=True, kw_only=True)
class StateSelection:
    """One page of a structured retrieval, as the system of record is asked for it.

    States valid at `search_filter.as_of` (None: current), not tombstoned, passing the
    filter's clearance, element types, predicates and tree (a store may apply less, never
    more), strictly after `after` in `order`, at most `limit` of them, in order.
    """

    search_filter: SearchFilter
    order: StateOrder
    limit: int
    after: Keyset | None = None
    related: tuple[RelationPredicate, ...] = ()
    """Relation leaves every match must satisfy (`required_relations`): a store that keeps
    edges may keep only the states with a neighbour along the relation, valid at the same
    stamp, that the filter's clearance allows and that satisfies the leaf's predicate."""


def sort_key(order: StateOrder, state: StoredState) -> tuple[object, ...]:
    """The reference order, for stores that sort in Python and for the tests."""
    value = order.value_of(state)
    if value is None:
        return (1, 0, state.element_id)
    if order.descending:
        # Numbers negate; strings sort descending through a reversed code point key.
        key: object = -value if not isinstance(value, str) else _Descending(value)
    else:
        key = value
    return (0, key, state.element_id)


class _Descending(str):
    """A string that sorts in reverse code point order."""

    __slots__ = ()

    def __lt__(self, other: object) -> bool:
        return str.__gt__(self, other)  # type: ignore[arg-type]

    def __gt__(self, other: object) -> bool:
        return str.__lt__(self, other)  # type: ignore[arg-type]


__all__ = [
    "FIELD_COLUMNS",
    "ORDER_COLUMNS",
    "Keyset",
    "OrderKind",
    "StateOrder",
    "StateSelection",
    "column_predicates",
    "sort_key",
]
