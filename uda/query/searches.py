"""Searches as callers see them: pages, cursors and saved queries around the planner.

The planner answers one planned page (`Planner.answer`); this module decides which page:
a first page is saved under a new `query_id` and pins the store's stamp, a later page is
resumed from a sealed cursor and read at that stamp, a rerun replays a saved query
(docs/adr/0023-structured-retrieval-and-cursors.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from connectors.base import RelationalCapable, backend_name
from connectors.contract.selection import Keyset
from uda.errors import PlanError
from uda.hlc import wall_clock_ms
from uda.query.clearance import Clearance
from uda.query.contracts import SearchRequest
from uda.query.cursors import Cursors, Position
from uda.query.deadlines import abandon, required_within
from uda.query.plan import Plan
from uda.query.results import SearchResponse
from uda.query.retries import Retries
from uda.query.saved import QuerySaver, SavedQuery, new_query_id

T = TypeVar("T")


class Answers(Protocol):
    """What `Searches` needs of the planner: plans, and one page of a plan."""

    def plan(
        self, request: SearchRequest, auto: str | None = None, tuned_weight: float | None = None
    ) -> Plan:
        """Resolve a request against the profile (`auto`, `tuned_weight`: a first page's)."""
        ...

    async def ready(self, request: SearchRequest) -> None:
        """Read what the automatic mode decides from for `request`, if that is due."""
        ...

    async def answer(
        self, plan: Plan, position: Position | None, embedding: Sequence[float] | None = None
    ) -> tuple[SearchResponse, list[float] | None]:
        """One page, and the query vector it used."""
        ...


class Searches:
    """First pages, later pages and reruns of searches over one planner and store.

    Args:
        planner: answers planned pages.
        system_of_record: keeps saved queries and the secret cursors are sealed with.
    """

    def __init__(self, planner: Answers, system_of_record: RelationalCapable) -> None:
        self._planner = planner
        self._sor = system_of_record
        self._cursors: Cursors | None = None
        self._saver = QuerySaver(system_of_record)

    async def search(self, request: SearchRequest, *, owner: str | None = None) -> SearchResponse:
        """One page: the first, saved under a new `query_id`, or the page of `request.cursor`.

        `owner` is who asked (the HTTP principal), kept with a saved first page.

        Raises:
            UserError: a bad request, or a cursor of another query, store or caller.
        """
        await self._planner.ready(request)
        plan = self._planner.plan(request)
        cursors = await self._cursor_keys(plan)
        fingerprint = cursors.fingerprint(query_shape(plan))
        if request.cursor is not None:
            position = cursors.open(request.cursor, fingerprint)
            plan = self._planner.plan(request, position.auto, position.tuned_weight)
            return await self._page(pinned(plan, position), position, fingerprint)
        # The first page reads the store as it is; its stamp, read beside it, is what later
        # pages and reruns read at, whatever is written in between.
        first = Position(
            as_of=plan.as_of or 0,
            now_ms=plan.as_of_ms,
            pool=plan.pool_size,
            auto=plan.auto.mode.value,
            tuned_weight=plan.auto.tuned_weight,
        )
        stamp = None if plan.as_of is not None else asyncio.ensure_future(self._sor.last_hlc())
        try:
            return await self._page(plan, None, fingerprint, first=first, stamp=stamp, owner=owner)
        finally:
            if stamp is not None:
                abandon(stamp)  # a search that failed first leaves it unread: quietly

    async def rerun(
        self,
        query_id: str,
        *,
        owner: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        clearance_scope: Sequence[str] | None = None,
    ) -> SearchResponse:
        """A saved query's first page again (or the page `cursor` names), as it was answered.

        The first page reads at the stamp it was first answered at, with the same decay
        clock, pool and query embedding. `clearance_scope` narrows the saved clearance, never
        widens it: the answer is what both allow (the HTTP service passes the caller's grant
        now, an agent its own clearance).

        Raises:
            QueryNotFoundError: no saved query `query_id` made by `owner`.
            InvalidRequestError: a cursor of another query.
            UnknownClearanceError: a bad `clearance_scope` entry.
        """
        saved = await self._saver.load(query_id, owner)
        fields = saved.request.model_dump(exclude={"cursor"})
        fields["cursor"] = cursor
        if limit is not None:
            fields["limit"] = limit
        if clearance_scope is not None:
            allowed = Clearance.parse(saved.request.clearance_scope)
            fields["clearance_scope"] = allowed.narrow(Clearance.parse(clearance_scope)).entries()
        request = SearchRequest.build(**fields)
        await self._planner.ready(request)
        plan = self._planner.plan(request)
        cursors = await self._cursor_keys(plan)
        fingerprint = cursors.fingerprint(query_shape(plan))
        position = saved.first_page if cursor is None else cursors.open(cursor, fingerprint)
        position = replace(position, query_id=saved.query_id)
        plan = self._planner.plan(request, position.auto, position.tuned_weight)
        return await self._page(
            pinned(plan, position), position, fingerprint, embedding=saved.embedding
        )

    async def saved_query(self, query_id: str, owner: str | None = None) -> SavedQuery:
        """A saved query as it was asked (raises `QueryNotFoundError` like `rerun`)."""
        return await self._saver.load(query_id, owner)

    async def close(self) -> None:
        """Wait for the queries still being saved."""
        await self._saver.drain()

    async def _page(
        self,
        plan: Plan,
        position: Position | None,
        fingerprint: str,
        *,
        first: Position | None = None,
        stamp: asyncio.Future[int] | None = None,
        embedding: Sequence[float] | None = None,
        owner: str | None = None,
    ) -> SearchResponse:
        """One page; a first page (`first`) is saved, and every page gets its next cursor."""
        started = time.perf_counter()
        response, vector = await self._planner.answer(plan, position, embedding)
        if first is not None:
            if stamp is not None:
                read_again = self._sor.last_hlc
                as_of = await _within(plan, self._sor_name, _started_then(stamp, read_again))
                first = replace(first, as_of=as_of)
            position = replace(first, query_id=new_query_id())
            self._saver.save(
                SavedQuery(
                    query_id=position.query_id or "",
                    owner=owner,
                    created_ms=wall_clock_ms(),
                    request=plan.request.model_copy(
                        update={"clearance_scope": plan.clearance.entries(), "cursor": None}
                    ),
                    first_page=first,
                    embedding=vector,
                )
            )
        if position is None:  # pragma: no cover - a later page always has one
            raise PlanError("paging", "a later page without a position")
        response.query_id = position.query_id
        if response.more:
            cursors = await self._cursor_keys(plan)
            response.next_cursor = cursors.seal(
                next_position(plan, position, response), fingerprint
            )
        plan.timings_ms["total"] = (time.perf_counter() - started) * 1000
        return response

    async def _cursor_keys(self, plan: Plan) -> Cursors:
        if self._cursors is None:
            secret = await _within(plan, self._sor_name, self._sor.instance_secret)
            self._cursors = Cursors(secret)
        return self._cursors

    @property
    def _sor_name(self) -> str:
        return backend_name(self._sor)


async def _within(
    plan: Plan, backend: str, call: Callable[[], Awaitable[T]], retries: Retries | None = None
) -> T:
    """A system-of-record call on the search's path, within the search's deadline."""
    return await required_within(backend, call, plan.search_timeout_s, retries)


def _started_then(
    started: Awaitable[T], again: Callable[[], Awaitable[T]]
) -> Callable[[], Awaitable[T]]:
    """A call already under way first, then new ones: a transient failure is read again."""
    pending = [started]
    return lambda: pending.pop() if pending else again()


def query_shape(plan: Plan) -> dict[str, object]:
    """Everything that shapes the answer but the page size: what a cursor is bound to.

    The clearance is the resolved one (the HTTP service narrows a caller's request to its
    grant), so a cursor replayed under another clearance is refused.
    """
    request = plan.request.model_dump(
        mode="json", exclude={"limit", "cursor", "clearance_scope", "timeout"}
    )
    return {"request": request, "clearance": plan.clearance.entries()}


def pinned(plan: Plan, position: Position) -> Plan:
    """The plan of a later page or a rerun: the first page's stamp, decay clock and pool."""
    pool = plan.pool_size if position.pool is None else position.pool
    return replace(
        plan,
        as_of=position.as_of,
        as_of_ms=position.now_ms,
        pool_size=pool,
        pushdown=replace(plan.pushdown, as_of=position.as_of),
        timings_ms={},
        degraded=[],
    )


def next_position(plan: Plan, position: Position, response: SearchResponse) -> Position:
    """Where the page after `response` starts; what the first page pinned stays."""
    if plan.order is not None:
        last = response.last_state()
        after = None if last is None else Keyset.of(plan.order, last)
        return replace(position, after=after)
    return replace(position, offset=position.offset + len(response))


__all__ = ["Answers", "Searches", "next_position", "pinned", "query_shape"]
