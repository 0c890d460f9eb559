"""The async core of the client: `AsyncClient`, UDA over the connectors of one profile.

A search is one validated `SearchRequest`: `AsyncClient.run(request)` answers it, and
`search(query, limit, ...)` only builds the request. Every surface reaches this class: the
blocking `uda.client.Client` runs it on a loop of its own, and the HTTP service, the agent
tools and MCP call it directly. The commands that look after the store rather than search or
write it (stats, tuning, consistency) are mixed in from `uda.client.maintenance`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Self, Unpack, cast

from connectors.base import Connector, RelationalCapable, system_of_record
from connectors.registry import connector_class
from uda.client.maintenance import StoreMaintenance
from uda.config import Profile
from uda.embedding.base import Embedder, cache_root
from uda.embedding.factory import shared_embedder
from uda.errors import ConfigError, ConnectorError, EmbeddingModelMismatchError
from uda.hlc import HybridLogicalClock
from uda.query import discovery
from uda.query import export as exporting
from uda.query.aggregates import (
    AggregateOptions,
    AggregateRequest,
    AggregateResponse,
    aggregate_request,
)
from uda.query.aggregates.engine import Aggregator
from uda.query.contracts import SearchOptions, SearchRequest, search_request
from uda.query.deadlines import Budget, Guard, bounded
from uda.query.online import OfflineStores
from uda.query.planner import Planner
from uda.query.results import SearchResponse
from uda.query.saved import SavedQuery
from uda.write.ingest import SourceIngestReport, SourceOptions, ingest_source
from uda.write.validation import ElementInput, RelationInput
from uda.write.writer import IngestReport, Writer, derived_stores


def profile_embedder(profile: Profile) -> Embedder:
    """The process's embedder for `profile`: its runtime, model and embedding cache."""
    return shared_embedder(
        profile.model_path,
        profile.embedder,
        options=profile.embedder_options,
        cache=cache_root() / "embeddings" if profile.embedding_cache else None,
        cluster=profile.cluster,
    )


log = logging.getLogger(__name__)


async def _check_embedding_model(sor: RelationalCapable, embedder: Embedder) -> None:
    """Refuse a store whose vectors another model made (its first write records the model)."""
    recorded = await sor.embedding_model()
    if recorded is None:
        return
    mine = await asyncio.to_thread(lambda: embedder.fingerprint)
    if recorded != mine:
        raise EmbeddingModelMismatchError(recorded, mine)


