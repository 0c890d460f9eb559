"""The agent's dependencies: who searches, with which clearance, and the conversation state.

Clearance lives here and only here. The tools read it from the deps on every call; no
tool argument can carry it, so a model cannot widen (or even name) what it may see.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from uda.agent.state import ConversationState
from uda.errors import InvalidRequestError
from uda.query.clearance import Clearance
from uda.query.contracts import search_request

if TYPE_CHECKING:
    import pyarrow as pa

    from uda.query.contracts import SearchOptions, SearchRequest, SearchResult
    from uda.query.deadlines import Degradation
    from uda.query.explanation import Explanation


class SearchResponse(Protocol):
    """What a search returns, as far as the tools read it (`uda.SearchResponse` is one)."""

    @property
    def results(self) -> list[SearchResult]:
        """The results, best first."""
        ...

    def explain(self) -> Explanation:
        """The plan and every leg's rank and contribution per result."""
        ...

    @property
    def next_cursor(self) -> str | None:
        """The next page's cursor (None on the last page)."""
        ...

    @property
    def query_id(self) -> str | None:
        """The saved search's id in the store (None: not saved)."""
        ...

    @property
    def degraded(self) -> Sequence[Degradation]:
        """Backends the answer was made without (empty: a full answer)."""
        ...

    def to_batches(self) -> pa.RecordBatchReader:
        """The results as Arrow batches (what an export writes)."""
        ...


class AsyncSearcher(Protocol):
    """Anything with `uda.AsyncClient.run`: a validated `SearchRequest` in, a response out."""

    async def run(self, request: SearchRequest) -> SearchResponse:
        """Answer one search request; see `uda.AsyncClient.run`."""
        ...


class SyncSearcher(Protocol):
    """Anything with `uda.Client.run` (called in a worker thread)."""

    def run(self, request: SearchRequest) -> SearchResponse:
        """Answer one search request; see `uda.Client.run`."""
        ...


Searcher = AsyncSearcher | SyncSearcher


@dataclass(kw_only=True)
class UDADeps:
    """What the UDA tools need: a client, the caller's clearance, the conversation's searches.

    Args:
        client: a `uda.AsyncClient` (or `uda.Client`, a remote client, or anything with
            that `run`).
        clearance_scope: the caller's clearance entries (levels, `project:<name>`,
            `project:*`); empty means `public` only. Checked here, at construction: a bad
            entry is the deployment's mistake, not something a model could fix.
        conversation: the conversation's searches (query ids, results); one per
            conversation.
        export_dir: the one folder `export_query` may write files into (None: exports are
            refused). The model names a file, never a folder.
    """

    client: Searcher
    clearance_scope: Sequence[str] = ()
    # Not named `state`: pydantic-ai's UI adapters write a front end's shared state into a
    # deps attribute of that name (their `StateHandler` protocol).
    conversation: ConversationState = field(default_factory=ConversationState)
    export_dir: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.clearance_scope, str):
            raise TypeError("clearance_scope is a list of entries, not one string")
        Clearance.parse(self.clearance_scope)
        # Frozen as a tuple: the records of the state are keyed by it.
        self.clearance_scope = tuple(self.clearance_scope)

    @property
    def clearance(self) -> tuple[str, ...]:
        """The clearance entries, as the state keys its records."""
        return tuple(self.clearance_scope)

    async def search(
        self,
        query: str | None,
        *,
        limit: int,
        context_filters: Mapping[str, Any],
        options: SearchOptions,
    ) -> SearchResponse:
        """Search with this caller's clearance — the only way the tools search.

        Raises:
            UserError: a bad request field, naming it (the tools hand it back to the model).
        """
        request = search_request(query, limit, self.clearance, context_filters, **options)
        client = self.client
        if inspect.iscoroutinefunction(client.run):
            return await cast("AsyncSearcher", client).run(request)
        # A blocking client must not stall the agent's event loop (and its other tool calls).
        return await asyncio.to_thread(cast("SyncSearcher", client).run, request)

    async def rerun(
        self, saved_id: str, *, cursor: str | None = None, limit: int | None = None
    ) -> SearchResponse:
        """A search saved in the store answered again, narrowed to this caller's clearance.

        Whoever saved it, the answer shows only what both its clearance and this caller's
        allow.

        Raises:
            QueryNotFoundError: no such saved search (over HTTP: none of this principal's).
            InvalidRequestError: the client cannot reopen saved searches.
        """
        rerun = getattr(self.client, "rerun", None)
        if rerun is None:
            raise InvalidRequestError(
                "this deployment's client cannot reopen saved searches", field="saved_id"
            )
        call = functools.partial(
            rerun, saved_id, cursor=cursor, limit=limit, clearance_scope=list(self.clearance)
        )
        if inspect.iscoroutinefunction(rerun):
            return cast("SearchResponse", await call())
        return cast("SearchResponse", await asyncio.to_thread(call))

    async def run(self, request: SearchRequest) -> SearchResponse:
        """Answer a whole request (an export's pages) with this caller's clearance, always.

        Whatever clearance `request` carries is replaced by the deps' own.
        """
        request = request.model_copy(update={"clearance_scope": list(self.clearance)})
        client = self.client
        if inspect.iscoroutinefunction(client.run):
            return await cast("AsyncSearcher", client).run(request)
        return await asyncio.to_thread(cast("SyncSearcher", client).run, request)
