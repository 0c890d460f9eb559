"""Relation paths: the values of the neighbours a caller may see, read in one batch.

A leaf such as `partOf.name == "payments"` is true when an element reached over one `partOf`
edge matches. Its neighbours are read for all candidates at once: one expansion of one hop
per graph store (both directions, only the relations the tree names, valid at `as_of`), then
one read of the neighbours' states from the system of record. A neighbour the caller may not
see is left out before any predicate looks at it, so a filter on a hidden element's value
behaves exactly as if that element did not exist (`partOf.name == "secret"` reveals nothing).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from connectors.base import GraphCapable, RelationalCapable
from connectors.contract.filter_tree import (
    Direction,
    FilterNode,
    Related,
    Values,
    relation_predicates,
)
from uda.errors import MissingCapabilityError
from uda.query.clearance import Clearance, state_visible
from uda.query.concurrency import together

Key = tuple[str, str, Direction]  # (element id, relation, direction)


@dataclass(frozen=True, kw_only=True)
class Neighbours:
    """Visible neighbours' filter values, by (element, relation, direction)."""

    values: Mapping[Key, tuple[Values, ...]]

    def of(self, element_id: str) -> Related:
        """The `related` argument of `filter_tree.evaluate` for one element."""

        def related(relation: str, direction: Direction) -> Iterable[Values]:
            return self.values.get((element_id, relation, direction), ())

        return related


NO_NEIGHBOURS = Neighbours(values={})


async def read_neighbours(
    tree: FilterNode,
    element_ids: Sequence[str],
    *,
    graphs: Sequence[GraphCapable],
    system_of_record: RelationalCapable,
    clearance: Clearance,
    as_of: int | None,
) -> Neighbours:
    """The visible one-hop neighbours of `element_ids` along the relations `tree` names.

    Raises:
        MissingCapabilityError: the tree has a relation path and no connector is GraphCapable.
    """
    paths = relation_predicates(tree)
    if not paths or not element_ids:
        return NO_NEIGHBOURS
    if not graphs:
        raise MissingCapabilityError(
            "relation paths in context_filters need a GraphCapable connector in the profile",
            field="context_filters",
            value=sorted({p.path for p in paths}),
        )
    relations = tuple(sorted({p.relation for p in paths}))
    wanted = {(p.relation, p.direction) for p in paths}
    subgraphs = await together(
        [g.expand(list(element_ids), 1, relations, as_of, backward_hops=1) for g in graphs]
    )
    ids = set(element_ids)
    linked: dict[Key, set[str]] = defaultdict(set)
    for edge in {e.key: e for sub in subgraphs for e in sub.edges}.values():
        if edge.source_id in ids and (edge.relation, "out") in wanted:
            linked[(edge.source_id, edge.relation, "out")].add(edge.target_id)
        if edge.target_id in ids and (edge.relation, "in") in wanted:
            linked[(edge.target_id, edge.relation, "in")].add(edge.source_id)
    reached = sorted({n for found in linked.values() for n in found})
    states = await system_of_record.fetch(reached, as_of) if reached else {}
    shown = {eid: s.filter_values for eid, s in states.items() if state_visible(clearance, s)}
    return Neighbours(
        values={
            key: tuple(shown[n] for n in sorted(found) if n in shown)
            for key, found in linked.items()
        }
    )
