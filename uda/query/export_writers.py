"""The export's file formats: Arrow IPC, Parquet and CSV writers, one page at a time.

`uda.query.export` walks the pages; the writers here turn each page into bytes in the
result schema (`ontology.result_schema()`), and write the summary an export ends with
(rows, pages, truncated, degraded) where the format can hold it. See `uda.query.export`
for what each format holds.
"""

from __future__ import annotations

import io
import json
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, BinaryIO, Literal, Protocol

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from ontology import result_schema
from ontology.arrow import properties_type
from uda.query.deadlines import Degradation

ExportFormat = Literal["arrow", "parquet", "csv"]

META_ROWS = "uda.export.rows"
META_TRUNCATED = "uda.export.truncated"
META_PAGES = "uda.export.pages"
META_DEGRADED = "uda.export.degraded"

_ARROW: Any = pa  # pyarrow's stubs leave some constructors partly untyped
# The columns CSV cannot hold as they are: JSON text instead.
_JSON_COLUMNS = ("extras", "context_nodes", "truncated")


@dataclass(kw_only=True)
class ExportStatus:
    """What an export has written so far: rows, pages, whether cut short, what degraded."""

    rows: int = 0
    pages: int = 0
    truncated: bool = False
    degraded: dict[tuple[str, str], Degradation] = field(
        default_factory=dict[tuple[str, str], Degradation]
    )

    def saw(self, degraded: Sequence[Degradation]) -> None:
        """Keep each backend and leg a page was answered without (the first reason)."""
        for d in degraded:
            self.degraded.setdefault((d.backend, d.leg), d)


class Writer(Protocol):
    """Writes an export's pages in one format, then its end."""

    def write(self, batch: pa.RecordBatch) -> None: ...

    def finish(self, status: ExportStatus) -> None: ...


def _summary(status: ExportStatus) -> dict[bytes, bytes]:
    summary = {
        META_ROWS.encode(): str(status.rows).encode(),
        META_TRUNCATED.encode(): b"true" if status.truncated else b"false",
        META_PAGES.encode(): str(status.pages).encode(),
    }
    if status.degraded:
        found = [d.to_dict() for d in status.degraded.values()]
        summary[META_DEGRADED.encode()] = json.dumps(found).encode()
    return summary


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The batch in exactly `schema` (a page that crossed a wire may carry other metadata)."""
    page: Any = batch  # pyarrow's stubs leave `columns` partly untyped
    return _ARROW.RecordBatch.from_arrays(page.columns, schema=schema)


class _ArrowWriter:
    def __init__(self, sink: pa.NativeFile) -> None:
        self._schema = result_schema()
        self._writer: Any = pa.ipc.new_stream(sink, self._schema)

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(_conform(batch, self._schema))

    def finish(self, status: ExportStatus) -> None:
        end = _ARROW.RecordBatch.from_pylist([], schema=self._schema)
        self._writer.write_batch(end, custom_metadata=_summary(status))
        self._writer.close()


class _ParquetWriter:
    def __init__(self, sink: pa.NativeFile) -> None:
        self._schema = result_schema()
        self._writer: Any = pq.ParquetWriter(typing.cast("Any", sink), self._schema)

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(_conform(batch, self._schema))

    def finish(self, status: ExportStatus) -> None:
        self._writer.add_key_value_metadata(_summary(status))
        self._writer.close()


def csv_schema() -> pa.Schema:
    """The CSV export's columns: the result schema, flattened (see the module docstring)."""
    fields: list[Any] = []
    struct: Any = properties_type()
    for column in _result_columns():
        if column.name == "properties":
            fields += [pa.field(f"properties.{sub.name}", sub.type) for sub in struct]
        elif column.name in _JSON_COLUMNS or pa.types.is_dictionary(column.type):
            fields.append(pa.field(column.name, pa.string(), nullable=column.nullable))
        else:
            fields.append(column)
    return pa.schema(fields)


