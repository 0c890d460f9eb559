r"""The filter grammar: `context_filters` as a caller writes it, parsed into a filter tree.

Two spellings build the same tree (`connectors.contract.filter_tree`):

- The object form. Leaves `{field: value}` (equality), `{field: [v1, v2]}` (any of) and
  `{field: {op: operand, ...}}` with `$eq $ne $gt $gte $lt $lte $in $nin`, `$between: [lo, hi]`
  (inclusive), `$like` / `$ilike` (SQL patterns: `%`, `_`, `\` escapes) and
  `$exists: true|false`. Nodes `{"$and": [f, ...]}`, `{"$or": [f, ...]}`, `{"$not": f}`; the
  sibling keys of one object are ANDed. A field may be a relation path: `partOf.name` (an
  element reached by an outgoing `partOf` edge in one hop), `~governedBy.element_id` (over
  an incoming edge).
- The seed design's form, for agents that learnt it: groups `{"op": "AND"|"OR", "children":
  [...]}` and leaves `{"path": "status", "condition": {"op": "eq", "value": "accepted"}}`
  (ops `eq neq lt lte gt gte between in not_in like ilike exists`; as in that design, `like`
  ignores case).

Bounds (a `UserError` naming the limit and the JSON path beyond it): objects nest at most
`MAX_DEPTH` deep, a tree has at most `MAX_LEAVES` comparisons, a pattern at most
`MAX_PATTERN` characters. The parser checks depth before it descends, so a hostile tree
costs no more than the limit.
"""

from __future__ import annotations

import reprlib
import typing
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from enum import Enum
from typing import Any

from connectors.contract.filter_tree import (
    AllOf,
    AnyOf,
    Direction,
    FilterNode,
    Not,
    RelationPredicate,
)
from connectors.contract.predicates import ORDERED_OPS, PATTERN_OPS, Op, Predicate, Scalar
from ontology import element_types, relation_spec, relation_types
from uda.errors import UnknownFilterFieldError
from uda.query.filters.fields import base_type, filterable_fields, normalise_operand, suggest

MAX_DEPTH = 5
MAX_LEAVES = 64
MAX_PATTERN = 256
ROOT = "context_filters"

_SEED_OPS = {
    "eq": Op.EQ,
    "neq": Op.NE,
    "ne": Op.NE,
    "lt": Op.LT,
    "lte": Op.LTE,
    "gt": Op.GT,
    "gte": Op.GTE,
    "between": Op.BETWEEN,
    "in": Op.IN,
    "not_in": Op.NIN,
    "nin": Op.NIN,
    "like": Op.ILIKE,  # the seed design's `like` is case-insensitive
    "ilike": Op.ILIKE,
    "exists": Op.EXISTS,
}
_LOGICAL = ("$and", "$or", "$not")
_short = reprlib.Repr()
_short.maxlevel, _short.maxstring, _short.maxother = 2, 60, 60


def parse_filters(context_filters: Mapping[str, Any]) -> FilterNode:
    """Validate `context_filters` against the ontology and build its filter tree.

    `{}` is the tree that matches everything (`AllOf` with no children).

    Raises:
        UnknownFilterFieldError: an unknown field, path, relation or operator, an operand of
            the wrong type, a malformed node or a tree beyond the bounds; `field` is the JSON
            path of the offending node (`context_filters.$or[1].status`).
    """
    if not context_filters:
        return AllOf(children=())
    return _Parser().node(context_filters, ROOT, depth=1)


def _error(path: str, message: str, value: Any = None) -> UnknownFilterFieldError:
    return UnknownFilterFieldError(f"{path}: {message}", field=path, value=value)


