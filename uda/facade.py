"""The blocking clients' one shape: a facade that runs its async twin on a loop of its own.

`uda.Client` drives `uda.AsyncClient`, `uda.http.remote.RemoteClient` drives
`AsyncRemoteClient`. The loop runs in a daemon thread, so a blocking call works the same from
a script, from several threads and from inside a running loop (a notebook), where
`asyncio.run` cannot; and each operation is written once, on the async client. What both
twins offer (`search`, `run`, `ingest`, `export`, `fields`, `operators`) is forwarded here; a
facade adds the rest, each method one `_call` of the twin's method of the same name.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar, Unpack

from uda.query.contracts import SearchOptions, SearchRequest, search_request
from uda.query.export import DEFAULT_MAX_ROWS, PAGE_ROWS

if TYPE_CHECKING:
    from uda.query.discovery import FilterPath, Operators
    from uda.query.export import ExportReport, Progress, Sink
    from uda.write.validation import ElementInput, RelationInput
    from uda.write.writer import IngestReport

T = TypeVar("T")
ResponseT = TypeVar("ResponseT")


class AsyncTwin(Protocol):
    """What a facade forwards to: the async client's core operations."""

    async def run(self, request: SearchRequest) -> Any:
        """Answer one validated search request."""
        ...

    async def ingest(
        self, elements: Iterable[ElementInput] = (), relations: Iterable[RelationInput] = ()
    ) -> IngestReport:
        """Write elements and relations."""
        ...

    async def close(self) -> None:
        """Release what the client holds."""
        ...

    async def export(
        self,
        query: str | None = None,
        clearance_scope: Iterable[str] | None = None,
        context_filters: Mapping[str, Any] | None = None,
        *,
        format: str = "arrow",
        sink: Sink,
        max_rows: int = ...,
        page_size: int = ...,
        progress: Progress | None = None,
        **options: Unpack[SearchOptions],
    ) -> ExportReport:
        """Write every match of a search to a sink."""
        ...

    async def fields(
        self,
        prefix: str | None = None,
        clearance_scope: Iterable[str] | None = None,
        *,
        values: bool = True,
    ) -> list[FilterPath]:
        """The filterable paths, with their visible values."""
        ...

    async def operators(self) -> Operators:
        """The filter operators by field type."""
        ...


TwinT = TypeVar("TwinT", bound=AsyncTwin)


_DRAIN_S = 3.0  # how long closing waits for the loop's leftover tasks to end


async def _cancel_the_rest() -> None:
    """Cancel every other task of the running loop and wait (bounded) for them to end."""
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=_DRAIN_S)
    await asyncio.get_running_loop().shutdown_asyncgens()


class SyncFacade(Generic[TwinT, ResponseT]):
    """A blocking client over `twin`, whose `run` answers with a `ResponseT`.

    Args:
        twin: the async client; from now on it is used only on the facade's loop.
    """

    def __init__(self, twin: TwinT) -> None:
        self._async = twin
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="uda-loop", daemon=True)
        self._thread.start()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def search(
        self,
        query: str | None = None,
        limit: int = 5,
        clearance_scope: Iterable[str] | None = None,
        context_filters: Mapping[str, Any] | None = None,
        **options: Unpack[SearchOptions],
    ) -> ResponseT:
        """Search; see the async client's `search` (e.g. `uda.AsyncClient.search`).

        Raises:
            UserError: a bad request, naming the field and the value.
        """
        return self.run(search_request(query, limit, clearance_scope, context_filters, **options))

    def run(self, request: SearchRequest) -> ResponseT:
        """Answer one validated search request; see `uda.AsyncClient.run`."""
        return self._call(self._async.run(request))

    def ingest(
        self, elements: Iterable[ElementInput] = (), relations: Iterable[RelationInput] = ()
    ) -> IngestReport:
        """Write elements and relations; see `uda.AsyncClient.ingest`."""
        # Read the iterables here: a generator belongs to the caller's thread.
        return self._call(self._async.ingest(list(elements), list(relations)))

    def close(self) -> None:
        """Close the async client and stop the background loop. Idempotent."""
        if self._loop.is_closed():
            return
        try:
            self._call(self._async.close())
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        # As `asyncio.run` ends: whatever still runs on the loop (a call abandoned at its
        # deadline, a driver's pool worker) is cancelled and awaited before the loop closes,
        # so nothing dies later with "Event loop is closed" or "Task was destroyed".
        with contextlib.suppress(Exception):  # best effort: the loop closes regardless
            asyncio.run_coroutine_threadsafe(_cancel_the_rest(), self._loop).result(
                timeout=_DRAIN_S + 1.0
            )
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def export(
        self,
        query: str | None = None,
        clearance_scope: Iterable[str] | None = None,
        context_filters: Mapping[str, Any] | None = None,
        *,
        format: str = "arrow",
        sink: Sink,
        max_rows: int = DEFAULT_MAX_ROWS,
        page_size: int = PAGE_ROWS,
        progress: Progress | None = None,
        **options: Unpack[SearchOptions],
    ) -> ExportReport:
        """Write every match of a search to `sink`; see `uda.AsyncClient.export`.

        `progress` runs on the client's background thread, while this call blocks.
        """
        return self._call(
            self._async.export(
                query,
                clearance_scope,
                context_filters,
                format=format,
                sink=sink,
                max_rows=max_rows,
                page_size=page_size,
                progress=progress,
                **options,
            )
        )

    def fields(
        self,
        prefix: str | None = None,
        clearance_scope: Iterable[str] | None = None,
        *,
        values: bool = True,
    ) -> list[FilterPath]:
        """The filterable paths with their visible values; see `uda.AsyncClient.fields`."""
        return self._call(self._async.fields(prefix, clearance_scope, values=values))

    def operators(self) -> Operators:
        """The filter operators by field type; see `uda.AsyncClient.operators`."""
        return self._call(self._async.operators())
