"""Structured retrieval: every visible match of a filter, in a stable order, a page at a time.

The system of record hands out states in the requested order, from just after the previous
page's last row (keyset pagination), applying what it can of the filter; each batch is then
checked authoritatively (clearance, searchable types, the whole filter tree with its
relation paths over visible neighbours), exactly as ranked candidates are in phase 3. A
selective filter the store could not push down costs more batches, never a wrong row.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from connectors.contract.filter_tree import required_relations
from connectors.contract.selection import Keyset, StateOrder, StateSelection
from connectors.contract.system_of_record import StoredState
from uda.query.filters.related import Neighbours
from uda.query.graph_context import ContextHop
from uda.query.plan import Plan
from uda.query.rows import RankedResult

MIN_BATCH = 64
"""The fewest rows asked of the store at once: a selective filter re-checked in Python
should not cost a round trip per row."""

ReadNeighbours = Callable[[Sequence[str]], Awaitable[Neighbours]]
Accept = Callable[[StoredState, Neighbours], bool]
Select = Callable[[StateSelection], Awaitable[list[StoredState]]]
"""The system of record's `select_states`, as the planner calls it (under its deadline)."""


@dataclass(frozen=True, kw_only=True)
class Page:
    """One page of matches, in order, and whether more follow."""

    states: list[StoredState]
    more: bool

    def last_key(self, order: StateOrder) -> Keyset | None:
        """Where the next page starts (None for an empty page)."""
        return Keyset.of(order, self.states[-1]) if self.states else None


async def select_page(
    select: Select,
    plan: Plan,
    order: StateOrder,
    after: Keyset | None,
    *,
    visible: Callable[[StoredState], bool],
    neighbours: ReadNeighbours,
    accept: Accept,
) -> Page:
    """The next `plan.request.limit` matches after `after`, and whether any follow.

    Reads batches until one match more than the page holds has been seen (so `more` is
    exact) or the store has no more rows.
    """
    limit = plan.request.limit
    batch = max(2 * (limit + 1), MIN_BATCH)
    matches: list[StoredState] = []
    while len(matches) <= limit:
        rows = await select(
            StateSelection(
                search_filter=plan.pushdown,
                order=order,
                limit=batch,
                after=after,
                related=required_relations(plan.filter),
            )
        )
        shown = [state for state in rows if visible(state)]
        if shown:
            related = await neighbours([state.element_id for state in shown])
            matches += [state for state in shown if accept(state, related)]
        if len(rows) < batch:
            break
        after = Keyset.of(order, rows[-1])
    return Page(states=matches[:limit], more=len(matches) > limit)


def structured_result(
    state: StoredState, context: Sequence[tuple[ContextHop, StoredState]]
) -> RankedResult:
    """A structured match as a result: no relevance, so no score and no leg evidence."""
    return RankedResult(
        state=state,
        score=0.0,
        snippet="",
        decay=1.0,
        semantic_raw=None,
        lexical_raw=None,
        semantic_score=None,
        lexical_score=None,
        centrality=0.0,
        ranks={},
        contributions={},
        context=context,
    )


__all__ = ["MIN_BATCH", "Page", "select_page", "structured_result"]
