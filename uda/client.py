"""The public clients: an async core (`AsyncClient`) and a sync facade (`Client`).

A search is one validated `SearchRequest`: `AsyncClient.run(request)` answers it, and
`search(query, limit, ...)` only builds the request. The sync client, like the remote one, is
a `uda.facade.SyncFacade`: it runs its async twin on an event loop in a background thread, so
it works the same from scripts, from threads and from inside a running loop (notebooks);
there is one implementation of every operation, not two.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, Unpack, overload

from connectors.base import Connector, RelationalCapable, system_of_record
from connectors.registry import connector_class
from uda.config import Profile, load_profile
from uda.embedder import Embedder, SentenceTransformerEmbedder
from uda.errors import ConfigError, MissingCapabilityError
from uda.facade import SyncFacade
from uda.hlc import HybridLogicalClock
from uda.query.contracts import SearchOptions, SearchRequest, search_request
from uda.query.planner import Planner
from uda.query.results import SearchResponse
from uda.write import consistency
from uda.write.consistency import ConsistencyReport, RepairReport
from uda.write.ingest import SourceIngestReport, SourceOptions, ingest_source
from uda.write.validation import ElementInput, RelationInput
from uda.write.writer import IngestReport, Writer, derived_stores

if TYPE_CHECKING:
    from uda.http.remote import AsyncRemoteClient, RemoteClient

_EMBEDDERS: dict[str | None, SentenceTransformerEmbedder] = {}
_EMBEDDERS_LOCK = threading.Lock()


def shared_embedder(model_path: str | None = None) -> SentenceTransformerEmbedder:
    """One embedder per model in the process: the model loads once, however many clients."""
    with _EMBEDDERS_LOCK:
        if model_path not in _EMBEDDERS:
            _EMBEDDERS[model_path] = SentenceTransformerEmbedder(model_path)
        return _EMBEDDERS[model_path]


class AsyncClient:
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
        await asyncio.gather(*(c.connect() for c in connectors))
        self._connectors = connectors
        try:
            sor = system_of_record(connectors)
        except MissingCapabilityError:
            await self.close()
            raise
        embedder = self._embedder or shared_embedder(self.profile.model_path)
        clock = self._clock or HybridLogicalClock()
        # Never stamp below what is already stored, whatever the wall clock says now.
        clock.observe(await sor.last_hlc())
        self._planner = Planner(
            connectors=connectors,
            system_of_record=sor,
            embedder=embedder,
            defaults=self.profile.search,
        )
        self._writer = Writer(
            system_of_record=sor, stores=derived_stores(connectors), embedder=embedder, clock=clock
        )
        return self

    async def close(self) -> None:
        """Close every connector (persisting what they keep in memory). Idempotent."""
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
        return self._embedder or shared_embedder(self.profile.model_path)

    def _require(self) -> tuple[Planner, Writer]:
        if self._planner is None or self._writer is None:
            raise ConfigError("the client is closed: open it (or use `async with`) first")
        return self._planner, self._writer

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

    async def run(self, request: SearchRequest) -> SearchResponse:
        """Answer one validated search request.

        The core of every search: `search` builds a request and calls this, the HTTP service
        and the agent tools pass theirs here directly, so a request is validated once.

        Raises:
            UserError: what only the profile can judge (an unknown filter field, element
                type, relation or clearance entry), naming the field and the value.
        """
        planner, _ = self._require()
        return await planner.search(request)

    async def ingest(
        self, elements: Iterable[ElementInput] = (), relations: Iterable[RelationInput] = ()
    ) -> IngestReport:
        """Validate and write elements and relations; unchanged content is skipped."""
        _, writer = self._require()
        return await writer.ingest(elements, relations)

    async def delete(self, element_ids: Iterable[str]) -> IngestReport:
        """Tombstone elements in every store (their history stays readable with `as_of`)."""
        _, writer = self._require()
        return await writer.delete(element_ids)

    async def sync(self) -> dict[str, int]:
        """Finish any interrupted write: apply the outbox to every store."""
        _, writer = self._require()
        return await writer.sync()

    def _system_of_record(self) -> RelationalCapable:
        self._require()
        return system_of_record(self._connectors)

    async def element_ids(self, prefix: str = "") -> list[str]:
        """Ids of the elements that exist now and start with `prefix` (e.g. one source's)."""
        return await self._system_of_record().live_element_ids(prefix)

    async def stats(self) -> dict[str, Any]:
        """Counts from the system of record."""
        sor = self._system_of_record()
        return {"profile": self.profile.name, **(await sor.counts())}

    async def check(self) -> ConsistencyReport:
        """Compare every derived store with the system of record; changes nothing.

        The report names, per store, what is missing, extra or stale, and what the outbox
        still holds (see `uda.write.consistency`).
        """
        sor = self._system_of_record()
        return await consistency.check(sor, derived_stores(self._connectors))

    async def repair(self, report: ConsistencyReport | None = None) -> RepairReport:
        """Make every derived store match the system of record again, then check once more.

        Args:
            report: a check to work from (None: check now).
        """
        _, writer = self._require()
        sor = self._system_of_record()
        return await consistency.repair(sor, derived_stores(self._connectors), writer, report)

    async def ingest_source(
        self, path: str | os.PathLike[str], **options: Unpack[SourceOptions]
    ) -> SourceIngestReport:
        """Load a folder or git repository and write what changed, as `uda ingest` does.

        The options (`include_code`, `policy`, `batch_size`, `tombstone_vanished`,
        `progress`) are those of `uda.write.ingest.ingest_source`; `progress` runs on this
        client's loop.

        Returns:
            What was loaded, written, reused and deleted.
        """
        return await ingest_source(self, path, **options)


class Client(SyncFacade[AsyncClient, SearchResponse]):
    """The synchronous client: the same operations as `AsyncClient`, blocking."""

    def __init__(self, profile: Profile, **kwargs: Any) -> None:
        super().__init__(AsyncClient(profile, **kwargs))
        try:
            self._call(self._async.open())
        except BaseException:
            self._stop_loop()
            raise

    @property
    def profile(self) -> Profile:
        """The resolved profile."""
        return self._async.profile

    def delete(self, element_ids: Iterable[str]) -> IngestReport:
        """Tombstone elements; see `AsyncClient.delete`."""
        return self._call(self._async.delete(list(element_ids)))

    def sync(self) -> dict[str, int]:
        """Apply any pending outbox entries; see `AsyncClient.sync`."""
        return self._call(self._async.sync())

    def element_ids(self, prefix: str = "") -> list[str]:
        """Ids of live elements starting with `prefix`; see `AsyncClient.element_ids`."""
        return self._call(self._async.element_ids(prefix))

    def stats(self) -> dict[str, Any]:
        """Counts from the system of record."""
        return self._call(self._async.stats())

    def check(self) -> ConsistencyReport:
        """Compare every derived store with the system of record; see `AsyncClient.check`."""
        return self._call(self._async.check())

    def repair(self, report: ConsistencyReport | None = None) -> RepairReport:
        """Repair every derived store; see `AsyncClient.repair`."""
        return self._call(self._async.repair(report))

    def ingest_source(
        self, path: str | os.PathLike[str], **options: Unpack[SourceOptions]
    ) -> SourceIngestReport:
        """Load a folder and write what changed; see `AsyncClient.ingest_source`.

        `progress` runs on the client's background thread, while this call blocks.
        """
        return self._call(self._async.ingest_source(path, **options))


@overload
def connect(
    target: Path | None = None, *, path: str | Path | None = None, **kwargs: Any
) -> Client: ...
@overload
def connect(
    target: str, *, path: str | Path | None = None, **kwargs: Any
) -> Client | RemoteClient: ...
def connect(
    target: str | Path | None = None, *, path: str | Path | None = None, **kwargs: Any
) -> Client | RemoteClient:
    """Open a client on a profile, or on a UDA HTTP service.

    Args:
        target: None for the embedded default (data in `./.uda`), a folder, a `.toml`
            profile file, or the URL of a UDA service (`http://...`, `https://...`).
        path: the embedded profile's data folder.
        **kwargs: passed to `Client` (an `embedder`, a `clock`), or for a URL to
            `uda.http.remote.RemoteClient` (`api_key`, `token`, `timeout`).
    """
    if is_url(target):
        from uda.http.remote import RemoteClient

        if path is not None:
            raise ConfigError("path= applies to local profiles, not to a URL", field="path")
        return RemoteClient(str(target), **kwargs)
    return Client(load_profile(target, path=path), **kwargs)


@overload
def aconnect(
    target: Path | None = None, *, path: str | Path | None = None, **kwargs: Any
) -> AsyncClient: ...
@overload
def aconnect(
    target: str, *, path: str | Path | None = None, **kwargs: Any
) -> AsyncClient | AsyncRemoteClient: ...
def aconnect(
    target: str | Path | None = None, *, path: str | Path | None = None, **kwargs: Any
) -> AsyncClient | AsyncRemoteClient:
    """Like `connect`, for asyncio: use as `async with uda.aconnect(...) as client:`."""
    if is_url(target):
        from uda.http.remote import AsyncRemoteClient

        if path is not None:
            raise ConfigError("path= applies to local profiles, not to a URL", field="path")
        return AsyncRemoteClient(str(target), **kwargs)
    return AsyncClient(load_profile(target, path=path), **kwargs)


def is_url(target: object) -> bool:
    """Whether a `connect` target names an HTTP service rather than a profile."""
    return isinstance(target, str) and target.lower().startswith(("http://", "https://"))
