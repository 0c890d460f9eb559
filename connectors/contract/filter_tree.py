"""Filter trees as the planner evaluates them and connectors may compile them.

A tree is made of `AllOf`, `AnyOf` and `Not` nodes over two kinds of leaves: a `Predicate` on
the element's own normalised values, and a `RelationPredicate`, true when an element related
to it by one relation in one direction (one hop) satisfies its predicate. `evaluate` is the
reference semantics; a store that compiles a tree (`own_values_bound` of the caller's tree,
which `SearchFilter.tree` carries, or the root conjuncts that `pushdown` hands out) must agree
with it. The user-facing grammar that builds these trees lives in
`uda.query.filters`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from connectors.contract.predicates import PUSHDOWN_OPS, Op, Predicate, Scalar

Direction = Literal["out", "in"]
Values = Mapping[str, Scalar]


@dataclass(frozen=True, kw_only=True)
class RelationPredicate:
    """True when a related element, one hop along `relation`, satisfies `predicate`.

    `direction="out"` follows edges from the element (`partOf.name`); `"in"` follows edges
    into it (`~governedBy.element_id`). Only related elements the caller may see count: the
    planner hands `evaluate` the visible ones alone.
    """

    relation: str
    direction: Direction
    predicate: Predicate

    @property
    def path(self) -> str:
        """The path as the grammar spells it: `partOf.name` or `~governedBy.name`."""
        prefix = "~" if self.direction == "in" else ""
        return f"{prefix}{self.relation}.{self.predicate.field}"


@dataclass(frozen=True, kw_only=True)
class AllOf:
    """True when every child is (an empty `AllOf` is true)."""

    children: tuple[FilterNode, ...]


@dataclass(frozen=True, kw_only=True)
class AnyOf:
    """True when at least one child is."""

    children: tuple[FilterNode, ...]


@dataclass(frozen=True, kw_only=True)
class Not:
    """True when its child is not."""

    child: FilterNode


FilterNode = AllOf | AnyOf | Not | Predicate | RelationPredicate

Related = Callable[[str, Direction], Iterable[Values]]
"""The values of an element's visible neighbours along (relation, direction)."""


def _no_neighbours(relation: str, direction: Direction) -> Iterable[Values]:
    del relation, direction
    return ()


def evaluate(node: FilterNode, values: Values, related: Related = _no_neighbours) -> bool:
    """The reference semantics of a tree on one element's values and its neighbours'."""
    match node:
        case Predicate():
            return node.matches(values)
        case RelationPredicate():
            return any(node.predicate.matches(v) for v in related(node.relation, node.direction))
        case AllOf():
            return all(evaluate(child, values, related) for child in node.children)
        case AnyOf():
            return any(evaluate(child, values, related) for child in node.children)
        case Not():
            return not evaluate(node.child, values, related)


def leaves(node: FilterNode) -> Iterator[Predicate | RelationPredicate]:
    """Every leaf of the tree, depth first."""
    match node:
        case Predicate() | RelationPredicate():
            yield node
        case AllOf() | AnyOf():
            for child in node.children:
                yield from leaves(child)
        case Not():
            yield from leaves(node.child)


def relation_predicates(node: FilterNode) -> list[RelationPredicate]:
    """The relation leaves: what the planner must read neighbours for."""
    return [leaf for leaf in leaves(node) if isinstance(leaf, RelationPredicate)]


def pushdown(node: FilterNode) -> tuple[Predicate, ...]:
    """Predicates every match must satisfy, in forms every store can apply.

    Only conjuncts of the root qualify (a leaf under `AnyOf` or `Not` need not hold for a
    match), only on the element's own values (a neighbour's are not in a chunk's metadata),
    and only positive operators (a store lacking a field then returns fewer candidates, never
    a wrong one; phase 3 re-checks everything). `$between` travels as `$gte` and `$lte`.
    """
    conjuncts = node.children if isinstance(node, AllOf) else (node,)
    out: list[Predicate] = []
    for leaf in conjuncts:
        if isinstance(leaf, AllOf):
            out.extend(pushdown(leaf))
        elif isinstance(leaf, Predicate) and leaf.op in PUSHDOWN_OPS:
            out.append(leaf)
        elif isinstance(leaf, Predicate) and leaf.op is Op.BETWEEN:
            low, high = leaf.value if isinstance(leaf.value, tuple) else (leaf.value, leaf.value)
            out.append(Predicate(field=leaf.field, op=Op.GTE, value=low))
            out.append(Predicate(field=leaf.field, op=Op.LTE, value=high))
    return tuple(out)


