"""Per-conversation state: every search an agent ran, by query id, to build on and refer to.

An agent rarely gets a question right in one call. It searches, narrows with a filter,
opens the third result, follows a link. Keeping each search (its request and its results)
under a short id lets it say "refine q2 with status=accepted" or "show rank 3 of q1"
without repeating itself, and without the tools re-running searches to answer.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from uda.agent.models import FilterSpec, LegRank, Strategy
from uda.errors import UserError
from uda.query.contracts import SearchResult


class UnknownQueryError(UserError):
    """A query id that this conversation has not produced (or has forgotten)."""


@dataclass(frozen=True, kw_only=True)
class QuerySpec:
    """What was asked: enough to run the search again, or a variation of it."""

    query: str | None  # None: a structured retrieval (find_elements)
    limit: int
    filters: Mapping[str, FilterSpec]
    element_types: tuple[str, ...] | None
    where: Mapping[str, Any] | None = None
    depth: int | None  # None: the automatic mode's
    strategy: Strategy
    text_weight: float | None = None
    reason: str = ""
    routed: bool = False  # chosen by `auto_search`: a changed query is routed again
    order_by: str | None = None
    cursor: str | None = None  # the page this spec asks for (None: the first)
    page: int = 1


@dataclass(frozen=True, kw_only=True)
class QueryRecord:
    """One search of the conversation: the request, the results, and how they ranked."""

    query_id: str
    spec: QuerySpec
    clearance: tuple[str, ...]
    weights: Mapping[str, float]
    results: tuple[SearchResult, ...]
    legs: Mapping[str, Mapping[str, LegRank]]
    # Per result: the graph nodes the query names that it is, or is one edge from.
    linked: Mapping[str, tuple[str, ...]] = field(default_factory=dict[str, tuple[str, ...]])
    refined_from: str | None = None
    next_cursor: str | None = None  # where `next_page` continues (None: the last page)
    saved_id: str | None = None  # the store's id of the search (`reopen_query`)
    reopened: bool = False  # pages come from the saved search (`rerun`), not a new one
    degraded: tuple[str, ...] = ()  # backends the answer was made without, described

    def result(self, rank: int) -> SearchResult:
        """The result at 1-based `rank`.

        Raises:
            UnknownQueryError: no result has that rank.
        """
        if not 1 <= rank <= len(self.results):
            raise UnknownQueryError(
                f"{self.query_id} has {len(self.results)} results; rank {rank} is not one of them",
                field="rank",
                value=rank,
            )
        return self.results[rank - 1]


@dataclass(kw_only=True)
class ConversationState:
    """The searches of one conversation, newest last; the oldest are forgotten past a bound.

    Each record remembers the clearance it ran with and is only handed back to a caller
    with the same clearance, so sharing a state object between callers by mistake cannot
    show one caller another's results.
    """

    max_queries: int = 64
    _records: OrderedDict[str, QueryRecord] = field(
        default_factory=OrderedDict[str, QueryRecord], init=False, repr=False
    )
    _counter: int = field(default=0, init=False)

    def next_id(self) -> str:
        """A new, short query id (`q1`, `q2`, ...)."""
        self._counter += 1
        return f"q{self._counter}"

    def add(self, record: QueryRecord) -> None:
        """Remember a search, forgetting the oldest beyond `max_queries`."""
        self._records[record.query_id] = record
        while len(self._records) > self.max_queries:
            self._records.popitem(last=False)

    def records(self, clearance: tuple[str, ...]) -> list[QueryRecord]:
        """The searches run with this clearance, oldest first."""
        return [r for r in self._records.values() if r.clearance == clearance]

    def current(self, clearance: tuple[str, ...]) -> QueryRecord | None:
        """The most recent search run with this clearance."""
        records = self.records(clearance)
        return records[-1] if records else None

    def get(self, query_id: str | None, clearance: tuple[str, ...]) -> QueryRecord:
        """A search by id (None: the most recent one).

        Raises:
            UnknownQueryError: no such search, naming the ones there are.
        """
        record = (
            self.current(clearance) if query_id is None else self._records.get(query_id.strip())
        )
        if record is not None and record.clearance == clearance:
            return record
        known = [r.query_id for r in self.records(clearance)]
        if not known:
            raise UnknownQueryError(
                "there are no searches in this conversation yet: run search first",
                field="query_id",
                value=query_id,
            )
        raise UnknownQueryError(
            f"no search with query_id {query_id!r}; known: {', '.join(known[-10:])}",
            field="query_id",
            value=query_id,
        )

    def mentions(
        self, element_id: str, clearance: tuple[str, ...]
    ) -> list[tuple[QueryRecord, int, SearchResult, dict[str, object] | None]]:
        """Where an element appeared: as a result (node None) or as a result's context node."""
        found: list[tuple[QueryRecord, int, SearchResult, dict[str, object] | None]] = []
        for record in self.records(clearance):
            for rank, result in enumerate(record.results, start=1):
                if result.element_id == element_id:
                    found.append((record, rank, result, None))
                for node in result.context_nodes:
                    if node.get("element_id") == element_id:
                        found.append((record, rank, result, node))
        return found
