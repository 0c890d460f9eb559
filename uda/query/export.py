"""Export: every match of a search, written a page at a time as Arrow IPC, Parquet or CSV.

An export walks the pages a caller would walk with cursors — the keyset pages of a structured
retrieval (`query=None`), or the slices of one ranking of a ranked one — and writes each page
as soon as it comes, so that memory holds one page (at most 100 rows), never the answer. It
stops after `max_rows` rows (default `DEFAULT_MAX_ROWS`) and says whether more matches were
left out (`ExportReport.truncated`). A ranked export ranks a pool of `RANKED_POOL` candidates
unless the request sets `pool_size` (at most 1,000, as for any search): a ranked answer ends
with its pool.

Formats, all in `ontology.result_schema()`:

- `arrow`: an Arrow IPC stream. It ends with an empty batch whose custom metadata holds
  `uda.export.rows`, `uda.export.truncated` and `uda.export.pages`, so a stream cut short (a
  server that failed half way) can be told from a complete one, and `uda.export.degraded`
  when a page was answered without some backend (a JSON list of backend, leg and reason).
- `parquet`: one row group per page; the footer's key-value metadata holds the same keys.
- `csv`: CSV cannot hold nested columns. The `properties` struct is flattened into typed
  columns `properties.<field>` (its fields are scalars); `extras` (a map) and
  `context_nodes` (a list of structs) are JSON text; dictionary columns are plain strings.
  Nothing in the file says whether it was truncated or degraded: the report does.

Clearance is whatever the `run` function applies: the export never reads anything but the
pages it is given, so it shows exactly what those searches would have shown.
"""

from __future__ import annotations

import contextlib
import os
import typing
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Sequence,
)
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import pyarrow as pa
from pydantic import Field, field_validator

from uda.errors import InvalidRequestError
from uda.query.contracts import SearchRequest
from uda.query.deadlines import Degradation
from uda.query.export_writers import (
    WRITERS,
    CountedSink,
    ExportFormat,
    ExportStatus,
    Writer,
    native_file,
)
from uda.query.projection import WHOLE

FORMATS: tuple[ExportFormat, ...] = ("arrow", "parquet", "csv")
MEDIA_TYPES: dict[ExportFormat, str] = {
    "arrow": "application/vnd.apache.arrow.stream",
    "parquet": "application/vnd.apache.parquet",
    "csv": "text/csv",
}
EXTENSIONS: dict[ExportFormat, str] = {"arrow": ".arrow", "parquet": ".parquet", "csv": ".csv"}

DEFAULT_MAX_ROWS = 10_000
MAX_ROWS = 1_000_000
"""The most rows one export may ask for."""
PAGE_ROWS = 100
"""Rows per page (the most a search returns at once)."""
RANKED_POOL = 1000
"""The candidate pool a ranked export ranks when the request does not say."""


_FORMAT_SET: frozenset[str] = frozenset(FORMATS)


class Page(Protocol):
    """What an export reads of one page (every response class of UDA is one)."""

    @property
    def next_cursor(self) -> str | None:
        """The cursor of the page after this one (None: the last page)."""
        ...

    def to_batches(self) -> pa.RecordBatchReader:
        """The page's rows in `ontology.result_schema()`."""
        ...

    @property
    def degraded(self) -> Sequence[Degradation]:
        """Backends the page was answered without (each page runs under its deadlines)."""
        ...


Run = Callable[[SearchRequest], Awaitable[Page]]
"""Answers one page request; it decides the clearance (an `AsyncClient.run`, an HTTP route)."""
Progress = Callable[[int], None]
"""Called after every page with the rows written so far."""
Sink = str | os.PathLike[str] | BinaryIO
"""Where an export goes: a path (written whole or not at all) or an open binary file."""


