"""What phase 3 ranks: the best chunk of each state per leg, and which states may compete.

The planner (`uda.query.planner`) runs the phases; these are its pure steps between them:
phase 1's hits collapsed to one best chunk per element state, the legs' raw scores of the
visible states, and the eligibility rule (a searchable type of the request, the whole
filter tree) for candidates found by retrieval and through the graph.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from connectors.contract.filter_tree import MATCH_ALL, evaluate, leaves
from connectors.contract.predicates import Predicate
from connectors.contract.records import ChunkHit
from connectors.contract.system_of_record import StateHead, StoredState
from ontology import element_class
from uda.query.filters.related import Neighbours
from uda.query.graph_context import Adjacency
from uda.query.plan import Plan


@dataclass(kw_only=True)
class BestChunk:
    """The best chunk of one element state on one leg."""

    score: float
    text: str


@dataclass(kw_only=True)
class Phase1:
    """Phase 1's best chunk of each element state, per leg."""

    semantic: dict[tuple[str, int], BestChunk] = field(
        default_factory=dict[tuple[str, int], BestChunk]
    )
    lexical: dict[tuple[str, int], BestChunk] = field(
        default_factory=dict[tuple[str, int], BestChunk]
    )


def eligible_candidates(
    plan: Plan,
    candidate_ids: Sequence[str],
    states: Mapping[str, StateHead],
    visible: set[str],
    semantic_raw: Mapping[str, tuple[float, str]],
    lexical_raw: Mapping[str, tuple[float, str]],
    neighbours: Neighbours,
) -> list[str]:
    """Phase 1's candidates that are visible, eligible, and scored on a leg, in their order."""
    scored = [
        eid
        for eid in candidate_ids
        if eid in visible and (eid in semantic_raw or eid in lexical_raw)
    ]
    if plan.filter == MATCH_ALL:  # the common search: the type decides, once per type
        types = searchable_types(plan)
        return [eid for eid in scored if states[eid].element_type in types]
    return [eid for eid in scored if eligible(plan, states[eid], neighbours)]


def graph_candidates(
    plan: Plan,
    graph_nodes: set[str],
    states: Mapping[str, StateHead],
    visible: set[str],
    adj: Adjacency,
    known: set[str],
    neighbours: Neighbours,
) -> list[str]:
    """Nodes the expansion reached over visible edges that may compete as results."""
    return [
        n
        for n in sorted(graph_nodes)
        if n in visible and n not in known and eligible(plan, states[n], neighbours) and n in adj
    ]


def collapse(hits: Iterable[ChunkHit], into: dict[tuple[str, int], BestChunk]) -> None:
    """Chunks to element states: the best chunk wins and is kept as the snippet."""
    for hit in hits:
        key = (hit.element_id, hit.version)
        best = into.get(key)
        if best is None or hit.score > best.score:
            into[key] = BestChunk(score=hit.score, text=hit.text)


def leg_scores(
    best: Mapping[tuple[str, int], BestChunk], states: Mapping[str, StateHead], visible: set[str]
) -> dict[str, tuple[float, str]]:
    """Raw scores of visible candidates, from the chunks of the state being returned only.

    A hit on another version means the store's copy is stale; it is dropped, not trusted.
    """
    out: dict[str, tuple[float, str]] = {}
    for (eid, version), hit in best.items():
        if eid in visible and states[eid].version == version:
            out[eid] = (hit.score, hit.text)
    return out


def needs_filter_values(plan: Plan) -> bool:
    """Whether `eligible` reads the candidates' filter values: a value predicate asks.

    Relation predicates read the neighbours' values (`Neighbours`), not the candidate's.
    """
    return any(isinstance(leaf, Predicate) for leaf in leaves(plan.filter))


def eligible(plan: Plan, state: StateHead | StoredState, neighbours: Neighbours) -> bool:
    """A candidate must be a searchable type of the request and match the filter tree."""
    cls = element_class(state.element_type)
    if cls is None or not cls.knowledge_asset or state.element_type not in plan.element_types:
        return False
    return evaluate(plan.filter, state.filter_values, neighbours.of(state.element_id))


def searchable_types(plan: Plan) -> set[str]:
    """The request's types that are knowledge assets: `eligible`'s type rule, per type."""
    return {
        t
        for t in plan.element_types
        if (cls := element_class(t)) is not None and cls.knowledge_asset
    }


__all__ = [
    "BestChunk",
    "Phase1",
    "collapse",
    "eligible",
    "eligible_candidates",
    "graph_candidates",
    "leg_scores",
    "needs_filter_values",
    "searchable_types",
]
