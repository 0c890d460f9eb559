"""Bounds on what one request may hold, checked before anything else reads it.

Every surface builds its request through the same door (`SearchRequest.build`,
`AggregateRequest.build`, which `ExportRequest` inherits, and the HTTP body parser), so one
check here holds for the Python API, the CLI, HTTP, the remote client, the agent tools and
MCP alike. It runs before pydantic does: a model-level "before" validator would make HTTP's
strict JSON parsing see Python objects and refuse its ISO datetimes. A request beyond a bound is an
`InvalidRequestError` naming the JSON path and the bound, raised before any backend is
called; the check walks the request without recursion, so a hostile value costs no more
than the bound.

| bound | value |
|---|---|
| nesting of lists and objects | `MAX_DEPTH` (32) |
| items of one list, keys of one object | `MAX_ITEMS` (1,000) |
| values in one request (scalars, lists and objects together) | `MAX_VALUES` (10,000) |
| characters of one string | `MAX_STRING` (10,000; the query 4,000) |
| numbers | finite: no NaN, no infinity |
| strings | no NUL, no lone surrogate (`connectors.contract.characters`) |

The filter grammar has tighter bounds of its own (`uda.query.filters.grammar`: 5 levels of
filter objects, 64 comparisons, 256-character patterns).
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from connectors.contract.characters import forbidden_character
from uda.errors import InvalidRequestError, UnknownFilterFieldError

MAX_DEPTH = 32
MAX_ITEMS = 1_000
MAX_VALUES = 10_000
MAX_STRING = 10_000
_short = reprlib.Repr()
_short.maxlevel, _short.maxstring, _short.maxother, _short.maxlist, _short.maxdict = (
    2,
    60,
    60,
    4,
    4,
)


def short(value: object) -> str:
    """A value as an error message shows it: a bounded repr, whatever its size or depth."""
    return _short.repr(value)


FILTERS = "context_filters"


@dataclass(frozen=True)
class Violation:
    """Where a request goes beyond a bound: the JSON path, what is wrong, and the value.

    The value is kept for a scalar only: an error never carries a whole list or object.
    """

    path: str
    message: str
    value: object = None


def violation(data: Mapping[str, Any]) -> Violation | None:
    """The first place where `data` goes beyond a bound (None: within every bound).

    Numbers inside `context_filters` are the filter grammar's to judge: it knows each field's
    type and names the field (`context_filters.confidence`) in its error.
    """
    stack: list[tuple[object, str, int]] = [(v, str(k), 1) for k, v in data.items()]
    stack.reverse()
    seen = 0
    while stack:
        value, path, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            return Violation(path, f"a request holds at most {MAX_VALUES} values")
        if isinstance(value, str):
            if len(value) > MAX_STRING:
                too_long = f"a string has at most {MAX_STRING} characters, not {len(value)}"
                return Violation(path, too_long)
            problem = forbidden_character(value)
            if problem is not None:
                return Violation(path, f"holds {problem}, which no request may", value)
        elif isinstance(value, float):
            if not math.isfinite(value) and not path.startswith(FILTERS):
                return Violation(path, f"numbers must be finite, not {value!r}", value)
        elif isinstance(value, Mapping | list | tuple):
            if depth > MAX_DEPTH:
                return Violation(path, f"lists and objects nest at most {MAX_DEPTH} deep")
            items = _items(cast("Mapping[object, object] | Sequence[object]", value), path)
            if len(items) > MAX_ITEMS:
                many = f"a list or object has at most {MAX_ITEMS} items, not {len(items)}"
                return Violation(path, many)
            stack.extend((child, where, depth + 1) for where, child in reversed(items))
    return None


def _items(
    value: Mapping[object, object] | Sequence[object], path: str
) -> list[tuple[str, object]]:
    """The children of a list or object, each with its JSON path."""
    if isinstance(value, Mapping):
        return [(f"{path}.{key}", child) for key, child in value.items()]
    return [(f"{path}[{index}]", child) for index, child in enumerate(value)]


def check(data: Mapping[str, Any]) -> None:
    """Refuse a request's fields beyond a bound, before a model or a backend reads them.

    Raises:
        UnknownFilterFieldError: beyond a bound inside `context_filters` (the class every
            filter mistake raises).
        InvalidRequestError: beyond a bound elsewhere. Both name the JSON path (`field`).
    """
    found = violation(data)
    if found is None:
        return
    path = found.path if len(found.path) <= 200 else found.path[:197] + "..."
    error = UnknownFilterFieldError if path.startswith(FILTERS) else InvalidRequestError
    raise error(f"{path}: {found.message}", field=path, value=found.value)


__all__ = [
    "FILTERS",
    "MAX_DEPTH",
    "MAX_ITEMS",
    "MAX_STRING",
    "MAX_VALUES",
    "Violation",
    "check",
    "short",
    "violation",
]
