"""Export: how it is written — a page at a time, and to a path whole or not at all.

Each page reaches the sink before the next is asked for (memory holds a page, not the
answer); a path is written whole or not at all, a failure half way leaves no file, and a file
the caller opened stays open. The shared ground is in export_fixtures.py; what an export holds
in test_export_contents.py.
"""

from __future__ import annotations

import io
import itertools
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from export_fixtures import EVERYONE, FORMATS, NEWEST_FIRST, STRUCTURED, local, read_back
from test_paging import ELEMENTS, RELATIONS

import uda
from uda.embedding import Embedder
from uda.errors import ConnectorError, InvalidRequestError, UnknownFilterFieldError
from uda.query.contracts import SearchRequest, search_request
from uda.query.export import export_to

__all__ = ["local"]  # a fixture


class RecordingSink(io.RawIOBase):
    """A binary file that notes, in a shared log, how many bytes each write brought."""

    def __init__(self, log: list[tuple[str, int]]) -> None:
        super().__init__()
        self.log = log
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self.data += bytes(b)
        self.log.append(("write", len(b)))
        return len(b)


@pytest.mark.parametrize("fmt", FORMATS)
async def test_each_page_is_written_before_the_next_is_asked_for(
    tmp_path: Path, embedder: Embedder, fmt: str
) -> None:
    """Memory holds a page, not the answer: the writer has page k before page k+1 is read."""
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await client.ingest(ELEMENTS, RELATIONS)
        log: list[tuple[str, int]] = []
        limits: list[int] = []

        async def run(request: SearchRequest) -> Any:
            log.append(("page", 0))
            limits.append(request.limit)
            response = await client.run(request)
            log.append(("rows", len(response)))
            return response

        request = search_request(None, 5, EVERYONE, {}, **STRUCTURED)
        sink = RecordingSink(log)
        report = await export_to(run, request, format=fmt, sink=sink, max_rows=1000)
    assert report.pages == len(NEWEST_FIRST) // 5 + 1
    assert set(limits) == {5}, "no page asks for more than the page size"
    # Between two page requests, the rows of the first reached the sink.
    requests = [i for i, (kind, _) in enumerate(log) if kind == "page"]
    assert len(requests) == report.pages
    for start, end in itertools.pairwise(requests):
        written = sum(n for kind, n in log[start:end] if kind == "write")
        assert written > 0, (fmt, start, log[start:end])
    table = read_back(fmt, bytes(sink.data))
    assert table.column("element_id").to_pylist() == NEWEST_FIRST
    if fmt == "parquet":
        assert pq.ParquetFile(io.BytesIO(bytes(sink.data))).num_row_groups == report.pages
    if fmt == "arrow":
        batches = list(pa.ipc.open_stream(bytes(sink.data)))
        assert [b.num_rows for b in batches[:-1]] == [5] * (report.pages - 1) + [
            len(NEWEST_FIRST) % 5
        ]


def test_a_path_is_written_whole_or_not_at_all(local: uda.Client, tmp_path: Path) -> None:
    target = tmp_path / "out" / "all.parquet"
    target.parent.mkdir()
    report = local.export(None, EVERYONE, format="parquet", sink=target, **STRUCTURED)
    assert report.path == str(target)
    assert pq.read_table(target).num_rows == report.rows == len(NEWEST_FIRST)
    assert sorted(p.name for p in target.parent.iterdir()) == ["all.parquet"]
    with pytest.raises(UnknownFilterFieldError) as bad:
        local.export(None, EVERYONE, sink=tmp_path / "out" / "bad.arrow", context_filters={"x": 1})
    assert bad.value.field == "context_filters.x"
    assert sorted(p.name for p in target.parent.iterdir()) == ["all.parquet"]
    for wrong, field in (({"format": "xlsx"}, "format"), ({"max_rows": 0}, "max_rows")):
        with pytest.raises(InvalidRequestError) as refused:
            local.export(None, EVERYONE, sink=io.BytesIO(), **STRUCTURED, **wrong)
        assert refused.value.field == field
    # A file the caller opened stays open, and ends with the export.
    with (tmp_path / "own.csv").open("wb") as own:
        local.export(None, EVERYONE, format="csv", sink=own, max_rows=3, **STRUCTURED)
        assert not own.closed
    assert len(pa_csv.read_csv(tmp_path / "own.csv")) == 3


async def test_a_failure_half_way_leaves_no_file(tmp_path: Path, embedder: Embedder) -> None:
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await client.ingest(ELEMENTS, RELATIONS)
        calls = 0

        async def failing(request: SearchRequest) -> Any:
            nonlocal calls
            calls += 1
            if calls == 3:
                raise ConnectorError("test", "the store went away")
            return await client.run(request)

        target = tmp_path / "half.arrow"
        with pytest.raises(ConnectorError):
            await export_to(
                failing, search_request(None, 5, EVERYONE, {}, **STRUCTURED), sink=target
            )
    assert calls == 3
    assert not target.exists()
    assert not target.with_name("half.arrow.part").exists()
