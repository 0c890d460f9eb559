"""Values that cross the connector boundary: chunks, hits, graph pieces, pushdown filters.

Frozen keyword-only dataclasses with no behaviour beyond small derived properties, so that a
connector author sees exactly what goes in and what must come out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from connectors.contract.filter_tree import MATCH_ALL, FilterNode, evaluate, own_values_bound
from connectors.contract.predicates import Predicate, Scalar

# `valid_to` of a state or an edge that nothing has superseded yet.
OPEN = (1 << 63) - 1


@dataclass(frozen=True, kw_only=True)
class ChunkRecord:
    """One chunk of one element state, with everything a store needs to filter on it.

    A state is valid from its HLC (`valid_from`) until the HLC of the state that replaced it
    (`valid_to`, `OPEN` while current). Stores keep every state's chunks so that `as_of`
    reads can rank old text; re-upserting a chunk replaces its metadata.
    """

    chunk_id: str
    element_id: str
    version: int
    index: int
    text: str
    embedding: Sequence[float] | None
    element_type: str
    name: str
    sensitivity_rank: int
    scope: str | None
    valid_from: int
    valid_to: int
    filter_values: Mapping[str, Scalar] = field(default_factory=dict[str, Scalar])


@dataclass(frozen=True, kw_only=True)
class SearchFilter:
    """What a store may push down: clearance, validity, element types, predicates, a tree.

    `predicates` (positive operators, ANDed) and `tree` (any filter tree) both apply. `tree`
    is held as its `own_values_bound`: a store sees no relation leaf, and a tree that does not
    constrain the element's own values is None. A pushdown may only be looser than the
    authoritative check in phase 3, never stricter; a store should compile `tree` exactly
    where it can (the conformance suite compares it with `evaluate`).
    """

    max_sensitivity_rank: int
    projects: tuple[str, ...] = ()
    all_projects: bool = False
    as_of: int | None = None  # None: current states only
    element_types: tuple[str, ...] | None = None
    predicates: tuple[Predicate, ...] = ()
    tree: FilterNode | None = None

    def __post_init__(self) -> None:
        if self.tree is not None:
            bound = own_values_bound(self.tree)
            object.__setattr__(self, "tree", None if bound == MATCH_ALL else bound)

    def allows_chunk(self, chunk: ChunkRecord) -> bool:
        """Reference semantics of the filter, for stores that filter in Python."""
        if chunk.sensitivity_rank > self.max_sensitivity_rank:
            return False
        if chunk.scope is not None and not self.all_projects and chunk.scope not in self.projects:
            return False
        if self.as_of is None:
            if chunk.valid_to != OPEN:
                return False
        elif not chunk.valid_from <= self.as_of < chunk.valid_to:
            return False
        if self.element_types is not None and chunk.element_type not in self.element_types:
            return False
        if not all(p.matches(chunk.filter_values) for p in self.predicates):
            return False
        return self.tree is None or evaluate(self.tree, chunk.filter_values)


@dataclass(frozen=True, kw_only=True)
class ChunkHit:
    """A chunk found by a vector or text search, with its raw relevance (higher is better).

    `text` is the chunk's text when the store read it with the hit, None when it did not:
    a search keeps a few of a leg's hits, and the planner reads the text of those it shows
    from the system of record (`RelationalCapable.chunk_texts`, ADR 53).
    """

    chunk_id: str
    element_id: str
    version: int
    score: float
    text: str | None = None


@dataclass(frozen=True, kw_only=True)
class GraphNode:
    """A node as the graph store keeps it: identity and type only.

    Properties live in the system of record.
    """

    element_id: str
    element_type: str


@dataclass(frozen=True, kw_only=True)
class GraphEdge:
    """A directed, typed edge, valid from one HLC until another (`OPEN` while current)."""

    source_id: str
    relation: str
    target_id: str
    valid_from: int
    valid_to: int = OPEN

    @property
    def key(self) -> tuple[str, str, str]:
        """The edge's identity."""
        return (self.source_id, self.relation, self.target_id)

    def valid_at(self, as_of: int | None) -> bool:
        """Whether the edge exists at `as_of` (None: now)."""
        if as_of is None:
            return self.valid_to == OPEN
        return self.valid_from <= as_of < self.valid_to


_new = object.__new__


def graph_edge(
    source_id: str, relation: str, target_id: str, valid_from: int, valid_to: int
) -> GraphEdge:
    """`GraphEdge(...)` at less than half the cost, for stores that build hundreds a search.

    A frozen dataclass's __init__ sets each field through object.__setattr__; filling the
    instance dict gives the same object (tests/test_graph_records.py holds it equal).
    """
    edge = _new(GraphEdge)
    edge.__dict__.update(
        source_id=source_id,
        relation=relation,
        target_id=target_id,
        valid_from=valid_from,
        valid_to=valid_to,
    )
    return edge


@dataclass(frozen=True, kw_only=True)
class Subgraph:
    """What an expansion returns: the edges within reach, and the types of their nodes."""

    nodes: Mapping[str, str]
    edges: tuple[GraphEdge, ...]


Direction = Literal["out", "in"]


def walks_back(level: int, backward_hops: int | None) -> bool:
    """Whether hop `level` (0-based) also follows edges from target to source.

    The one traversal rule: graph connectors (`expand`), the planner's re-check over the
    visible edges and the per-result context paths all use it.
    """
    return backward_hops is None or level < backward_hops


__all__ = [
    "OPEN",
    "ChunkHit",
    "ChunkRecord",
    "GraphEdge",
    "GraphNode",
    "SearchFilter",
    "Subgraph",
    "graph_edge",
    "walks_back",
]
