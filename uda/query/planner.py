"""The planner: plan -> dense (and lexical) -> graph -> relational/axiomatic -> results.

Each phase makes one batched call per connector (`uda.query.reads`), and the connectors of
a phase run concurrently. Clearance is pushed down into phase 1 and enforced again,
authoritatively, in phase 3 on every candidate, context node and edge.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from connectors.base import Connector, RelationalCapable
from connectors.contract.graph_shape import EVERYTHING, GraphShape, ShapeClearance
from connectors.contract.reads import read_scope
from connectors.contract.records import GraphEdge
from connectors.contract.system_of_record import StateHead, StoredState
from uda.config import SearchDefaults
from uda.embedding import Embedder
from uda.errors import MissingCapabilityError, PlanError, UDAError
from uda.query.auto.choice import (
    STRUCTURED_CHOICE,
    AutoMode,
    choose,
    pinned_choice,
    profile_choice,
)
from uda.query.auto.shapes import GraphShapes
from uda.query.candidates import (
    Phase1,
    eligible,
    eligible_candidates,
    fill_texts,
    graph_candidates,
    leg_scores,
    missing_texts,
    needs_filter_values,
    raw_scores,
    snippet_chunk,
)
from uda.query.clearance import Clearance, state_visible
from uda.query.concurrency import all_or_none
from uda.query.contracts import SearchRequest
from uda.query.cursors import Position
from uda.query.deadlines import Breakers, Budget, Degradation, Guard
from uda.query.exact import ExactQuery
from uda.query.fusion import Fusion, ReciprocalRankFusion
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
from uda.query.reads import StoreReads
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
        system_of_record: where heads and whole states are read.
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
        # Stores that could not connect when the client opened: connected on first use.
        self._offline = offline if isinstance(offline, OfflineStores) else OfflineStores(offline)
        self._reads = StoreReads(
            connectors=connectors, system_of_record=system_of_record, offline=self._offline
        )
        if not self._reads.vector:
            raise MissingCapabilityError(
                "the profile has no VectorCapable connector: dense retrieval needs one",
                field="connectors",
                value=[c.name for c in connectors],
            )
        self._embedder = embedder
        self._defaults = defaults
        self._fusion: Fusion = ReciprocalRankFusion() if fusion is None else fusion
        self._searches = Searches(self, system_of_record)
        # Shared by every search of this planner: a backend that keeps failing is skipped.
        self.breakers = Breakers()
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
            vector=tuple(c.name for c in self._reads.vector),
            text=tuple(c.name for c in self._reads.text),
            graph=tuple(c.name for c in self._reads.graph),
            system_of_record=self._reads.sor_name,
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
        phase1 = await self._timed(plan, "phase1", self._reads.retrieve(plan, guard, query_vector))
        candidate_ids = sorted({k[0] for k in phase1.semantic} | {k[0] for k in phase1.lexical})
        edges, graph_nodes = await self._timed(
            plan, "phase2", self._reads.expand(plan, guard, candidate_ids)
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
                lambda selection: self._reads.select_states(guard, selection),
                plan,
                order,
                None if position is None else position.after,
                visible=lambda state: state_visible(plan.clearance, state),
                neighbours=lambda ids: self._reads.neighbours(plan, guard, ids),
                accept=lambda state, related: eligible(plan, state, related),
            ),
        )
        ids = [state.element_id for state in page.states]
        edges, graph_nodes = await self._timed(plan, "phase2", self._reads.expand(plan, guard, ids))
        states = {state.element_id: state for state in page.states}
        heads = await self._reads.heads(
            plan, guard, sorted(graph_nodes - states.keys()), filter_values=False
        )
        heads.update({eid: StateHead.of(state) for eid, state in states.items()})
        visible = set(states) | {
            eid for eid, head in heads.items() if state_visible(plan.clearance, head)
        }
        _, adj = reachable_subgraph(edges, visible, ids, plan.expand_depth, plan.backward_hops)
        context = await self._context(plan, guard, ids, adj, heads, states)
        return SearchResponse(
            plan=plan,
            ranked=[structured_result(states[eid], context[eid]) for eid in ids],
            more=page.more,
        )

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

    # -- phase 3: what phases 1 and 2 read (uda/query/reads.py) becomes the answer ---------
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

        Visibility is decided once, on the heads (states without payloads) of every
        candidate and reached node, read together; candidates are the visible states the
        request may return (with `graph_candidates`, also those the expansion reached);
        every leg is decayed and ranked over them and the ranks are fused; only the page
        and its context nodes are read whole, at the versions ranked, and checked again.
        """
        heads, visible, names = await self._visible_heads(plan, guard, candidate_ids, graph_nodes)
        seeds = [eid for eid in candidate_ids if eid in visible]
        seen_edges, adj = reachable_subgraph(
            edges, visible, seeds, plan.expand_depth, plan.backward_hops
        )
        semantic = leg_scores(phase1.semantic, heads, visible)
        lexical = leg_scores(phase1.lexical, heads, visible)
        neighbours = await self._reads.neighbours(
            plan, guard, [eid for eid in heads if eid in visible]
        )
        candidates = eligible_candidates(
            plan, candidate_ids, heads, visible, semantic, lexical, neighbours
        )
        if plan.graph_candidates:
            reached = graph_candidates(
                plan, graph_nodes, heads, visible, adj, set(candidates), neighbours
            )
            candidates += reached
            semantic.update(
                await self._reads.graph_semantic(plan, guard, query_vector, reached, heads)
            )
        if ExactQuery.of(plan.request.query).terms:
            # An exact term is looked for in every candidate's best chunks (uda.query.exact).
            wanted = missing_texts([semantic, lexical], candidates)
            fill_texts([semantic, lexical], await self._reads.chunk_texts(guard, wanted))
        evidence = rank(
            plan,
            self._fusion,
            candidates,
            heads,
            raw_scores(semantic),
            raw_scores(lexical),
            seen_edges,
            adj,
            names,
        )
        # A later page is a slice of the same ranking: same pool, same stamp, same clock.
        end = offset + plan.request.limit
        ordered = evidence.best(end)[offset:]
        shown = {eid: chunk for eid in ordered if (chunk := snippet_chunk(semantic, lexical, eid))}
        context_read = asyncio.ensure_future(self._context(plan, guard, ordered, adj, heads, {}))
        texts_read = asyncio.ensure_future(
            self._reads.chunk_texts(guard, missing_texts([shown], ordered))
        )
        await all_or_none([context_read, texts_read])
        context = context_read.result()
        fill_texts([shown], texts_read.result())
        return SearchResponse(
            plan=plan,
            ranked=[
                evidence.result(
                    state, context[eid], "" if (chunk := shown.get(eid)) is None else chunk.text
                )
                for eid in ordered
                if (state := context.states.get(eid)) is not None
            ],
            more=len(candidates) > end,
        )

    async def _visible_heads(
        self, plan: Plan, guard: Guard, candidate_ids: Sequence[str], graph_nodes: set[str]
    ) -> tuple[dict[str, StateHead], set[str], dict[str, str]]:
        """Heads of the candidates and reached nodes, the ids `plan.clearance` may see, names.

        Heads only: ranking needs no payload, and payloads made most of what this read
        cost (ADR 51); filter values only if the filter has a value predicate. The names
        are the visible nodes' only: a hidden node is never named by a query.
        """
        heads = await self._reads.heads(
            plan,
            guard,
            sorted(set(candidate_ids) | graph_nodes),
            filter_values=needs_filter_values(plan),
        )
        names = {
            eid: head.name for eid, head in heads.items() if state_visible(plan.clearance, head)
        }
        return heads, set(names), names

    async def _context(
        self,
        plan: Plan,
        guard: Guard,
        ordered: Sequence[str],
        adj: Adjacency,
        heads: Mapping[str, StateHead],
        whole: Mapping[str, StoredState],
    ) -> Context:
        """The page's whole states, and each result's context nodes that are still visible.

        One read hydrates the results and their context nodes together, at exactly the
        versions that were ranked and checked (`whole`: states read whole already).
        """
        hops_of = {
            eid: context_hops(
                eid, adj, plan.expand_depth, plan.max_context_nodes, plan.backward_hops
            )
            for eid in ordered
        }
        needed = dict.fromkeys(ordered) | {
            hop.element_id: None for hops in hops_of.values() for hop in hops
        }
        shown = await self._reads.hydrate(plan, guard, [heads[eid] for eid in needed], whole)
        return Context(
            states=shown,
            hops={
                eid: [(hop, shown[hop.element_id]) for hop in hops_still_visible(hops, shown)]
                for eid, hops in hops_of.items()
            },
        )


@dataclass(kw_only=True)
class Context:
    """A page's whole states by id, and each result's visible context nodes."""

    states: Mapping[str, StoredState]
    hops: Mapping[str, list[tuple[ContextHop, StoredState]]]

    def __getitem__(self, element_id: str) -> list[tuple[ContextHop, StoredState]]:
        return self.hops[element_id]


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


__all__ = ["ContextHop", "Planner"]