class ExportRequest(SearchRequest):
    """A search to export: the search body, plus `format` and `max_rows`.

    `limit` is the page size here (default and most: `PAGE_ROWS`).
    """

    limit: int = Field(default=PAGE_ROWS, ge=1, le=PAGE_ROWS, description="rows per page")
    format: ExportFormat = Field(default="arrow", description="arrow, parquet or csv")
    max_rows: int = Field(
        default=DEFAULT_MAX_ROWS,
        ge=1,
        le=MAX_ROWS,
        description="stop after this many rows (the report says whether more matched)",
    )

    @field_validator("max_rows", mode="before")
    @classmethod
    def _rows_not_a_bool(cls, value: object) -> object:
        if isinstance(value, bool):
            raise ValueError("expected an integer, not a boolean")
        return value

    def search_request(self) -> SearchRequest:
        """The search part, with the same fields set (an unset clearance stays unset)."""
        names = set(SearchRequest.model_fields)
        fields = {name: getattr(self, name) for name in self.model_fields_set if name in names}
        fields["limit"] = self.limit
        return SearchRequest(**fields)


@dataclass(frozen=True, kw_only=True)
class ExportReport:
    """What an export wrote.

    Attributes:
        rows: rows written.
        truncated: whether `max_rows` cut the answer short (more matches exist).
        pages: search pages read.
        ranked: a ranked export (its pool bounds it), or a structured one.
        degraded: backends some page was answered without (graph context missing, a leg
            left out); empty when every page was whole.
    """

    format: ExportFormat
    rows: int
    truncated: bool
    pages: int
    ranked: bool
    path: str | None = None
    degraded: tuple[Degradation, ...] = ()


def check_export(format: str, max_rows: int) -> ExportFormat:
    """The format, checked with `max_rows`.

    Raises:
        InvalidRequestError: naming `format` or `max_rows`.
    """
    if format not in _FORMAT_SET:
        raise InvalidRequestError(
            f"format: {format!r} is not an export format; use one of {', '.join(FORMATS)}",
            field="format",
            value=format,
        )
    rows = typing.cast("object", max_rows)
    if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= MAX_ROWS:
        raise InvalidRequestError(
            f"max_rows: give a whole number from 1 to {MAX_ROWS:,} (got {max_rows!r})",
            field="max_rows",
            value=max_rows,
        )
    return typing.cast("ExportFormat", format)


def first_request(request: SearchRequest) -> SearchRequest:
    """The first page's request: a ranked export ranks `RANKED_POOL` unless told otherwise.

    An export is the data itself: whole elements (`fields=["*"]`) unless the request says
    which fields it wants whole (`fields=[]`: clipped as a search answer is).
    """
    update: dict[str, Any] = {}
    if request.query is not None and request.pool_size is None:
        update["pool_size"] = RANKED_POOL
    if request.fields is None:
        update["fields"] = [WHOLE]
    return request.model_copy(update=update) if update else request


async def pages(
    run: Run, request: SearchRequest, max_rows: int, status: ExportStatus
) -> AsyncIterator[list[pa.RecordBatch]]:
    """Each page's batches in turn, until the last page or `max_rows` rows.

    The first page is read when the first item is asked for, so that a bad request fails
    there, before anything is written.
    """
    first = first_request(request)
    cursor = first.cursor
    while True:
        limit = min(first.limit, max_rows - status.rows)
        response = await run(first.model_copy(update={"limit": limit, "cursor": cursor}))
        batches = [batch for batch in response.to_batches() if batch.num_rows]
        status.pages += 1
        status.rows += sum(batch.num_rows for batch in batches)
        status.saw(response.degraded)
        cursor = response.next_cursor
        status.truncated = cursor is not None and status.rows >= max_rows
        yield batches
        if cursor is None or status.truncated:
            return


async def _export(
    run: Run,
    request: SearchRequest,
    format: ExportFormat,
    sink: CountedSink,
    max_rows: int,
    status: ExportStatus,
    progress: Progress | None = None,
) -> AsyncIterator[None]:
    """Write the export into `sink`, yielding after each page is written (and at the end)."""
    writer: Writer | None = None
    try:
        async for batches in pages(run, request, max_rows, status):
            if writer is None:
                writer = WRITERS[format](native_file(sink))
            for batch in batches:
                writer.write(batch)
            if progress is not None:
                progress(status.rows)
            yield
    except BaseException:
        if writer is not None:
            # Close the writer into the void: no footer or end marker may make a failed
            # export look complete, and none may be written later, when it is collected.
            sink.discard()
            with contextlib.suppress(Exception):
                writer.finish(status)
        raise
    if writer is not None:
        writer.finish(status)
    yield


