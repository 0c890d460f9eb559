"""Filterable fields and their values, normalised the same way in every store.

Field values are normalised the same way everywhere (strings, numbers, booleans; datetimes
as epoch milliseconds, dates as epoch days), so the vector store's metadata, the system of
record and the authoritative check in phase 3 agree.
"""

from __future__ import annotations

import difflib
import math
import types
import typing
from collections.abc import Iterable
from datetime import date, datetime
from enum import Enum
from typing import Any

from connectors.contract.predicates import INT64_MAX, INT64_MIN, Scalar
from ontology import Element, element_class, element_types
from uda.hlc import epoch_ms

# Fields that are not filterable: free text and the store's own bookkeeping.
_NOT_FILTERABLE = frozenset({"text", "extras", "hlc", "version"})

_EPOCH_DAY = date(1970, 1, 1)


def filterable_fields() -> dict[str, Any]:
    """Every filterable field over the registered element types, with its annotation."""
    fields: dict[str, Any] = {"element_type": str}
    for type_name in element_types():
        cls = element_class(type_name)
        if cls is None:  # pragma: no cover - registry and its names agree
            continue
        for name, info in cls.model_fields.items():
            if name not in _NOT_FILTERABLE:
                fields.setdefault(name, info.annotation)
    return fields


def base_type(annotation: Any) -> Any:
    """The type a field holds, with `None` taken out of an optional (`str | None` -> `str`)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else str
    return annotation


def normalise(value: Any, annotation: Any = None) -> Scalar:
    """Normalise a field value (or a filter operand for a field of `annotation`)."""
    target = base_type(annotation)
    if isinstance(value, Enum):
        return typing.cast("Scalar", value.value)
    if isinstance(value, datetime) or (target is datetime and isinstance(value, str)):
        moment = datetime.fromisoformat(value) if isinstance(value, str) else value
        return epoch_ms(moment)
    if isinstance(value, date) or (target is date and isinstance(value, str)):
        day = date.fromisoformat(value) if isinstance(value, str) else value
        return (day - _EPOCH_DAY).days
    if isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"unsupported filter value {value!r}")


def normalise_operand(value: Any, annotation: Any) -> Scalar:
    """Normalise a filter operand, checking it against the field's type.

    Raises:
        TypeError, ValueError: the operand cannot be a value of the field.
    """
    target = base_type(annotation)
    if isinstance(target, type) and issubclass(target, Enum) and not isinstance(value, Enum):
        allowed = [m.value for m in target]
        if value not in allowed:
            raise ValueError(f"expected one of {allowed}")
    elif target in (datetime, date):
        if not isinstance(value, datetime | date | str):
            raise TypeError(f"expected a {target.__name__} or an ISO string")
    elif target is bool:
        if not isinstance(value, bool):
            raise TypeError("expected true or false")
    elif target in (int, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError("expected a number")
        # Stores hold 64-bit integers and finite doubles; anything else could match nothing
        # but would fail inside a backend instead of here.
        if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
            raise ValueError("out of the 64-bit integer range")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("expected a finite number")
    elif target is str and not isinstance(value, str):
        raise TypeError("expected a string")
    return normalise(value, annotation)


def element_filter_values(element: Element) -> dict[str, Scalar]:
    """The normalised, filterable values of an element (absent when None)."""
    values: dict[str, Scalar] = {"element_type": element.type_name()}
    for name, info in type(element).model_fields.items():
        if name in _NOT_FILTERABLE:
            continue
        raw = getattr(element, name)
        if raw is not None:
            values[name] = normalise(raw, info.annotation)
    return values


def suggest(name: str, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the known name closest to `name`, or nothing."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
