"""The aggregate engine: the reference count in Python, and one statement when it is exact.

The reference (`python`) iterates every visible match exactly as a structured retrieval
does: keyset batches of states from the system of record, each checked with THE visibility
rule and the whole filter tree (relation paths over the visible neighbours the graph stores
report), then bucketed here. With a query, the matches are the first `top_n` results of the
ranked search instead, read through the planner.

The fast path (`pushdown`) asks the system of record for the same partial aggregates in one
statement (`RelationalCapable.aggregate_states`). It is tried only where the two must agree:
no query, current states (`as_of` None: the state read is the newest, so THE rule is one
check on it), no average of floats (a float sum depends on its order), and a store that
compiles the whole tree exactly (it answers None otherwise). Relation paths read edges from
the system of record there and from the graph stores here; the write path keeps them equal,
and `uda check` says when they are not.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from itertools import product
from typing import TypeVar

from connectors.base import (
    Connector,
    GraphCapable,
    RelationalCapable,
    backend_name,
    system_of_record,
)
from connectors.contract.aggregation import (
    GroupKey,
    StateAggregation,
    bucket_of,
    metric_value,
    own_value,
)
from connectors.contract.filter_tree import (
    AllOf,
    FilterNode,
    RelationPredicate,
    evaluate,
    required_relations,
)
from connectors.contract.predicates import Op, Predicate, Scalar
from connectors.contract.selection import Keyset, StateOrder, StateSelection
from connectors.contract.system_of_record import StoredState
from ontology import element_class
from uda.errors import MissingCapabilityError
from uda.query.aggregates.plan import AggregatePlan, resolve
from uda.query.aggregates.request import AggregateRequest
from uda.query.aggregates.result import (
    AggregateResponse,
    GroupId,
    Partial,
    answer,
    key_value,
    partials_of,
)
from uda.query.clearance import state_visible
from uda.query.contracts import SearchRequest
from uda.query.deadlines import required_within
from uda.query.filters.related import Neighbours, read_neighbours
from uda.query.plan import Plan
from uda.query.planner import Planner

T = TypeVar("T")

BATCH = 1000
"""States read from the system of record at once on the Python path."""
_BY_ID = StateOrder(field="element_id", kind="text")


def search_request_of(request: AggregateRequest) -> SearchRequest:
    """The search whose matches the aggregate counts (filters, clearance, types, time).

    Without a query, a structured retrieval in `element_id` order; with one, the ranked
    search whose first `top_n` results are counted, with the pool a search of that many
    results would use by default (at most 1000).
    """
    fields: dict[str, object] = {
        "query": request.query,
        "clearance_scope": list(request.clearance_scope),
        "context_filters": dict(request.context_filters),
        "element_types": request.element_types,
        "as_of": request.as_of,
    }
    if request.query is None:
        fields["order_by"] = "element_id"
        return SearchRequest.build(**fields)
    top = request.top_n
    fields["pool_size"] = min(max(10 * top, 50), 1000)
    # `limit` is at most 100 for a page of results; an aggregate reads up to 1000 of one
    # ranking at once, so the validated request is copied with the larger limit.
    return SearchRequest.build(**fields, limit=min(top, 100)).model_copy(update={"limit": top})


class Aggregator:
    """Answers `AggregateRequest`s over a profile's connectors.

    Args:
        planner: the profile's planner (it resolves filters, types and clearance, and runs
            the ranked search of a query).
        connectors: the profile's connectors (the system of record, the graph stores).
        pushdown: try the one-statement fast path first (False: always the reference).
    """

    def __init__(
        self, *, planner: Planner, connectors: Sequence[Connector], pushdown: bool = True
    ) -> None:
        self._planner = planner
        self._sor: RelationalCapable = system_of_record(connectors)
        self._graphs = [c for c in connectors if isinstance(c, GraphCapable)]
        self._pushdown = pushdown
        self._sor_name: str = backend_name(self._sor)

    async def aggregate(self, request: AggregateRequest) -> AggregateResponse:
        """Count the visible matches of `request` by its groups.

        Raises:
            UserError: a bad request field (naming it), as for a search; a relation path
                in a profile without a graph store (`MissingCapabilityError`).
        """
        started = time.perf_counter()
        plan = resolve(request)
        search = self._planner.plan(search_request_of(request))
        if plan.relation_keys and not self._graphs:
            raise MissingCapabilityError(
                "group keys along relations need a GraphCapable connector in the profile",
                field="group_by",
                value=[k.path for k in plan.relation_keys],
            )
        clearance = search.clearance.entries()
        pushed = await self._pushed_down(plan, search) if self._pushdown else None
        if pushed is not None:
            partials, matched = pushed
            path = "pushdown"
        elif request.query is not None:
            partials, matched = await self._ranked(plan, search)
            path = "python"
        else:
            partials, matched = await self._structured(plan, search)
            path = "python"
        response = answer(plan, partials, matched=matched, path=path, clearance=clearance)
        response.timings_ms["total"] = (time.perf_counter() - started) * 1000
        return response

    # -- the fast path ------------------------------------------------------------------
    async def _pushed_down(
        self, plan: AggregatePlan, search: Plan
    ) -> tuple[dict[GroupId, Partial], int] | None:
        request = plan.request
        if request.query is not None or search.as_of is not None:
            return None
        if request.metric == "avg" and plan.metric_is_float:
            return None
        pushdown = search.pushdown
        found = await self._required(
            search,
            lambda: self._sor.aggregate_states(
                StateAggregation(
                    max_sensitivity_rank=pushdown.max_sensitivity_rank,
                    projects=pushdown.projects,
                    all_projects=pushdown.all_projects,
                    element_types=search.element_types,
                    tree=search.filter,
                    group_by=tuple(k.key for k in plan.keys),
                    temporal=plan.temporal,
                    metric_field=plan.metric_field,
                    metric_kind=plan.metric_kind,
                    metric_total=request.metric == "avg",
                ),
            ),
        )
        if found is None:
            return None
        return partials_of(found.groups, plan), found.matched

    # -- the reference ------------------------------------------------------------------
    async def _structured(
        self, plan: AggregatePlan, search: Plan
    ) -> tuple[dict[GroupId, Partial], int]:
        """Every visible match, read as a structured retrieval reads them, bucketed here."""
        tree = _with_keys(search.filter, plan.relation_keys)
        partials: dict[GroupId, Partial] = {}
        matched = 0
        after: Keyset | None = None
        while True:
            rows = await self._required(
                search,
                lambda after=after: self._sor.select_states(
                    StateSelection(
                        search_filter=search.pushdown,
                        order=_BY_ID,
                        limit=BATCH,
                        after=after,
                        related=required_relations(search.filter),
                    )
                ),
            )
            shown = [state for state in rows if state_visible(search.clearance, state)]
            if shown:
                related = await self._neighbours(search, tree, [s.element_id for s in shown])
                for state in shown:
                    if _eligible(search, state, related):
                        _count(plan, state, related, partials)
                        matched += 1
            if len(rows) < BATCH:
                return partials, matched
            after = Keyset.of(_BY_ID, rows[-1])

    async def _ranked(
        self, plan: AggregatePlan, search: Plan
    ) -> tuple[dict[GroupId, Partial], int]:
        """The first `top_n` results of the ranked search, bucketed here."""
        response = await self._planner.search(search.request)
        states = response.states[: plan.request.top_n]
        ran = response.plan
        related = await self._neighbours(
            ran, _with_keys(AllOf(children=()), plan.relation_keys), [s.element_id for s in states]
        )
        partials: dict[GroupId, Partial] = {}
        for state in states:
            _count(plan, state, related, partials)
        return partials, len(states)

    async def _required(self, search: Plan, call: Callable[[], Awaitable[T]]) -> T:
        """A read no count can be made without, within the search's deadline.

        A hung store fails the aggregate fast (`BackendUnavailableError`, HTTP 503).
        """
        return await required_within(self._sor_name, call, search.search_timeout_s)

    async def _neighbours(self, search: Plan, tree: FilterNode, ids: Sequence[str]) -> Neighbours:
        backends = ", ".join([*(g.name for g in self._graphs), self._sor_name])
        return await required_within(
            backends, lambda: self._read_neighbours(search, tree, ids), search.search_timeout_s
        )

    async def _read_neighbours(
        self, search: Plan, tree: FilterNode, ids: Sequence[str]
    ) -> Neighbours:
        return await read_neighbours(
            tree,
            ids,
            graphs=self._graphs,
            system_of_record=self._sor,
            clearance=search.clearance,
            as_of=search.as_of,
        )


def _with_keys(tree: FilterNode, keys: Iterable[GroupKey]) -> FilterNode:
    """`tree`, and a leaf per relation key: one neighbour read serves the filter and the keys.

    The added leaves only name what to read; the tree evaluated stays `tree`.
    """
    reads = [
        RelationPredicate(
            relation=key.relation,
            direction=key.direction,
            predicate=Predicate(field=key.field, op=Op.EXISTS, value=True),
        )
        for key in keys
        if key.relation is not None
    ]
    return AllOf(children=(tree, *reads)) if reads else tree


def _eligible(search: Plan, state: StoredState, related: Neighbours) -> bool:
    """A match: a searchable type of the request, and the whole tree holds (as a search)."""
    cls = element_class(state.element_type)
    if cls is None or not cls.knowledge_asset or state.element_type not in search.element_types:
        return False
    return evaluate(search.filter, state.filter_values, related.of(state.element_id))


def _key_values(
    plan: AggregatePlan, state: StoredState, related: Neighbours
) -> list[list[Scalar | None]]:
    """Each group key's values for one state.

    An own key has one (None when missing); a relation key every distinct present value
    among the visible neighbours (None when there is none).
    """
    out: list[list[Scalar | None]] = []
    for key_plan in plan.keys:
        key = key_plan.key
        if key.relation is None:
            out.append([key_value(state.filter_values.get(key.field), key_plan.kind)])
            continue
        seen: dict[object, Scalar] = {}
        for values in related.of(state.element_id)(key.relation, key.direction):
            value = key_value(values.get(key.field), key_plan.kind)
            if value is not None:
                seen.setdefault(_identity(value), value)
        out.append(list(seen.values()) or [None])
    return out


def _identity(value: Scalar) -> tuple[str, Scalar]:
    """A value's identity for grouping: `True` and `1` (equal in Python) are two groups."""
    return (type(value).__name__, value)


def _count(
    plan: AggregatePlan,
    state: StoredState,
    related: Neighbours,
    partials: dict[GroupId, Partial],
) -> None:
    """Add one match to each of its groups."""
    values: Mapping[str, Scalar] = state.filter_values
    bucket = None
    if plan.temporal is not None:
        bucket = bucket_of(
            own_value(plan.temporal.field, values, state.timestamp_ms), plan.temporal
        )
    measure = None
    if plan.metric_field is not None:
        raw = own_value(plan.metric_field, values, state.timestamp_ms)
        measure = metric_value(raw, plan.metric_kind)
    keep = plan.request.metric == "avg" and plan.metric_is_float
    for keys in {tuple(combo) for combo in product(*_key_values(plan, state, related))}:
        partial = partials.setdefault((keys, bucket), Partial())
        partial.add(measure, keep=keep)


__all__ = ["BATCH", "Aggregator", "search_request_of"]
