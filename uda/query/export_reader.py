"""Receiving an export: an Arrow IPC export stream in, the export file the caller asked for out.

The remote client asks the service for an `arrow` export whatever format it wants, reads the
stream as it arrives and writes each batch with the same writers as a local export, so a
remote export is the same file as a local one and its report is exact: the stream's closing
batch carries the rows, pages and whether `max_rows` cut it short (`uda.query.export`). A
stream without that closing batch was cut short, and is refused rather than taken for a
complete answer.

pyarrow reads a stream from a blocking file, so the bytes cross from the event loop to one
reading thread through a bounded pipe: memory holds at most `PIPE_BYTES` of the stream and
one page, never the export.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from typing import Any, BinaryIO

import pyarrow as pa

from uda.errors import ConnectorError
from uda.query.deadlines import Degradation
from uda.query.explanation import degradations_from
from uda.query.export import ExportReport, Progress, Sink, open_writer, opened_sink
from uda.query.export_writers import (
    META_DEGRADED,
    META_PAGES,
    META_ROWS,
    META_TRUNCATED,
    ExportFormat,
)

PIPE_BYTES = 8 << 20


class _Pipe(io.RawIOBase):
    """Bytes handed from the event loop to a reading thread, at most `limit` of them held.

    `read(n)` returns exactly `n` bytes unless the stream ended first (pyarrow takes a short
    read for the end of the stream).
    """

    def __init__(self, limit: int = PIPE_BYTES) -> None:
        super().__init__()
        self._limit = limit
        self._cond = threading.Condition()
        self._chunks: deque[bytes] = deque()
        self._held = 0
        self._ended = False
        self._abandoned = False

    def feed(self, data: bytes) -> None:
        """Hand over `data`, waiting while the pipe is full (call it from a worker thread)."""
        with self._cond:
            while self._held >= self._limit and not self._abandoned:
                self._cond.wait()
            if not self._abandoned:
                self._chunks.append(data)
                self._held += len(data)
                self._cond.notify_all()

    def end(self) -> None:
        """No more bytes will come."""
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def abandon(self) -> None:
        """The reader is gone: drop what is held, and take nothing more."""
        with self._cond:
            self._abandoned = True
            self._chunks.clear()
            self._held = 0
            self._cond.notify_all()

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        wanted = -1 if size is None else size
        out = bytearray()
        with self._cond:
            while wanted < 0 or len(out) < wanted:
                while not self._chunks and not self._ended:
                    self._cond.wait()
                if not self._chunks:
                    break
                chunk = self._chunks.popleft()
                take = len(chunk) if wanted < 0 else min(len(chunk), wanted - len(out))
                out += chunk[:take]
                if take < len(chunk):
                    self._chunks.appendleft(chunk[take:])
                self._held -= take
                self._cond.notify_all()
        return bytes(out)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _cut_short() -> ConnectorError:
    return ConnectorError(
        "http",
        "the export stream ended before its closing batch: the service failed part way "
        "(its log has the details); what arrived was discarded",
    )


def _batches(pipe: _Pipe) -> Iterator[tuple[pa.RecordBatch, Any]]:
    """The stream's batches with their custom metadata; a broken stream is cut short.

    Only reading is mapped: an error writing the export (a full disk) stays what it is.
    """
    try:
        reader: Any = pa.ipc.open_stream(pa.PythonFile(pipe, mode="r"))
        batches: Iterator[tuple[pa.RecordBatch, Any]] = reader.iter_batches_with_custom_metadata()
        while True:
            try:
                item = next(batches)
            except StopIteration:
                return
            yield item
    except (pa.ArrowInvalid, OSError) as exc:
        raise _cut_short() from exc


def _decode(
    pipe: _Pipe,
    kind: ExportFormat,
    file: BinaryIO,
    progress: Progress | None,
    loop: asyncio.AbstractEventLoop,
) -> tuple[int, int, bool, list[Degradation]]:
    """Read the stream from `pipe` and write it to `file`: rows, pages, truncated, degraded."""
    writer = open_writer(kind, file)
    try:
        batches = _batches(pipe)
        rows = 0
        summary: dict[bytes, bytes] | None = None
        for batch, metadata in batches:
            found = {} if metadata is None else dict(metadata)
            if META_ROWS.encode() in found:
                summary = found
                continue
            writer.write(batch)
            rows += batch.num_rows
            if progress is not None:
                loop.call_soon_threadsafe(progress, rows)
        if summary is None or int(summary[META_ROWS.encode()]) != rows:
            raise _cut_short()
        pages = int(summary.get(META_PAGES.encode(), b"0"))
        truncated = summary.get(META_TRUNCATED.encode()) == b"true"
        raw = summary.get(META_DEGRADED.encode())
        degraded = [] if raw is None else degradations_from(json.loads(raw))
        writer.finish(pages=pages, truncated=truncated, degraded=degraded)
        return rows, pages, truncated, degraded
    except BaseException:
        writer.abort()
        raise
    finally:
        pipe.abandon()


async def receive_export(
    chunks: AsyncIterator[bytes],
    *,
    format: ExportFormat,
    sink: Sink,
    ranked: bool,
    progress: Progress | None = None,
) -> ExportReport:
    """Write the export stream arriving as `chunks` to `sink`, in `format`.

    Raises:
        ConnectorError: the stream was cut short or is not an export stream (a path sink
            is then left untouched).
    """
    loop = asyncio.get_running_loop()
    pipe = _Pipe()
    with opened_sink(sink) as (file, path):
        reading = asyncio.ensure_future(
            asyncio.to_thread(_decode, pipe, format, file, progress, loop)
        )
        try:
            async for chunk in chunks:
                if reading.done():
                    break  # the reader failed: its error says why
                await asyncio.to_thread(pipe.feed, chunk)
        except BaseException:
            pipe.end()
            pipe.abandon()
            await asyncio.wait([reading])
            raise
        pipe.end()
        rows, pages, truncated, degraded = await reading
    return ExportReport(
        format=format,
        rows=rows,
        truncated=truncated,
        pages=pages,
        ranked=ranked,
        path=path,
        degraded=tuple(degraded),
    )


__all__ = ["receive_export"]
