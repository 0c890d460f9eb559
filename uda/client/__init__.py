"""The public entry: `connect` and `aconnect`, and the blocking client `Client`.

`connect` opens a `Client` on a profile, or a `uda.http.remote.RemoteClient` on the URL of a
UDA service; `aconnect` opens their async twins. The sync client, like the remote one, is a
`uda.facade.SyncFacade`: it runs its async twin (`AsyncClient`, in `uda.client.async_client`, also
exported here) on an event loop in a background thread, so it works the same from scripts,
from threads and from inside a running loop (notebooks); there is one implementation of every
operation, not two.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack, overload

from connectors.base import Connector
from uda.client.async_client import AsyncClient
from uda.config import Profile, load_profile
from uda.embedding.base import Embedder
from uda.errors import ConfigError
from uda.facade import SyncFacade
from uda.query.aggregates import (
    AggregateOptions,
    AggregateRequest,
    AggregateResponse,
    aggregate_request,
)
from uda.query.results import SearchResponse
from uda.tuning import Tuning
from uda.tuning import run as tuning_run
from uda.write.consistency import ConsistencyReport, RepairReport
from uda.write.ingest import SourceIngestReport, SourceOptions
from uda.write.writer import IngestReport

if TYPE_CHECKING:
    from uda.http.remote import AsyncRemoteClient, RemoteClient

__all__ = ["AsyncClient", "Client", "aconnect", "connect", "is_url"]


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

    @property
    def connectors(self) -> tuple[Connector, ...]:
        """The open connectors, in the profile's order."""
        return self._async.connectors

    @property
    def embedder(self) -> Embedder:
        """The query and passage embedder this client uses."""
        return self._async.embedder

    def read_counts(self) -> dict[str, dict[str, int]]:
        """Where search reads went, per replicated backend; see `AsyncClient.read_counts`."""
        return self._async.read_counts()

    def rerun(
        self,
        query_id: str,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        clearance_scope: Iterable[str] | None = None,
    ) -> SearchResponse:
        """A saved query answered again; see `AsyncClient.rerun`."""
        return self._call(
            self._async.rerun(query_id, cursor=cursor, limit=limit, clearance_scope=clearance_scope)
        )

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

    def tune(
        self,
        *,
        queries: int = tuning_run.DEFAULT_QUERIES,
        seed: int = 0,
        dry_run: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> Tuning:
        """Tune the PageRank weight on this store's own data; see `AsyncClient.tune`."""
        return self._call(
            self._async.tune(queries=queries, seed=seed, dry_run=dry_run, progress=progress)
        )

    def forget_tuning(self) -> None:
        """Forget what `tune` recorded; see `AsyncClient.forget_tuning`."""
        self._call(self._async.forget_tuning())

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

    def aggregate(
        self,
        query: str | None = None,
        clearance_scope: Iterable[str] | None = None,
        context_filters: Mapping[str, Any] | None = None,
        **options: Unpack[AggregateOptions],
    ) -> AggregateResponse:
        """Count the visible matches by group; see `AsyncClient.aggregate`."""
        request = aggregate_request(query, clearance_scope, context_filters, **options)
        return self.run_aggregate(request)

    def run_aggregate(
        self, request: AggregateRequest, *, pushdown: bool = True
    ) -> AggregateResponse:
        """Answer one validated aggregate; see `AsyncClient.run_aggregate`."""
        return self._call(self._async.run_aggregate(request, pushdown=pushdown))


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