def required_relations(node: FilterNode) -> tuple[RelationPredicate, ...]:
    """The relation leaves every match must satisfy: the root's conjuncts, through `AllOf`.

    A store that holds edges and its elements' states (the system of record) can apply them
    as "a visible neighbour along this relation matches"; the planner re-checks them.
    """
    conjuncts = node.children if isinstance(node, AllOf) else (node,)
    out: list[RelationPredicate] = []
    for leaf in conjuncts:
        if isinstance(leaf, AllOf):
            out.extend(required_relations(leaf))
        elif isinstance(leaf, RelationPredicate):
            out.append(leaf)
    return tuple(out)


MATCH_ALL = AllOf(children=())
"""The tree every element satisfies (an empty conjunction)."""
MATCH_NONE = AnyOf(children=())
"""The tree no element satisfies (an empty disjunction)."""


def own_values_bound(node: FilterNode) -> FilterNode:
    """A tree over the element's own values that every match of `node` satisfies.

    What a store can apply: a relation leaf reads neighbours, which a store's rows do not
    hold, so it is replaced by "true" where a match needs it true (an even number of `Not`
    above it) and by "false" under an odd number of `Not` (where a match needs it false):
    the result is a sound relaxation, exact when `node` has no relation leaf. The result is
    simplified (`MATCH_ALL` when nothing constrains the element's own values, `MATCH_NONE`
    when nothing can match).
    """
    return _relax(node, positive=True)


def _relax(node: FilterNode, *, positive: bool) -> FilterNode:
    match node:
        case Predicate():
            return node
        case RelationPredicate():
            return MATCH_ALL if positive else MATCH_NONE
        case AllOf():
            return all_of([_relax(c, positive=positive) for c in node.children])
        case AnyOf():
            return any_of([_relax(c, positive=positive) for c in node.children])
        case Not():
            return negate(_relax(node.child, positive=not positive))


def all_of(children: Iterable[FilterNode]) -> FilterNode:
    """The conjunction of `children`, simplified (nested `AllOf` flattened, trues dropped)."""
    kept: list[FilterNode] = []
    for child in children:
        if child == MATCH_NONE:
            return MATCH_NONE
        if isinstance(child, AllOf):
            kept.extend(child.children)
        else:
            kept.append(child)
    return kept[0] if len(kept) == 1 else AllOf(children=tuple(kept))


def any_of(children: Iterable[FilterNode]) -> FilterNode:
    """The disjunction of `children`, simplified (nested `AnyOf` flattened, falses dropped)."""
    kept: list[FilterNode] = []
    for child in children:
        if child == MATCH_ALL:
            return MATCH_ALL
        if isinstance(child, AnyOf):
            kept.extend(child.children)
        else:
            kept.append(child)
    return kept[0] if len(kept) == 1 else AnyOf(children=tuple(kept))


def negate(child: FilterNode) -> FilterNode:
    """`Not(child)`, simplified (constants flipped, double negation removed)."""
    if child == MATCH_ALL:
        return MATCH_NONE
    if child == MATCH_NONE:
        return MATCH_ALL
    if isinstance(child, Not):
        return child.child
    return Not(child=child)


def to_json(node: FilterNode) -> dict[str, Any]:
    """The tree as plain data (plans, logs, persisted queries)."""
    match node:
        case Predicate():
            return {"field": node.field, "op": node.op.value, "value": _plain(node.value)}
        case RelationPredicate():
            predicate = node.predicate
            return {"path": node.path, "op": predicate.op.value, "value": _plain(predicate.value)}
        case AllOf():
            return {"and": [to_json(c) for c in node.children]}
        case AnyOf():
            return {"or": [to_json(c) for c in node.children]}
        case Not():
            return {"not": to_json(node.child)}


def _plain(value: Scalar | tuple[Scalar, ...]) -> Scalar | list[Scalar]:
    return list(value) if isinstance(value, tuple) else value


def describe(node: FilterNode) -> str:
    """The tree in one line, for `explain()` and plans."""
    match node:
        case Predicate():
            return f"{node.field} {node.op.value} {node.value!r}"
        case RelationPredicate():
            return f"{node.path} {node.predicate.op.value} {node.predicate.value!r}"
        case AllOf():
            return "(" + " AND ".join(describe(c) for c in node.children) + ")"
        case AnyOf():
            return "(" + " OR ".join(describe(c) for c in node.children) + ")"
        case Not():
            return f"NOT {describe(node.child)}"


__all__ = [
    "MATCH_ALL",
    "MATCH_NONE",
    "AllOf",
    "AnyOf",
    "Direction",
    "FilterNode",
    "Not",
    "Related",
    "RelationPredicate",
    "Values",
    "all_of",
    "any_of",
    "describe",
    "evaluate",
    "leaves",
    "negate",
    "own_values_bound",
    "pushdown",
    "relation_predicates",
    "required_relations",
    "to_json",
]
