"""`order_by` of a structured retrieval: which key, of which kind, which direction."""

from __future__ import annotations

from datetime import date, datetime
from enum import Enum

from connectors.contract.selection import ORDER_COLUMNS, OrderKind, StateOrder
from uda.errors import InvalidRequestError
from uda.query.filters.fields import base_type, filterable_fields, suggest

DEFAULT_ORDER = StateOrder(field="element_id", kind="text")
"""Without `order_by`, rows come by element id: stable, and resumable by a cursor."""


def _kind(annotation: object) -> OrderKind | None:
    """How values of a field of this type order (None: they do not)."""
    target = base_type(annotation)
    if target is bool:
        return None
    if target in (int, float, datetime, date):
        return "number"  # dates and datetimes are stored as epoch days and milliseconds
    if target is str:
        return "text"
    if isinstance(target, type) and issubclass(target, Enum):
        values = [member.value for member in target]
        if all(isinstance(v, str) for v in values):
            return "text"
    return None


def orderable_fields() -> dict[str, OrderKind]:
    """Every key `order_by` accepts, with how it orders."""
    out: dict[str, OrderKind] = {}
    for name, annotation in filterable_fields().items():
        kind = _kind(annotation)
        if kind is not None:
            out[name] = kind
    out.update({name: kind for name, (_, kind) in ORDER_COLUMNS.items()})
    return dict(sorted(out.items()))


def parse_order(order_by: str | None) -> StateOrder:
    """`"timestamp"`, `"-timestamp"`, `"name"` or any orderable field (`-`: descending).

    Raises:
        InvalidRequestError: naming `order_by`, the nearest orderable key and all of them.
    """
    if order_by is None:
        return DEFAULT_ORDER
    descending = order_by.startswith("-")
    name = order_by[1:] if descending else order_by
    known = orderable_fields()
    kind = known.get(name)
    if kind is None:
        raise InvalidRequestError(
            f"order_by: cannot order by {name!r}{suggest(name, known)}; orderable: "
            f"{', '.join(known)} (prefix '-' for descending)",
            field="order_by",
            value=order_by,
        )
    return StateOrder(field=name, kind=kind, descending=descending)


def describe_order(order: StateOrder) -> str:
    """The order as `order_by` spells it, then the tie-break."""
    return f"{'-' if order.descending else ''}{order.field}, element_id"


__all__ = ["DEFAULT_ORDER", "describe_order", "orderable_fields", "parse_order"]