class AsyncClient(StoreMaintenance):
    """UDA over the connectors of one profile, for asyncio code.

    Use `async with uda.aconnect(...) as client:` or `await client.open()` / `close()`.
    """

    def __init__(
        self,
        profile: Profile,
        *,
        embedder: Embedder | None = None,
        clock: HybridLogicalClock | None = None,
    ) -> None:
        self.profile = profile
        self._embedder = embedder
        self._clock = clock
        self._connectors: list[Connector] = []
        self._planner: Planner | None = None
        self._writer: Writer | None = None

    async def open(self) -> Self:
        """Connect every connector of the profile (concurrently). Idempotent."""
        if self._planner is not None:
            return self
        connectors = [
            connector_class(spec.name)(**dict(spec.options)) for spec in self.profile.connectors
        ]
        sor = system_of_record(connectors)  # by capability: raises before anything connects
        # The system of record must connect; another store that cannot is left out of the
        # searches (flagged as degraded) and connected on a later call, when it answers.
        outcomes = await asyncio.gather(
            *(self._connect(c, required=c is cast("Connector", sor)) for c in connectors),
            return_exceptions=True,
        )
        self._connectors = connectors
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        if failed:
            await self.close()
            raise failed[0]
        offline = OfflineStores(
            c.name for c, up in zip(connectors, outcomes, strict=True) if up is False
        )
        embedder = self._embedder or profile_embedder(self.profile)
        clock = self._clock or HybridLogicalClock()
        try:
            await _check_embedding_model(sor, embedder)
            # Never stamp below what is already stored, whatever the wall clock says now.
            clock.observe(await sor.last_hlc())
        except BaseException:
            await self.close()
            raise
        self._planner = Planner(
            connectors=connectors,
            system_of_record=sor,
            embedder=embedder,
            defaults=self.profile.search,
            offline=offline,
        )
        try:
            await self._planner.tuning.read()  # what `uda tune` recorded, if anything
        except BaseException:
            await self.close()
            raise
        deadlines = self.profile.search.deadlines
        sor_call_s = deadlines.call_for(cast("Connector", sor).name)
        self._writer = Writer(
            system_of_record=sor,
            stores=derived_stores(connectors),
            embedder=embedder,
            clock=clock,
            write_timeout_s=deadlines.write_s,
            # A write waits on no one: a slow read must not fail it, a dead store must, in
            # seconds rather than the pool's 30 (the longer of a call's and a connection's).
            call_timeout_s=max(sor_call_s, deadlines.connect_s),
            offline=offline,
        )
        return self

    async def _connect(self, connector: Connector, *, required: bool) -> bool:
        """Connect one connector; False when an optional one cannot now (it is logged).

        Raises:
            ConnectorError: the system of record cannot connect.
        """
        if required:
            await connector.connect()
            return True
        try:
            await bounded(connector.connect(), self.profile.search.deadlines.connect_s)
        except (TimeoutError, ConnectorError, OSError) as exc:
            reason = "no answer in time" if isinstance(exc, TimeoutError) else str(exc)
            log.warning(
                "%s is unavailable (%s): searches leave it out until it answers",
                connector.name,
                reason,
            )
            return False
        return True

    async def close(self) -> None:
        """Close every connector (persisting what they keep in memory). Idempotent."""
        if self._planner is not None:
            await self._planner.close()  # the queries still being saved
        connectors, self._connectors = self._connectors, []
        self._planner = None
        self._writer = None
        await asyncio.gather(*(c.close() for c in connectors))

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def connectors(self) -> tuple[Connector, ...]:
        """The open connectors (empty while closed), e.g. for health probes."""
        return tuple(self._connectors)

    @property
    def embedder(self) -> Embedder:
        """The query and passage embedder this client uses."""
        return self._embedder or profile_embedder(self.profile)

    def _require(self) -> tuple[Planner, Writer]:
        if self._planner is None or self._writer is None:
            raise ConfigError("the client is closed: open it (or use `async with`) first")
        return self._planner, self._writer

    def guard(self, timeout_s: float | None = None) -> Guard:
        """Deadlines, retries and breakers for backend calls outside a search.

        An element lookup runs its reads through it as a search does: the system of record
        required, the graph optional (`guard.degraded` says what was left out).
        """
        planner, _ = self._require()
        budget = Budget(self.profile.search.deadlines, search_s=timeout_s)
        return Guard(budget, planner.breakers, [])

    def circuit_states(self) -> dict[str, str]:
        """Each backend's circuit breaker: `closed`, `open` or `half_open` (for metrics)."""
        return {} if self._planner is None else self._planner.breakers.states()

    def read_counts(self) -> dict[str, dict[str, int]]:
        """Search reads each server of a replicated backend served, since connecting.

        Only backends that read on copies (PostgreSQL with standbys) appear; for metrics.
        """
        counts: dict[str, dict[str, int]] = {}
        for connector in self._connectors:
            read_counts: Callable[[], Mapping[str, int]] | None = getattr(
                connector, "read_counts", None
            )
            served: Mapping[str, int] = {} if read_counts is None else read_counts()
            if served:
                counts[connector.name] = dict(served)
        return counts

    async def search(
        self,
        query: str | None = None,
        limit: int = 5,
        clearance_scope: Iterable[str] | None = None,
        context_filters: Mapping[str, Any] | None = None,
        **options: Unpack[SearchOptions],
    ) -> SearchResponse:
        """Search every backend of the profile; see `SearchRequest` for the options.

        Builds the request and hands it to `run`. No clearance means `public` only.

        Raises:
            UserError: a bad request, naming the field and the value.
        """
        request = search_request(query, limit, clearance_scope, context_filters, **options)
        return await self.run(request)

    async def run(self, request: SearchRequest, *, owner: str | None = None) -> SearchResponse:
        """Answer one validated search request.

        The core of every search: `search` builds a request and calls this, the HTTP service
        and the agent tools pass theirs here directly, so a request is validated once. A
        first page is saved under its `query_id` (`owner`: who asked, for the HTTP service).

        Raises:
            UserError: what only the profile can judge (an unknown filter field, element
                type, relation or clearance entry), naming the field and the value.
        """
        planner, _ = self._require()
        return await planner.search(request, owner=owner)

    async def saved_query(self, query_id: str, *, owner: str | None = None) -> SavedQuery:
        """A saved query as it was asked: its request, resolved clearance and stamp.

        Raises:
            QueryNotFoundError: no saved query `query_id` (of `owner`, when given).
        """
        planner, _ = self._require()
        return await planner.saved_query(query_id, owner)

    async def rerun(
        self,
        query_id: str,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        owner: str | None = None,
        clearance_scope: Iterable[str] | None = None,
    ) -> SearchResponse:
        """A saved query answered again: its first page as it was, or the page `cursor` names.

        Works after a restart and from any client of the same store. `clearance_scope`
        narrows the clearance the query was saved with (never widens it): an agent passes
        its own, so a query saved by a more cleared caller shows it only what it may see.

        Raises:
            QueryNotFoundError: no saved query `query_id` (of `owner`, when given).
            InvalidRequestError: a cursor of another query (or of another clearance).
            UnknownClearanceError: a bad `clearance_scope` entry.
        """
        planner, _ = self._require()
        return await planner.rerun(
            query_id,
            owner=owner,
            cursor=cursor,
            limit=limit,
            clearance_scope=None if clearance_scope is None else list(clearance_scope),
        )

    async def ingest(
        self, elements: Iterable[ElementInput] = (), relations: Iterable[RelationInput] = ()
    ) -> IngestReport:
        """Validate and write elements and relations; unchanged content is skipped."""
        planner, writer = self._require()
        try:
            return await writer.ingest(elements, relations)
        finally:
            planner.graph_changed()

    async def delete(self, element_ids: Iterable[str]) -> IngestReport:
        """Tombstone elements in every store (their history stays readable with `as_of`)."""
        planner, writer = self._require()
        try:
            return await writer.delete(element_ids)
        finally:
            planner.graph_changed()

    def _system_of_record(self) -> RelationalCapable:
        self._require()
        return system_of_record(self._connectors)

    async def element_ids(self, prefix: str = "") -> list[str]:
        """Ids of the elements that exist now and start with `prefix` (e.g. one source's)."""
        return await self._system_of_record().live_element_ids(prefix)

    async def ingest_source(
        self, path: str | os.PathLike[str], **options: Unpack[SourceOptions]
    ) -> SourceIngestReport:
        """Load a folder or git repository and write what changed, as `uda ingest` does.

        The options (`include_code`, `policy`, `max_file_bytes`, `batch_size`,
        `tombstone_vanished`, `progress`) are those of `uda.write.ingest.ingest_source`;
        `progress` runs on this client's loop.

        Returns:
            What was loaded, written, reused and deleted.
        """
        return await ingest_source(self, path, **options)

    async def export(
        self,
        query: str | None = None,
        clearance_scope: Iterable[str] | None = None,
        context_filters: Mapping[str, Any] | None = None,
        *,
        format: str = "arrow",
        sink: exporting.Sink,
        max_rows: int = exporting.DEFAULT_MAX_ROWS,
        page_size: int = exporting.PAGE_ROWS,
        progress: exporting.Progress | None = None,
        **options: Unpack[SearchOptions],
    ) -> exporting.ExportReport:
        """Write every match of a search to `sink` as `arrow`, `parquet` or `csv`, page by page.

        The request is `search`'s; without a query, every visible match of the filters in
        `order_by` order, else the ranking of a pool of 1,000 (or `pool_size`). At most
        `max_rows` rows; the report says how many were written and whether more matched.
        Memory holds one page (`page_size` rows) at a time; `progress(rows)` runs after each.

        Raises:
            UserError: a bad request, format or `max_rows`, naming the field.
        """
        request = search_request(query, page_size, clearance_scope, context_filters, **options)
        return await exporting.export_to(
            self.run, request, format=format, sink=sink, max_rows=max_rows, progress=progress
        )

    async def fields(
        self,
        prefix: str | None = None,
        clearance_scope: Iterable[str] | None = None,
        *,
        values: bool = True,
    ) -> list[discovery.FilterPath]:
        """Every filterable path starting with `prefix`: own fields and relation paths.

        Each with its type, operators and whether `order_by` takes it, and (`values`) the
        values the clearance may see with their counts, for paths with few distinct ones.
        No clearance means `public` only; an unknown prefix lists nothing.
        """
        sor = self._system_of_record()
        return await discovery.describe_paths(
            sor, clearance_scope, prefix, values=values, guard=self.guard()
        )

    async def operators(self) -> discovery.Operators:
        """The filter operators each field type takes, and what each means."""
        return discovery.operators()

    async def aggregate(
        self,
        query: str | None = None,
        clearance_scope: Iterable[str] | None = None,
        context_filters: Mapping[str, Any] | None = None,
        **options: Unpack[AggregateOptions],
    ) -> AggregateResponse:
        """Count the visible matches by group; see `AggregateRequest` (docs/adr/0024).

        No clearance means `public` only. Raises `UserError` naming a bad field.
        """
        request = aggregate_request(query, clearance_scope, context_filters, **options)
        return await self.run_aggregate(request)

    async def run_aggregate(
        self, request: AggregateRequest, *, pushdown: bool = True
    ) -> AggregateResponse:
        """Answer one validated aggregate (`pushdown=False`: always the Python reference)."""
        planner, _ = self._require()
        aggregator = Aggregator(planner=planner, connectors=self._connectors, pushdown=pushdown)
        return await aggregator.aggregate(request)