class _Parser:
    def __init__(self) -> None:
        self.fields = filterable_fields()
        self.leaves = 0

    # -- nodes --------------------------------------------------------------------------
    def node(self, spec: Any, path: str, depth: int) -> FilterNode:
        if depth > MAX_DEPTH:
            raise _error(path, f"filter trees nest at most {MAX_DEPTH} objects deep")
        if not isinstance(spec, Mapping) or not spec:
            raise _error(path, f"expected a non-empty filter object, got {_short.repr(spec)}")
        node = typing.cast("Mapping[Any, Any]", spec)
        keys = set(node)
        if keys == {"op", "children"}:
            return self.seed_group(node, path, depth)
        if keys in ({"path", "condition"}, {"path", "condition", "value_kind"}):
            return self.seed_leaf(node, path)
        children: list[FilterNode] = []
        for key, value in node.items():
            if not isinstance(key, str):
                raise _error(path, f"filter keys are field names, got {_short.repr(key)}")
            here = f"{path}.{key}"
            if key in ("$and", "$or"):
                items = self.items(value, here)
                parsed = tuple(self.node(v, f"{here}[{i}]", depth + 1) for i, v in enumerate(items))
                children.append(AllOf(children=parsed) if key == "$and" else AnyOf(children=parsed))
            elif key == "$not":
                children.append(Not(child=self.node(value, here, depth + 1)))
            elif key.startswith("$"):
                raise _error(
                    here, f"unknown logical operator {key!r}{suggest(key, _LOGICAL)}", value=key
                )
            else:
                children.extend(self.field(key, value, here))
        return children[0] if len(children) == 1 else AllOf(children=tuple(children))

    @staticmethod
    def items(value: Any, path: str) -> Sequence[Any]:
        if not isinstance(value, list | tuple) or not value:
            raise _error(path, f"expected a non-empty list of filters, got {_short.repr(value)}")
        return typing.cast("Sequence[Any]", value)

    def seed_group(self, node: Mapping[Any, Any], path: str, depth: int) -> FilterNode:
        op = node["op"]
        if not isinstance(op, str) or op.upper() not in ("AND", "OR"):
            raise _error(f"{path}.op", f"a group's op is AND or OR, got {_short.repr(op)}", op)
        items = self.items(node["children"], f"{path}.children")
        parsed = tuple(
            self.node(v, f"{path}.children[{i}]", depth + 1) for i, v in enumerate(items)
        )
        return AllOf(children=parsed) if op.upper() == "AND" else AnyOf(children=parsed)

    def seed_leaf(self, node: Mapping[Any, Any], path: str) -> FilterNode:
        field, condition = node["path"], node["condition"]
        if not isinstance(field, str):
            raise _error(f"{path}.path", f"expected a field path, got {_short.repr(field)}")
        if not isinstance(condition, Mapping) or "op" not in condition:
            raise _error(f"{path}.condition", 'expected {"op": ..., "value": ...}')
        condition = typing.cast("Mapping[str, Any]", condition)
        op_name = condition["op"]
        op = _SEED_OPS.get(op_name) if isinstance(op_name, str) else None
        if op is None:
            raise _error(
                f"{path}.condition.op",
                f"unknown operator {_short.repr(op_name)}: use one of {', '.join(_SEED_OPS)}",
                op_name,
            )
        value = condition.get("value")
        if op is Op.BETWEEN and isinstance(value, Mapping):
            bounds = typing.cast("Mapping[str, Any]", value)
            value = [bounds.get("start"), bounds.get("end")]
        return self.field(field, {op.value: value}, f"{path}.condition")[0]

    # -- leaves -------------------------------------------------------------------------
    def field(self, key: str, spec: Any, path: str) -> list[FilterNode]:
        relation, direction, name = self.resolve(key, path)
        if isinstance(spec, Mapping):
            if not spec:
                raise _error(path, "expected at least one operator")
            items = list(typing.cast("Mapping[Any, Any]", spec).items())
        elif isinstance(spec, list | tuple | set | frozenset):
            items = [(Op.IN.value, list(typing.cast("Any", spec)))]
        else:
            items = [(Op.EQ.value, spec)]
        out: list[FilterNode] = []
        for op_name, operand in items:
            self.leaves += 1
            if self.leaves > MAX_LEAVES:
                raise _error(path, f"a filter tree holds at most {MAX_LEAVES} comparisons")
            predicate = self.predicate(name, op_name, operand, path)
            if relation is None:
                out.append(predicate)
            else:
                out.append(
                    RelationPredicate(relation=relation, direction=direction, predicate=predicate)
                )
        return out

    def resolve(self, key: str, path: str) -> tuple[str | None, Direction, str]:
        """(relation or None, direction, field) of a field name or a relation path."""
        if "." not in key and not key.startswith("~"):
            self.known_field(key, path)
            return None, "out", key
        direction: Direction = "in" if key.startswith("~") else "out"
        relation, _, name = key.removeprefix("~").partition(".")
        if relation_spec(relation) is None:
            raise _error(
                path,
                f"unknown relation {relation!r} in path {key!r}"
                f"{suggest(relation, relation_types())}; relations: {', '.join(relation_types())}",
                value=key,
            )
        if not name or "." in name:
            raise _error(path, f"a relation path is relation.field (one hop), got {key!r}", key)
        self.known_field(name, path)
        return relation, direction, name

    def known_field(self, name: str, path: str) -> None:
        if name not in self.fields:
            raise _error(
                path,
                f"no filterable field named {name!r}{suggest(name, self.fields)}; "
                f"filterable fields: {', '.join(sorted(self.fields))}",
                value=name,
            )

    def predicate(self, field: str, op_name: Any, operand: Any, path: str) -> Predicate:
        try:
            op = Op(op_name)
        except ValueError:
            raise _error(
                path,
                f"unknown operator {_short.repr(op_name)} for {field!r}: use one of "
                f"{', '.join(o.value for o in Op)}",
                value=op_name,
            ) from None
        annotation = self.fields[field]
        try:
            value = _operand(field, op, operand, annotation)
        except (TypeError, ValueError) as exc:
            raise _error(
                path, f"bad operand {_short.repr(operand)} for {field!r} {op.value}: {exc}", operand
            ) from None
        return Predicate(field=field, op=op, value=value)


