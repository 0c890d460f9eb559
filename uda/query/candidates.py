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
    """The best chunk of one element state on one leg.

    `text` is None when the leg did not read it (ADR 53): phase 3 reads the texts it needs,
    those of the page's snippets and, for a query with an exact term, of every candidate,
    from the system of record (`missing_texts`, `fill_texts`).
    """

    score: float
    chunk_id: str
    version: int
    text: str | None


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
    semantic_raw: Mapping[str, BestChunk],
    lexical_raw: Mapping[str, BestChunk],
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
            into[key] = BestChunk(
                score=hit.score, chunk_id=hit.chunk_id, version=hit.version, text=hit.text
            )


def leg_scores(
    best: Mapping[tuple[str, int], BestChunk], states: Mapping[str, StateHead], visible: set[str]
) -> dict[str, BestChunk]:
    """Best chunks of visible candidates, from the chunks of the state being returned only.

    A hit on another version means the store's copy is stale; it is dropped, not trusted.
    """
    out: dict[str, BestChunk] = {}
    for (eid, version), hit in best.items():
        if eid in visible and states[eid].version == version:
            out[eid] = hit
    return out


def raw_scores(best: Mapping[str, BestChunk]) -> dict[str, tuple[float, str | None]]:
    """A leg's raw score and best chunk text by candidate: what `rank` reads."""
    return {eid: (chunk.score, chunk.text) for eid, chunk in best.items()}


def missing_texts(
    legs: Sequence[Mapping[str, BestChunk]], element_ids: Iterable[str]
) -> list[tuple[str, int, str]]:
    """(element, version, chunk) of the best chunks of these elements whose text is unread."""
    out: dict[str, tuple[str, int, str]] = {}
    for eid in element_ids:
        for leg in legs:
            chunk = leg.get(eid)
            if chunk is not None and chunk.text is None:
                out[chunk.chunk_id] = (eid, chunk.version, chunk.chunk_id)
    return list(out.values())


def fill_texts(legs: Sequence[Mapping[str, BestChunk]], texts: Mapping[str, str]) -> None:
    """Give the best chunks the texts read for them (a chunk no longer stored keeps None)."""
    for leg in legs:
        for chunk in leg.values():
            if chunk.text is None and chunk.chunk_id in texts:
                chunk.text = texts[chunk.chunk_id]


def snippet_chunk(
    semantic: Mapping[str, BestChunk], lexical: Mapping[str, BestChunk], element_id: str
) -> BestChunk | None:
    """The chunk a result shows as its snippet: the semantic leg's best, else the lexical's."""
    return semantic.get(element_id) or lexical.get(element_id)


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
    "fill_texts",
    "graph_candidates",
    "leg_scores",
    "missing_texts",
    "needs_filter_values",
    "raw_scores",
    "searchable_types",
    "snippet_chunk",
]