def open_writer(format: ExportFormat, sink: BinaryIO) -> _ExportSink:
    """A writer of batches (in the result schema) to `sink`, for exports fed page by page."""
    return _ExportSink(format, sink)


class _ExportSink:
    """Batches in, one export file out (the remote client writes what the server sent)."""

    def __init__(self, format: ExportFormat, sink: BinaryIO) -> None:
        self._status = ExportStatus()
        self._sink = CountedSink(sink)
        self._writer = WRITERS[format](native_file(self._sink))

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self._writer.write(batch)
            self._status.rows += batch.num_rows

    def finish(self, *, pages: int, truncated: bool, degraded: Sequence[Degradation] = ()) -> None:
        self._status.pages = pages
        self._status.truncated = truncated
        self._status.saw(degraded)
        self._writer.finish(self._status)

    def abort(self) -> None:
        """Close without writing another byte (the export failed)."""
        self._sink.discard()
        with contextlib.suppress(Exception):
            self._writer.finish(self._status)


async def export_to(
    run: Run,
    request: SearchRequest,
    *,
    format: ExportFormat | str = "arrow",
    sink: Sink,
    max_rows: int = DEFAULT_MAX_ROWS,
    progress: Progress | None = None,
) -> ExportReport:
    """Export every match of `request` (up to `max_rows`) to `sink`, a page at a time.

    A path is written through a temporary file beside it, renamed into place once complete:
    a failed export leaves no file. A binary file is written as it goes and left open.

    Raises:
        InvalidRequestError: a bad format or `max_rows` (or what `run` refuses).
    """
    kind = check_export(format, max_rows)
    status = ExportStatus()
    with opened_sink(sink) as (file, path):
        async for _ in _export(run, request, kind, CountedSink(file), max_rows, status, progress):
            pass
    return _report(kind, request, status, path)


@contextlib.contextmanager
def opened_sink(sink: Sink) -> Generator[tuple[BinaryIO, str | None]]:
    """The file to write an export to, and its path (None: a file the caller gave).

    A path is written as `<path>.part` and renamed into place only when the block ends
    without an error; the partial file is removed either way.
    """
    if not isinstance(sink, str | os.PathLike):
        yield sink, None
        return
    target = Path(sink)
    partial = target.with_name(target.name + ".part")
    try:
        with partial.open("wb") as file:
            yield file, str(target)
        partial.replace(target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()


def _report(
    kind: ExportFormat, request: SearchRequest, status: ExportStatus, path: str | None
) -> ExportReport:
    return ExportReport(
        format=kind,
        rows=status.rows,
        truncated=status.truncated,
        pages=status.pages,
        ranked=request.query is not None,
        path=path,
        degraded=tuple(status.degraded.values()),
    )


async def export_stream(
    run: Run,
    request: SearchRequest,
    *,
    format: ExportFormat,
    max_rows: int,
) -> AsyncGenerator[bytes]:
    """The export's bytes, one chunk per page (for a streamed HTTP body).

    The first chunk comes once the first page is answered: a bad request raises there,
    before any byte is sent.
    """
    spool = CountedSink()
    status = ExportStatus()
    async for _ in _export(run, request, format, spool, max_rows, status):
        yield spool.drain()


__all__ = [
    "DEFAULT_MAX_ROWS",
    "EXTENSIONS",
    "FORMATS",
    "MAX_ROWS",
    "MEDIA_TYPES",
    "PAGE_ROWS",
    "RANKED_POOL",
    "ExportFormat",
    "ExportReport",
    "ExportRequest",
    "Page",
    "Progress",
    "Sink",
    "check_export",
    "export_stream",
    "export_to",
    "first_request",
    "open_writer",
    "opened_sink",
]
