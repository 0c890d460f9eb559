"""The planner: plan -> dense (and lexical) -> graph -> relational/axiomatic -> results.

Each phase makes one batched call per connector, and the connectors of a phase run
concurrently. Clearance is pushed down into phase 1 and enforced again, authoritatively, in
phase 3 on every candidate, context node and edge.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
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
from connectors.contract.graph_shape import EVERYTHING, GraphShape, ShapeClearance
from connectors.contract.reads import read_scope
from connectors.contract.records import GraphEdge
from connectors.contract.system_of_record import StateClearance, StoredState
from uda.config import SearchDefaults
from uda.embedding import Embedder
from uda.errors import BackendUnavailableError, MissingCapabilityError, PlanError, UDAError
from uda.query.auto.choice import (
    STRUCTURED_CHOICE,
    AutoMode,
    choose,
    pinned_choice,
    profile_choice,
)
from uda.query.auto.shapes import GraphShapes
from uda.query.candidates import (
    BestChunk,
    Phase1,
    collapse,
    eligible,
    eligible_candidates,
    graph_candidates,
    leg_scores,
)
from uda.query.clearance import Clearance, state_visible
from uda.query.concurrency import together
from uda.query.contracts import SearchRequest
from uda.query.cursors import Position
from uda.query.deadlines import Breakers, Budget, Degradation, Guard
from uda.query.filters.related import NO_NEIGHBOURS, Neighbours, read_neighbours
from uda.query.fusion import (
    Fusion,
    Leg,
    ReciprocalRankFusion,
)
from uda.query.graph_context import (
    Adjacency,
    ContextHop,
    context_hops,
    hops_still_visible,
    reachable_subgraph,
)
from uda.query.online import OfflineStores
from uda.query.ordering import DEFAULT_ORDER
from uda.query.plan import Plan, make_plan
from uda.query.ranking import rank
from uda.query.results import SearchResponse
from uda.query.saved import SavedQuery
from uda.query.searches import Searches
from uda.query.structured import select_page, structured_result
from uda.tuning.stored import StoredTuning

T = TypeVar("T")


class Planner:
    """Runs searches over the connectors of a profile, chosen by capability.

    Args:
        connectors: the profile's connectors; at least one must be `VectorCapable`.
        system_of_record: where whole states and clearances are read.
        embedder: embeds the query for the semantic leg.
        defaults: the profile's search defaults, for what a request leaves unset.
        fusion: how the legs' ranks are combined (default: `ReciprocalRankFusion`).
    """

    def __init__(
        self,
        *,
        connectors: Sequence[Connector],
        system_of_record: RelationalCapable,
        embedder: Embedder,
        defaults: SearchDefaults,
        fusion: Fusion | None = None,
        offline: OfflineStores | Iterable[str] = (),
    ) -> None:
        self._vector = [c for c in connectors if isinstance(c, VectorCapable)]
        self._text = [c for c in connectors if isinstance(c, TextCapable)]
        self._graph = [c for c in connectors if isinstance(c, GraphCapable)]
        if not self._vector:
            raise MissingCapabilityError(
                "the profile has no VectorCapable connector: dense retrieval needs one",
                field="connectors",
                value=[c.name for c in connectors],
            )
        self._sor = system_of_record
        self._embedder = embedder
        self._defaults = defaults
        self._fusion: Fusion = ReciprocalRankFusion() if fusion is None else fusion
        self._searches = Searches(self, system_of_record)
        self._sor_name: str = backend_name(system_of_record)
        # Shared by every search of this planner: a backend that keeps failing is skipped.
        self.breakers = Breakers()
        # Stores that could not connect when the client opened: connected on first use.
        self._offline = offline if isinstance(offline, OfflineStores) else OfflineStores(offline)
        # What the automatic mode decides from (uda/query/auto).
        self._shapes = GraphShapes(system_of_record)
        self.tuning = StoredTuning(system_of_record)  # what `uda tune` chose (uda/tuning)

    def plan(
        self, request: SearchRequest, auto: str | None = None, tuned_weight: float | None = None
    ) -> Plan:
        """Resolve a request against the profile (validates clearance, filters, types).

        What the request leaves unset of the graph settings is the automatic mode's: `auto`
        (a mode a first page pinned, with the weight `tuned_weight` it had from `uda tune`),
        else the one the graph's shape calls for, with the store's tuning.
        """
        tuning = self.tuning.current
        weight = None if tuning is None else tuning.centrality_weight
        if auto is not None:
            choice = pinned_choice(AutoMode(auto), tuned_weight)
        elif self._defaults.graph_mode != "auto":
            choice = profile_choice(AutoMode(self._defaults.graph_mode)).tuned(weight)
        elif request.query is None:
            choice = STRUCTURED_CHOICE
        else:
            choice = choose(self._shapes.current(shape_clearance(request))).tuned(weight)
        return make_plan(
            request,
            self._defaults,
            vector=tuple(c.name for c in self._vector),
            text=tuple(c.name for c in self._text),
            graph=tuple(c.name for c in self._graph),
            system_of_record=backend_name(self._sor),
            auto=choice,
        )

    async def ready(self, request: SearchRequest) -> None:
        """Read the graph's shape as the request's clearance sees it, if that is due.

        The store's tuning is read again in the background when it is old (never waited for).
        """
        if request.query is None:
            return
        self.tuning.refresh_if_due()
        if self._defaults.graph_mode == "auto":
            await self._shapes.for_search(shape_clearance(request))

    def graph_changed(self) -> None:
        """This client wrote: the next search reads the graph's shape first."""
        self._shapes.stale()

    async def graph_shape(self, clearance: ShapeClearance = EVERYTHING) -> GraphShape:
        """The graph's shape as `clearance` sees it, read now (`uda stats`: everything)."""
        return await self._shapes.read(clearance)

    async def search(self, request: SearchRequest, *, owner: str | None = None) -> SearchResponse:
        """One page of a search: see `uda.query.searches.Searches.search`."""
        return await self._searches.search(request, owner=owner)

    async def rerun(
        self,
        query_id: str,
        *,
        owner: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        clearance_scope: Sequence[str] | None = None,
    ) -> SearchResponse:
        """A saved query again: see `uda.query.searches.Searches.rerun`."""
        return await self._searches.rerun(
            query_id, owner=owner, cursor=cursor, limit=limit, clearance_scope=clearance_scope
        )

    async def saved_query(self, query_id: str, owner: str | None = None) -> SavedQuery:
        """A saved query as it was asked (raises `QueryNotFoundError` like `rerun`)."""
        return await self._searches.saved_query(query_id, owner)

    async def close(self) -> None:
        """Wait for the queries still being saved."""
        await self._searches.close()
        await self._shapes.close()
        await self.tuning.close()

    async def answer(
        self, plan: Plan, position: Position | None, embedding: Sequence[float] | None = None
    ) -> tuple[SearchResponse, list[float] | None]:
        """One page of a planned request, and the query vector it used (None: no query).

        `position` says where a later page starts (None: the first page); `embedding` is a
        saved query vector, so that a rerun embeds nothing.
        """
        with read_scope() as reads:
            try:
                if plan.order is not None:
                    return await self._structured(plan, self._guard(plan), position), None
                return await self._ranked(plan, position, embedding)
            finally:
                plan.degraded.extend(
                    Degradation(backend=told.backend, leg="replica", reason=told.reason)
                    for told in reads.notices
                )

    def _guard(self, plan: Plan) -> Guard:
        """This search's deadlines, counted from now.

        Called after the query is embedded: a cold model may take seconds to load, and the
        deadlines bound the waiting for backends.
        """
        return Guard(
            Budget(self._defaults.deadlines, search_s=plan.search_timeout_s),
            self.breakers,
            plan.degraded,
        )

    async def _ranked(
        self,
        plan: Plan,
        position: Position | None,
        embedding: Sequence[float] | None = None,
    ) -> tuple[SearchResponse, list[float]]:
        if embedding is None:
            query = plan.request.query or ""
            computed = await self._timed(
                plan, "embed", asyncio.to_thread(self._embedder.embed_query, query)
            )
            query_vector: list[float] = computed.tolist()
        else:
            query_vector = list(embedding)
        guard = self._guard(plan)
        phase1 = await self._timed(plan, "phase1", self._phase1(plan, guard, query_vector))
        candidate_ids = sorted({k[0] for k in phase1.semantic} | {k[0] for k in phase1.lexical})
        edges, graph_nodes = await self._timed(
            plan, "phase2", self._phase2(plan, guard, candidate_ids)
        )
        offset = 0 if position is None else position.offset
        response = await self._timed(
            plan,
            "phase3",
            self._phase3(
                plan, guard, query_vector, phase1, candidate_ids, edges, graph_nodes, offset
            ),
        )
        return response, query_vector

    async def _structured(
        self, plan: Plan, guard: Guard, position: Position | None
    ) -> SearchResponse:
        """One page of a structured retrieval, with the matches' context nodes."""
        order = plan.order or DEFAULT_ORDER
        page = await self._timed(
            plan,
            "select",
            select_page(
                lambda selection: guard.required(
                    self._sor_name, lambda: self._sor.select_states(selection)
                ),
                plan,
                order,
                None if position is None else position.after,
                visible=lambda state: state_visible(plan.clearance, state),
                neighbours=lambda ids: self._neighbours(plan, guard, ids),
                accept=lambda state, related: eligible(plan, state, related),
            ),
        )
        ids = [state.element_id for state in page.states]
        edges, graph_nodes = await self._timed(plan, "phase2", self._phase2(plan, guard, ids))
        states = {state.element_id: state for state in page.states}
        _, clearances = await self._read_states(
            plan, guard, [], sorted(graph_nodes - states.keys())
        )
        visible = set(states) | {
            eid for eid, clearance in clearances.items() if state_visible(plan.clearance, clearance)
        }
        _, adj = reachable_subgraph(edges, visible, ids, plan.expand_depth, plan.backward_hops)
        context = await self._context(plan, guard, ids, adj, states)
        return SearchResponse(
            plan=plan,
            ranked=[structured_result(states[eid], context[eid]) for eid in ids],
            more=page.more,
        )

    async def _online(self, connector: Connector, call: Callable[[], Awaitable[T]]) -> T:
        """`call()`, once the connector is connected.

        A store offline when the client opened is connected here, by the first search that
        needs it and that its breaker lets through.
        """
        await self._offline.connected(connector)
        return await call()

    @staticmethod
    async def _timed(plan: Plan, phase: str, work: Awaitable[T]) -> T:
        started = time.perf_counter()
        try:
            return await work
        except UDAError:
            raise
        except Exception as exc:
            raise PlanError(phase, f"{type(exc).__name__}: {exc}") from exc
        finally:
            plan.timings_ms[phase] = (time.perf_counter() - started) * 1000

    # -- phase 1 --------------------------------------------------------------------------
    async def _phase1(self, plan: Plan, guard: Guard, embedding: list[float]) -> Phase1:
        """Every retrieval leg at once; a leg that fails or is too late is left out.

        Raises:
            BackendUnavailableError: no leg answered at all.
        """
        k = plan.pool_size
        # A leg whose weight is zero cannot change the ranking: do not run it.
        vector = self._vector if plan.weights.get(Leg.SEMANTIC, 0.0) > 0 else []
        text = self._text if plan.weights.get(Leg.LEXICAL, 0.0) > 0 else []
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

    # -- phase 2 --------------------------------------------------------------------------
    async def _phase2(
        self, plan: Plan, guard: Guard, candidate_ids: Sequence[str]
    ) -> tuple[list[GraphEdge], set[str]]:
        """The candidates' neighbourhoods; a graph store that fails is left out (no context)."""
        if plan.expand_depth == 0 or not self._graph or not candidate_ids:
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
                for g in self._graph
            ]
        )
        subgraphs = [sub for sub in answered if sub is not None]
        edges = {e.key: e for sub in subgraphs for e in sub.edges}
        nodes = {n for sub in subgraphs for n in sub.nodes}
        return list(edges.values()), nodes

    # -- phase 3 --------------------------------------------------------------------------
    async def _phase3(
        self,
        plan: Plan,
        guard: Guard,
        query_vector: list[float],
        phase1: Phase1,
        candidate_ids: Sequence[str],
        edges: Sequence[GraphEdge],
        graph_nodes: set[str],
        offset: int = 0,
    ) -> SearchResponse:
        """Clearance, eligibility, graph candidates, decay, centrality, fusion, context.

        Visibility is decided once, on the states and clearances read together; candidates
        are the visible states the request may return (with `graph_candidates`, also those
        the expansion reached); every leg is decayed and ranked over them and the ranks are
        fused; the best get their context nodes, read whole and checked again.
        """
        states, visible = await self._visible_states(plan, guard, candidate_ids, graph_nodes)
        seeds = [eid for eid in candidate_ids if eid in visible]
        seen_edges, adj = reachable_subgraph(
            edges, visible, seeds, plan.expand_depth, plan.backward_hops
        )
        semantic_raw = leg_scores(phase1.semantic, states, visible)
        lexical_raw = leg_scores(phase1.lexical, states, visible)
        neighbours = await self._neighbours(plan, guard, [eid for eid in states if eid in visible])
        candidates = eligible_candidates(
            plan, candidate_ids, states, visible, semantic_raw, lexical_raw, neighbours
        )
        if plan.graph_candidates:
            reached = graph_candidates(
                plan, graph_nodes, states, visible, adj, set(candidates), neighbours
            )
            candidates += reached
            semantic_raw.update(
                await self._graph_semantic(plan, guard, query_vector, reached, states)
            )
        evidence = rank(
            plan, self._fusion, candidates, states, semantic_raw, lexical_raw, seen_edges, adj
        )
        # A later page is a slice of the same ranking: same pool, same stamp, same clock.
        end = offset + plan.request.limit
        ordered = evidence.best(candidates, end)[offset:]
        context = await self._context(plan, guard, ordered, adj, states)
        return SearchResponse(
            plan=plan,
            ranked=[evidence.result(states[eid], context[eid]) for eid in ordered],
            more=len(candidates) > end,
        )

    async def _neighbours(self, plan: Plan, guard: Guard, element_ids: Sequence[str]) -> Neighbours:
        """What the filter's relation paths need: visible neighbours' values, one batch.

        Not optional: without them a relation path cannot be decided, and leaving it out
        would answer a different question.
        """
        if not relation_predicates(plan.filter) or not element_ids:
            return NO_NEIGHBOURS
        backends = ", ".join([*(g.name for g in self._graph), self._sor_name])

        async def read() -> Neighbours:
            for graph in self._graph:
                await self._online(graph, _nothing)
            return await read_neighbours(
                plan.filter,
                element_ids,
                graphs=self._graph,
                system_of_record=self._sor,
                clearance=plan.clearance,
                as_of=plan.as_of,
            )

        return await guard.required(backends, read)

    async def _visible_states(
        self, plan: Plan, guard: Guard, candidate_ids: Sequence[str], graph_nodes: set[str]
    ) -> tuple[dict[str, StoredState], set[str]]:
        """Whole states of what can be ranked, and every id `plan.clearance` may see."""
        # Whole states for what can be ranked; clearance only for nodes that can only be
        # context: most of those are never shown, and their payloads made most of the read.
        whole: set[str] = set(candidate_ids)
        if plan.graph_candidates:
            whole |= graph_nodes
        states, clearances = await self._read_states(
            plan, guard, sorted(whole), sorted(graph_nodes - whole)
        )
        visible = {eid for eid, state in states.items() if state_visible(plan.clearance, state)}
        visible |= {
            eid for eid, clearance in clearances.items() if state_visible(plan.clearance, clearance)
        }
        return states, visible

    async def _context(
        self,
        plan: Plan,
        guard: Guard,
        ordered: Sequence[str],
        adj: Adjacency,
        states: Mapping[str, StoredState],
    ) -> dict[str, list[tuple[ContextHop, StoredState]]]:
        """Each result's context nodes that are still visible, with their whole states."""
        hops_of = {
            eid: context_hops(
                eid, adj, plan.expand_depth, plan.max_context_nodes, plan.backward_hops
            )
            for eid in ordered
        }
        shown = await self._context_states(plan, guard, hops_of, states)
        return {
            eid: [(hop, shown[hop.element_id]) for hop in hops_still_visible(hops, shown)]
            for eid, hops in hops_of.items()
        }

    async def _read_states(
        self, plan: Plan, guard: Guard, whole_ids: Sequence[str], clearance_ids: Sequence[str]
    ) -> tuple[dict[str, StoredState], dict[str, StateClearance]]:
        """Whole states of `whole_ids` and clearances of `clearance_ids`, in one call."""
        return await guard.required(
            self._sor_name,
            lambda: self._sor.fetch_with_clearances(whole_ids, clearance_ids, plan.as_of),
        )

    async def _context_states(
        self,
        plan: Plan,
        guard: Guard,
        hops_of: Mapping[str, Sequence[ContextHop]],
        states: Mapping[str, StoredState],
    ) -> dict[str, StoredState]:
        """Whole states of the results' context nodes.

        Those read already are reused; the rest come in one more read, kept only if still
        visible (they may have changed since their clearance was read).
        """
        needed = {hop.element_id for hops in hops_of.values() for hop in hops}
        missing = sorted(needed - states.keys())
        shown = {eid: states[eid] for eid in needed if eid in states}
        if missing:
            fetched = await guard.required(
                self._sor_name, lambda: self._sor.fetch(missing, plan.as_of)
            )
            shown.update({eid: s for eid, s in fetched.items() if state_visible(plan.clearance, s)})
        return shown

    async def _graph_semantic(
        self,
        plan: Plan,
        guard: Guard,
        query_vector: list[float],
        reached: Sequence[str],
        states: Mapping[str, StoredState],
    ) -> dict[str, tuple[float, str]]:
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
                for c in self._vector
            ]
        )
        best: dict[tuple[str, int], BestChunk] = {}
        for hits in results:
            collapse(hits or (), best)
        return leg_scores(best, states, set(reached))


def shape_clearance(request: SearchRequest) -> ShapeClearance:
    """The view of the graph the request's clearance has.

    Raises:
        UnknownClearanceError: a bad `clearance_scope` entry (as `make_plan` would).
    """
    clearance = Clearance.parse(request.clearance_scope)
    return ShapeClearance(
        max_sensitivity_rank=clearance.level.rank,
        projects=tuple(sorted(clearance.projects)),
        all_projects=clearance.all_projects,
    )


async def _nothing() -> None:
    return None


__all__ = ["ContextHop", "Planner"]
