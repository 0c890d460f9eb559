"""Context filters: validated against the ontology, evaluated on normalised values.

A filter is `{field: value}` (equality), `{field: [v1, v2]}` (membership) or
`{field: {"$gte": v, ...}}`. Field values are normalised the same way everywhere (strings,
numbers, booleans; datetimes as epoch milliseconds, dates as epoch days), so the vector
store's metadata, the system of record and the authoritative check in phase 3 agree.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from datetime import date, datetime
from enum import Enum
from typing import Any

from connectors.contract.predicates import (
    INT64_MAX,
    INT64_MIN,
    ORDERED_OPS,
    Op,
    Predicate,
    Scalar,
)
from ontology import Element, element_class, element_types
from uda.errors import UnknownFilterFieldError
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


def _base_type(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else str
    return annotation


def normalise(value: Any, annotation: Any = None) -> Scalar:
    """Normalise a field value (or a filter operand for a field of `annotation`)."""
    target = _base_type(annotation)
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
    target = _base_type(annotation)
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


def parse_filters(context_filters: Mapping[str, Any]) -> tuple[Predicate, ...]:
    """Validate `context_filters` against the ontology and normalise them.

    Raises:
        UnknownFilterFieldError: an unknown field, operator, or an operand of the wrong type,
            naming the field (and suggesting the closest known one).
    """
    fields = filterable_fields()
    predicates: list[Predicate] = []
    for field, spec in context_filters.items():
        if field not in fields:
            raise UnknownFilterFieldError(
                f"no filterable field named {field!r}{_suggest(field, fields)}; "
                f"filterable fields: {', '.join(sorted(fields))}",
                field=f"context_filters.{field}",
                value=field,
            )
        annotation = fields[field]
        if isinstance(spec, Mapping):
            items = list(typing.cast("Mapping[str, Any]", spec).items())
        elif isinstance(spec, list | tuple | set | frozenset):
            items = [(Op.IN.value, list(typing.cast("Any", spec)))]
        else:
            items = [(Op.EQ.value, spec)]
        for op_name, operand in items:
            predicates.append(_predicate(field, op_name, operand, annotation))
    return tuple(predicates)


def _predicate(field: str, op_name: str, operand: Any, annotation: Any) -> Predicate:
    where = f"context_filters.{field}"
    try:
        op = Op(op_name)
    except ValueError:
        raise UnknownFilterFieldError(
            f"unknown operator {op_name!r} for {field!r}: use one of "
            f"{', '.join(o.value for o in Op)}",
            field=where,
            value=op_name,
        ) from None
    try:
        if op in (Op.IN, Op.NIN):
            if not isinstance(operand, list | tuple | set | frozenset) or not operand:
                raise TypeError(f"{op.value} needs a non-empty list")
            value: Scalar | tuple[Scalar, ...] = tuple(
                normalise_operand(v, annotation) for v in typing.cast("Any", operand)
            )
        else:
            value = normalise_operand(operand, annotation)
        if field == "element_type":
            unknown = sorted(set(_values(value)) - set(element_types()))
            if unknown:
                raise ValueError(f"unknown element types {unknown}; known: {element_types()}")
        if op in ORDERED_OPS and isinstance(value, bool):
            raise TypeError(f"{op.value} needs a number, date or string")
    except (TypeError, ValueError) as exc:
        raise UnknownFilterFieldError(
            f"bad operand {operand!r} for {field!r} {op.value}: {exc}", field=where, value=operand
        ) from None
    return Predicate(field=field, op=op, value=value)


def _values(value: Scalar | tuple[Scalar, ...]) -> tuple[Scalar, ...]:
    return value if isinstance(value, tuple) else (value,)


def _suggest(field: str, fields: Mapping[str, Any]) -> str:
    import difflib

    close = difflib.get_close_matches(field, list(fields), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
