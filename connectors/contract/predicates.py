"""Filter predicates as connectors receive them: a field, an operator, a normalised value.

The planner (`uda.query.filters`) validates a caller's filters against the ontology and
normalises their values; connectors compile these predicates into their own query languages
(or evaluate them with `Predicate.matches`), so the values they exchange live beneath both.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # what every store can hold

Scalar = str | int | float | bool


class Op(StrEnum):
    """Comparison operators of a context filter."""

    EQ = "$eq"
    NE = "$ne"
    IN = "$in"
    NIN = "$nin"
    GT = "$gt"
    GTE = "$gte"
    LT = "$lt"
    LTE = "$lte"
    BETWEEN = "$between"
    LIKE = "$like"
    ILIKE = "$ilike"
    EXISTS = "$exists"


# Positive operators can be pushed down to a store without risk: a store that lacks the
# field simply returns fewer candidates, and phase 3 re-checks everything anyway.
PUSHDOWN_OPS = frozenset({Op.EQ, Op.IN, Op.GT, Op.GTE, Op.LT, Op.LTE})
ORDERED_OPS = frozenset({Op.GT, Op.GTE, Op.LT, Op.LTE, Op.BETWEEN})
PATTERN_OPS = frozenset({Op.LIKE, Op.ILIKE})


@dataclass(frozen=True, kw_only=True)
class Predicate:
    """One normalised comparison: `field op value`."""

    field: str
    op: Op
    value: Scalar | tuple[Scalar, ...]

    def matches(self, values: Mapping[str, Scalar]) -> bool:
        """Evaluate on an element's normalised filter values.

        An absent field matches only the negative operators.
        """
        present = self.field in values
        actual = values.get(self.field)
        match self.op:
            case Op.EQ:
                return present and actual == self.value
            case Op.NE:
                return not present or actual != self.value
            case Op.IN:
                return present and actual in typing.cast("tuple[Scalar, ...]", self.value)
            case Op.NIN:
                return not present or actual not in typing.cast("tuple[Scalar, ...]", self.value)
            case Op.EXISTS:
                return present == self.value
            case Op.LIKE | Op.ILIKE:
                return (
                    isinstance(actual, str)
                    and isinstance(self.value, str)
                    and like(self.value, actual, fold_case=self.op is Op.ILIKE)
                )
            case Op.BETWEEN:
                low, high = typing.cast("tuple[Any, Any]", self.value)
                return _orderable(actual, low) and low <= typing.cast("Any", actual) <= high
            case _:
                if not _orderable(actual, self.value):
                    return False
                return _compare(self.op, typing.cast("Any", actual), typing.cast("Any", self.value))


def _orderable(actual: Scalar | None, bound: object) -> bool:
    """Whether `actual` compares with `bound`: both strings, or both numbers (no booleans)."""
    if actual is None or isinstance(actual, bool):
        return False
    return isinstance(actual, str) == isinstance(bound, str)


def like(pattern: str, text: str, *, fold_case: bool = False) -> bool:
    r"""SQL `LIKE`: `%` any run of characters, `_` any one character, `\` escapes the next.

    Matched in O(len(pattern) * len(text)) at worst, never by backtracking over every split
    of the text: a pattern cannot make a filter take exponential time. `fold_case` is
    `ILIKE` (Unicode case folding).
    """
    if fold_case:
        pattern, text = pattern.casefold(), text.casefold()
    tokens = _like_tokens(pattern)
    # Greedy two-pointer wildcard matching: on a mismatch, resume just after the last `%`,
    # which then swallows one more character; each `%` is revisited at most len(text) times.
    t = p = 0
    star_p, star_t = -1, 0
    while t < len(text):
        if (
            p < len(tokens)
            and tokens[p] is not _ANY_RUN
            and (tokens[p] is _ANY_ONE or tokens[p] == text[t])
        ):
            t, p = t + 1, p + 1
        elif p < len(tokens) and tokens[p] is _ANY_RUN:
            star_p, star_t = p, t
            p += 1
        elif star_p >= 0:
            star_t += 1
            t, p = star_t, star_p + 1
        else:
            return False
    while p < len(tokens) and tokens[p] is _ANY_RUN:
        p += 1
    return p == len(tokens)


class _Wildcard:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_ANY_RUN = _Wildcard("%")
_ANY_ONE = _Wildcard("_")


def _like_tokens(pattern: str) -> list[str | _Wildcard]:
    tokens: list[str | _Wildcard] = []
    escaped = False
    for char in pattern:
        if escaped:
            tokens.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "%":
            if not tokens or tokens[-1] is not _ANY_RUN:  # `%%` is one `%`
                tokens.append(_ANY_RUN)
        elif char == "_":
            tokens.append(_ANY_ONE)
        else:
            tokens.append(char)
    if escaped:  # a trailing backslash stands for itself, as in PostgreSQL
        tokens.append("\\")
    return tokens


def _compare(op: Op, actual: Any, bound: Any) -> bool:
    if op is Op.GT:
        return actual > bound
    if op is Op.GTE:
        return actual >= bound
    if op is Op.LT:
        return actual < bound
    return actual <= bound
