"""The reads a search makes: one batched call per connector and phase, guarded.

The planner decides what to read and what the answers mean; `StoreReads` makes the reads.
Each goes through the search's `Guard`, so a store that fails or is too late is left out
(optional legs) or fails the search (the system of record), never hangs it; and each first
connects a store that was offline when the client opened (`uda.query.online`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from connectors.base import (
    Connector,
    GraphCapable,
    RelationalCapable,
    TextCapable,
    VectorCapable,
    backend_name,
)
from connectors.contract.filter_tree import relation_predicates
from connectors.contract.records import GraphEdge
from connectors.contract.selection import StateSelection
from connectors.contract.system_of_record import StateHead, StoredState
from uda.errors import BackendUnavailableError
from uda.query.candidates import BestChunk, Phase1, collapse, leg_scores
from uda.query.clearance import state_visible
from uda.query.concurrency import together
from uda.query.deadlines import Guard
from uda.query.filters.related import NO_NEIGHBOURS, Neighbours, read_neighbours
from uda.query.fusion import Leg
from uda.query.online import OfflineStores
from uda.query.plan import Plan

T = TypeVar("T")


class StoreReads:
    """The connectors of a profile by capability, and the reads the planner's phases make.

    Args:
        connectors: the profile's connectors, each used for what it is capable of.
        system_of_record: where whole states and clearances are read.
        offline: stores that could not connect when the client opened.
    """

    def __init__(
        self,
        *,
        connectors: Sequence[Connector],
        system_of_record: RelationalCapable,
        offline: OfflineStores,
    ) -> None:
        self.vector = [c for c in connectors if isinstance(c, VectorCapable)]
        self.text = [c for c in connectors if isinstance(c, TextCapable)]
        self.graph = [c for c in connectors if isinstance(c, GraphCapable)]
        self.sor = system_of_record
        self.sor_name: str = backend_name(system_of_record)
        self._offline = offline

    async def _online(self, connector: Connector, call: Callable[[], Awaitable[T]]) -> T:
        """`call()`, once the connector is connected.

        A store offline when the client opened is connected here, by the first search that
        needs it and that its breaker lets through.
        """
        await self._offline.connected(connector)
        return await call()

    async def retrieve(self, plan: Plan, guard: Guard, embedding: list[float]) -> Phase1:
        """Phase 1: every retrieval leg at once; a leg that fails or is too late is left out.

        Raises:
            BackendUnavailableError: no leg answered at all.
        """
        k = plan.pool_size
        # A leg whose weight is zero cannot change the ranking: do not run it.
        vector = self.vector if plan.weights.get(Leg.SEMANTIC, 0.0) > 0 else []
        text = self.text if plan.weights.get(Leg.LEXICAL, 0.0) > 0 else []
        query = plan.request.query or ""
        calls = [
            guard.optional(
                c.name,
                "semantic",
                lambda c=c: self._online(c, lambda: c.vector_search(embedding, k, plan.pushdown)),
            )
            for c in vector
        ] + [
            guard.optional(
                c.name,
                "lexical",
                lambda c=c: self._online(c, lambda: c.text_search(query, k, plan.pushdown)),
            )
            for c in text
        ]
        results = await together(calls)
        if calls and all(hits is None for hits in results):
            raise BackendUnavailableError(
                ", ".join(sorted({c.name for c in [*vector, *text]})),
                "no retrieval leg answered: "
                + "; ".join(d.describe() for d in plan.degraded[-len(calls) :]),
            )
        out = Phase1()
        for hits in results[: len(vector)]:
            collapse(hits or (), out.semantic)
        for hits in results[len(vector) :]:
            collapse(hits or (), out.lexical)
        return out

    async def expand(
        self, plan: Plan, guard: Guard, candidate_ids: Sequence[str]
    ) -> tuple[list[GraphEdge], set[str]]:
        """Phase 2: the candidates' neighbourhoods; a graph store that fails is left out."""
        if plan.expand_depth == 0 or not self.graph or not candidate_ids:
            return [], set()
        answered = await together(
            [
                guard.optional(
                    g.name,
                    "graph",
                    lambda g=g: self._online(
                        g,
                        lambda: g.expand(
                            candidate_ids,
                            plan.expand_depth,
                            plan.relations,
                            plan.as_of,
                            backward_hops=plan.backward_hops,
                        ),
                    ),
                )
                for g in self.graph
            ]
        )
        subgraphs = [sub for sub in answered if sub is not None]
        edges = {e.key: e for sub in subgraphs for e in sub.edges}
        nodes = {n for sub in subgraphs for n in sub.nodes}
        return list(edges.values()), nodes

    async def neighbours(self, plan: Plan, guard: Guard, element_ids: Sequence[str]) -> Neighbours:
        """What the filter's relation paths need: visible neighbours' values, one batch.

        Not optional: without them a relation path cannot be decided, and leaving it out
        would answer a different question.
        """
        if not relation_predicates(plan.filter) or not element_ids:
            return NO_NEIGHBOURS
        backends = ", ".join([*(g.name for g in self.graph), self.sor_name])

        async def read() -> Neighbours:
            for graph in self.graph:
                await self._online(graph, _nothing)
            return await read_neighbours(
                plan.filter,
                element_ids,
                graphs=self.graph,
                system_of_record=self.sor,
                clearance=plan.clearance,
                as_of=plan.as_of,
            )

        return await guard.required(backends, read)

    async def select_states(self, guard: Guard, selection: StateSelection) -> list[StoredState]:
        """One page of a structured retrieval's states, from the system of record."""
        return await guard.required(self.sor_name, lambda: self.sor.select_states(selection))

    async def heads(
        self, plan: Plan, guard: Guard, element_ids: Sequence[str], *, filter_values: bool
    ) -> dict[str, StateHead]:
        """The heads (states without payloads) of `element_ids`, in one call.

        `filter_values=False`: without them (`UNREAD`), for heads no filter is checked on.
        """
        return await guard.required(
            self.sor_name,
            lambda: self.sor.fetch_heads(element_ids, plan.as_of, filter_values=filter_values),
        )

    async def hydrate(
        self,
        plan: Plan,
        guard: Guard,
        heads: Sequence[StateHead],
        whole: Mapping[str, StoredState],
    ) -> dict[str, StoredState]:
        """Whole states of what a page shows: exactly the versions that were ranked.

        States already read whole (`whole`, a structured page's) are reused; the rest come
        in one read, kept only if still visible (the element may have been reclassified
        since its head was read).
        """
        shown = {h.element_id: whole[h.element_id] for h in heads if h.element_id in whole}
        missing = [h for h in heads if h.element_id not in whole]
        if missing:
            fetched = await guard.required(self.sor_name, lambda: self.sor.fetch_versions(missing))
            shown.update({eid: s for eid, s in fetched.items() if state_visible(plan.clearance, s)})
        return shown

    async def chunk_texts(
        self, guard: Guard, chunks: Sequence[tuple[str, int, str]]
    ) -> dict[str, str]:
        """The text of these (element, version, chunk) chunks, from the system of record.

        Phase 1's hits may come without text (ADR 53): the page's snippets, and the
        candidates' best chunks when the query has an exact term, are read here at once.
        """
        if not chunks:
            return {}
        return await guard.required(self.sor_name, lambda: self.sor.chunk_texts(chunks))

    async def graph_semantic(
        self,
        plan: Plan,
        guard: Guard,
        query_vector: list[float],
        reached: Sequence[str],
        heads: Mapping[str, StateHead],
    ) -> dict[str, BestChunk]:
        """Semantic scores of candidates found only through the graph.

        Without them such a candidate could rank on centrality alone, and the fusion would
        weigh a passage that merely sits next to the seeds like one that also answers the
        query. One batched call per vector connector, for all of them at once.
        """
        if not reached or plan.weights.get(Leg.SEMANTIC, 0.0) <= 0:
            return {}
        results = await together(
            [
                guard.optional(
                    c.name,
                    "semantic",
                    lambda c=c: self._online(
                        c, lambda: c.vector_scores(query_vector, reached, plan.pushdown)
                    ),
                )
                for c in self.vector
            ]
        )
        best: dict[tuple[str, int], BestChunk] = {}
        for hits in results:
            collapse(hits or (), best)
        return leg_scores(best, heads, set(reached))


async def _nothing() -> None:
    return None


__all__ = ["StoreReads"]
