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


# Positive operators can be pushed down to a store without risk: a store that lacks the
# field simply returns fewer candidates, and phase 3 re-checks everything anyway.
PUSHDOWN_OPS = frozenset({Op.EQ, Op.IN, Op.GT, Op.GTE, Op.LT, Op.LTE})
ORDERED_OPS = frozenset({Op.GT, Op.GTE, Op.LT, Op.LTE})


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
            case _:
                if (
                    not present
                    or isinstance(actual, bool)
                    or isinstance(actual, str) != isinstance(self.value, str)
                ):
                    return False
                return _compare(self.op, typing.cast("Any", actual), typing.cast("Any", self.value))


def _compare(op: Op, actual: Any, bound: Any) -> bool:
    if op is Op.GT:
        return actual > bound
    if op is Op.GTE:
        return actual >= bound
    if op is Op.LT:
        return actual < bound
    return actual <= bound