def operator_allowed(op: Op, annotation: Any) -> bool:
    """Whether the grammar takes `op` on a field of this annotation: THE typing rule.

    Patterns (`$like`, `$ilike`) compare strings; ordered operators and `$between` compare
    numbers, dates, datetimes and strings, never booleans or enumerations (ordering an
    enumeration compares its spellings: `"confidential" < "internal"` means nothing); the
    rest apply to every type. `_operand` enforces it and discovery (`uda.query.discovery`,
    `uda.agent.discovery`) lists it, so what is listed is what parses.
    """
    target = base_type(annotation)
    if op in PATTERN_OPS:
        return target is str
    if op in ORDERED_OPS:
        return target is not bool and not (isinstance(target, type) and issubclass(target, Enum))
    return True


def _operand(field: str, op: Op, operand: Any, annotation: Any) -> Scalar | tuple[Scalar, ...]:
    """The normalised operand of `field op operand`, checked against the field's type."""
    target = base_type(annotation)
    if op is Op.EXISTS:
        if not isinstance(operand, bool):
            raise TypeError("expected true or false")
        return operand
    if op in PATTERN_OPS:
        if not operator_allowed(op, annotation) or not isinstance(operand, str):
            raise TypeError(f"{op.value} compares strings, and {field!r} is {_type_name(target)}")
        if len(operand) > MAX_PATTERN:
            raise ValueError(f"a pattern has at most {MAX_PATTERN} characters")
        return operand
    if op in ORDERED_OPS and (not operator_allowed(op, annotation) or isinstance(operand, bool)):
        if not operator_allowed(op, annotation):
            raise TypeError(
                f"{op.value} orders values, and {field!r} is {_type_name(target)}: "
                "use $eq, $in, $ne or $nin"
            )
        raise TypeError(f"{op.value} needs a number, date or string")
    if op is Op.BETWEEN:
        bounds = typing.cast("Sequence[Any]", operand)
        if not isinstance(operand, list | tuple) or len(bounds) != 2:
            raise TypeError("$between needs [low, high]")
        low, high = (normalise_operand(v, annotation) for v in bounds)
        if isinstance(low, str) != isinstance(high, str):
            raise TypeError("$between needs two bounds of the same type")
        if typing.cast("Any", low) > high:
            raise ValueError("the low bound is above the high bound")
        return (low, high)
    if op in (Op.IN, Op.NIN):
        if not isinstance(operand, list | tuple | set | frozenset) or not operand:
            raise TypeError(f"{op.value} needs a non-empty list")
        value: Scalar | tuple[Scalar, ...] = tuple(
            normalise_operand(v, annotation) for v in typing.cast("Any", operand)
        )
    else:
        value = normalise_operand(operand, annotation)
    if field == "element_type":
        named = value if isinstance(value, tuple) else (value,)
        unknown = sorted(set(named) - set(element_types()))
        if unknown:
            raise ValueError(f"unknown element types {unknown}; known: {element_types()}")
    return value


def _type_name(target: Any) -> str:
    if isinstance(target, type) and issubclass(target, Enum):
        return "an enumeration"
    names: dict[object, str] = {bool: "a boolean", int: "a number", float: "a number"}
    names.update({datetime: "a datetime", date: "a date"})
    return names.get(typing.cast("object", target), "not a string")