def _result_columns() -> list[Any]:
    schema: Any = result_schema()
    return list(schema)


def _json_default(value: object) -> str:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _plain(value: Any) -> Any:
    """A context node or extras value as JSON-ready data: maps as objects, no null fields."""
    if isinstance(value, dict):
        mapping = typing.cast("dict[str, Any]", value)
        return {k: _plain(v) for k, v in mapping.items() if v is not None}
    if isinstance(value, list):
        items = typing.cast("list[Any]", value)
        if items and all(isinstance(i, tuple) for i in items):
            pairs = typing.cast("list[tuple[str, Any]]", items)
            return {str(k): _plain(v) for k, v in pairs}  # a map<string, string>
        return [_plain(i) for i in items]
    return value


def _json_text(value: Any, empty: str) -> str:
    plain = _plain(value)
    if isinstance(plain, list | dict) and not plain:
        return empty
    return json.dumps(plain, ensure_ascii=False, separators=(",", ":"), default=_json_default)


def csv_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """One page in `csv_schema()`."""
    schema = csv_schema()
    page: Any = batch  # pyarrow's stubs leave `column` partly untyped
    columns: list[Any] = []
    for column in _result_columns():
        values: Any = page.column(column.name)
        if column.name == "properties":
            columns += values.flatten()  # the parent's nulls applied to each field
        elif column.name in _JSON_COLUMNS:
            empty = "[]" if column.name == "context_nodes" else "{}"
            texts = [None if v is None else _json_text(v, empty) for v in values.to_pylist()]
            columns.append(pa.array(texts, pa.string()))
        elif pa.types.is_dictionary(column.type):
            columns.append(values.cast(pa.string()))
        else:
            columns.append(values)
    return _ARROW.RecordBatch.from_arrays(columns, schema=schema)


class _CsvWriter:
    def __init__(self, sink: pa.NativeFile) -> None:
        self._writer: Any = pa_csv.CSVWriter(typing.cast("Any", sink), csv_schema())

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(csv_batch(batch))

    def finish(self, status: ExportStatus) -> None:
        del status
        self._writer.close()


WRITERS: dict[ExportFormat, Callable[[pa.NativeFile], Writer]] = {
    "arrow": _ArrowWriter,
    "parquet": _ParquetWriter,
    "csv": _CsvWriter,
}


class CountedSink(io.RawIOBase):
    """A write-only file over `sink` whose position is the bytes written.

    Writers ask where they are (Parquet records offsets); a pipe, a socket or a spool that is
    drained between pages cannot say, so this counts instead.
    """

    def __init__(self, sink: BinaryIO | None = None) -> None:
        super().__init__()
        self._sink = sink
        self._chunks: list[bytes] = []
        self._written = 0
        self._discarding = False

    def writable(self) -> bool:
        """Always: this file is written, never read."""
        return True

    def write(self, data: Any) -> int:
        """Pass `data` on (or keep it, for a spool) and count it."""
        chunk = bytes(data)
        if self._discarding:
            pass
        elif self._sink is None:
            self._chunks.append(chunk)
        else:
            self._sink.write(chunk)
        self._written += len(chunk)
        return len(chunk)

    def discard(self) -> None:
        """Drop everything written from now on (an export that failed)."""
        self._discarding = True
        self._chunks.clear()

    def tell(self) -> int:
        """The bytes written so far."""
        return self._written

    def flush(self) -> None:
        """Flush the sink, if there is one."""
        if self._sink is not None:
            self._sink.flush()

    def drain(self) -> bytes:
        """What was written since the last drain (a spool: no sink)."""
        data = b"".join(self._chunks)
        self._chunks.clear()
        return data


def native_file(sink: CountedSink) -> pa.NativeFile:
    """The counted sink as the file pyarrow's writers take."""
    return pa.PythonFile(sink, mode="w")


__all__ = ["WRITERS", "CountedSink", "ExportStatus", "csv_batch", "csv_schema", "native_file"]
