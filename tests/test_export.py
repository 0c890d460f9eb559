"""Export: every match of a search, streamed to Arrow, Parquet or CSV a page at a time.

The reference is what the caller could read page by page with cursors (and the one deep
query those pages make up); an export must equal it in every format, stop at `max_rows` and
say so, write each page before it asks for the next, and never hold an element or context
node the caller may not see. Then every surface: HTTP (streamed, clearance decided as for
/v1/search, 422 problem documents), the remote client (a round trip on both profiles), the
CLI and the agent tools (which write only into a configured folder) and MCP.
"""

from __future__ import annotations

import io
import itertools
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from http_fixtures import INTERNAL_CORE, Keys, Service, serve
from pydantic import ValidationError
from test_paging import (
    CLEARANCES,
    ELEMENTS,
    RELATIONS,
    ProfileFactory,
    make_profile,
    reference,
    servers,
    visible,
)

import uda
from ontology import result_schema
from uda.agent.data_models import ExportArgs
from uda.agent.data_tools import ExportRefusedError, export_query
from uda.agent.deps import UDADeps
from uda.agent.models import FindArgs, SearchArgs
from uda.agent.state import UnknownQueryError
from uda.agent.tools import find_elements, search
from uda.cli.commands import EXIT_OK, EXIT_USAGE, main
from uda.embedding import Embedder
from uda.errors import ConnectorError, InvalidRequestError, UnknownFilterFieldError
from uda.http import create_app
from uda.http.remote import AsyncRemoteClient
from uda.query.contracts import SearchRequest, search_request
from uda.query.export import MEDIA_TYPES, export_to
from uda.query.export_writers import csv_schema

__all__ = ["make_profile", "servers"]  # the fixtures, shared with test_paging

EVERYONE = ["restricted", "project:*"]
FORMATS = ["arrow", "parquet", "csv"]
BY_ID = {e.element_id: e for e in ELEMENTS}
STRUCTURED: dict[str, Any] = {"order_by": "-timestamp", "expand_depth": 2}
RANKED: dict[str, Any] = {"pool_size": 30, "expand_depth": 2}
NEWEST_FIRST = reference(EVERYONE, key=lambda e: e.timestamp, descending=True)


def read_back(fmt: str, data: bytes) -> pa.Table:
    """An export's bytes as a table (CSV: in its flattened schema)."""
    if fmt == "arrow":
        return pa.ipc.open_stream(data).read_all()
    if fmt == "parquet":
        return pq.read_table(io.BytesIO(data))
    options = pa_csv.ConvertOptions(column_types=csv_schema(), strings_can_be_null=True)
    return pa_csv.read_csv(io.BytesIO(data), convert_options=options)


def context_ids(fmt: str, table: pa.Table) -> list[list[str]]:
    """Each row's context node ids."""
    if fmt == "csv":
        return [
            [n["element_id"] for n in json.loads(v)] for v in table["context_nodes"].to_pylist()
        ]
    return [[n["element_id"] for n in nodes] for nodes in table["context_nodes"].to_pylist()]


def every_page(client: Any, page: int, query: str | None, **request: Any) -> list[pa.Table]:
    """The caller's own walk: every page's table, following the cursors."""
    tables: list[pa.Table] = []
    cursor: str | None = None
    while True:
        response = client.search(query, limit=page, cursor=cursor, **request)
        tables.append(response.to_arrow())
        cursor = response.next_cursor
        if cursor is None:
            return tables
        assert len(tables) < 100, "the cursors never end"


def assert_same_rows(fmt: str, got: pa.Table, expected: pa.Table) -> None:
    """The export holds exactly the expected rows, in order, whole (CSV: as flattened)."""
    assert got.column("element_id").to_pylist() == expected.column("element_id").to_pylist()
    if fmt != "csv":
        assert got.schema.equals(result_schema())
        assert got.equals(expected)
        return
    # The flattened columns and their types (a CSV reader cannot know which were non-null).
    assert [(f.name, f.type) for f in got.schema] == [(f.name, f.type) for f in csv_schema()]
    expected_rows = expected.to_pylist()
    for row, want in zip(got.to_pylist(), expected_rows, strict=True):
        assert row["name"] == want["name"]
        assert row["hlc"] == want["hlc"]
        assert row["properties.status"] == want["properties"]["status"]
        assert row["properties.text"] == want["properties"]["text"]
        nodes = json.loads(row["context_nodes"])
        assert [n["element_id"] for n in nodes] == [n["element_id"] for n in want["context_nodes"]]
        assert [n["relation"] for n in nodes] == [n["relation"] for n in want["context_nodes"]]


@pytest.fixture
def store(make_profile: ProfileFactory, embedder: Embedder) -> Any:
    with uda.Client(make_profile("export"), embedder=embedder) as client:
        client.ingest(ELEMENTS, RELATIONS)
        yield client


@pytest.fixture
def local(tmp_path: Path, embedder: Embedder) -> Any:
    """The embedded profile only, for what does not depend on the backends."""
    with uda.connect(path=tmp_path / "local", embedder=embedder) as client:
        client.ingest(ELEMENTS, RELATIONS)
        yield client


# -- what an export holds ---------------------------------------------------------------
def test_export_equals_the_pages_and_the_deep_query(store: uda.Client) -> None:
    """Both profiles, every format, structured and ranked."""
    structured = pa.concat_tables(
        every_page(store, 7, None, clearance_scope=EVERYONE, **STRUCTURED)
    )
    assert structured.column("element_id").to_pylist() == NEWEST_FIRST  # the deep answer
    query = "payment retries"
    ranked_pages = every_page(store, 7, query, clearance_scope=EVERYONE, **RANKED)
    ranked = pa.concat_tables(ranked_pages)
    deep = store.search(query, limit=100, clearance_scope=EVERYONE, **RANKED).to_arrow()
    assert ranked.column("element_id").to_pylist() == deep.column("element_id").to_pylist()
    assert len(ranked_pages) > 2
    for fmt in FORMATS:
        sink = io.BytesIO()
        report = store.export(
            None, EVERYONE, format=fmt, sink=sink, page_size=7, max_rows=1000, **STRUCTURED
        )
        assert (report.rows, report.truncated, report.ranked) == (len(NEWEST_FIRST), False, False)
        assert report.pages == len(NEWEST_FIRST) // 7 + 1
        assert_same_rows(fmt, read_back(fmt, sink.getvalue()), structured)
        sink = io.BytesIO()
        report = store.export(query, EVERYONE, format=fmt, sink=sink, page_size=7, **RANKED)
        assert report.ranked
        assert report.rows == deep.num_rows
        assert_same_rows(fmt, read_back(fmt, sink.getvalue()), ranked)


def test_a_ranked_export_ranks_a_pool_of_a_thousand_unless_told(local: uda.Client) -> None:
    query = "payment retries"
    sink = io.BytesIO()
    report = local.export(query, EVERYONE, sink=sink, page_size=10)
    deep = local.search(query, limit=100, clearance_scope=EVERYONE, pool_size=1000)
    got = read_back("arrow", sink.getvalue()).column("element_id").to_pylist()
    assert got == [r.element_id for r in deep.results]
    assert report.rows == len(got) == len(reference(EVERYONE))  # the pool reaches them all


def test_max_rows_caps_the_export_and_the_report_says_so(local: uda.Client) -> None:
    total = len(NEWEST_FIRST)
    for max_rows, truncated in ((10, True), (total - 1, True), (total, False), (total + 5, False)):
        for fmt in FORMATS:
            sink = io.BytesIO()
            report = local.export(
                None, EVERYONE, format=fmt, sink=sink, page_size=7, max_rows=max_rows, **STRUCTURED
            )
            rows = min(max_rows, total)
            assert (report.rows, report.truncated) == (rows, truncated), (fmt, max_rows)
            table = read_back(fmt, sink.getvalue())
            assert table.column("element_id").to_pylist() == NEWEST_FIRST[:rows]
    # The file says it too (Arrow: the closing batch; Parquet: the footer).
    sink = io.BytesIO()
    local.export(None, EVERYONE, sink=sink, max_rows=10, **STRUCTURED)
    *_, (closing, metadata) = pa.ipc.open_stream(
        sink.getvalue()
    ).iter_batches_with_custom_metadata()
    assert closing.num_rows == 0
    assert metadata[b"uda.export.rows"] == b"10"
    assert metadata[b"uda.export.truncated"] == b"true"
    sink = io.BytesIO()
    local.export(None, EVERYONE, format="parquet", sink=sink, max_rows=total, **STRUCTURED)
    footer = pq.read_metadata(io.BytesIO(sink.getvalue())).metadata
    assert footer[b"uda.export.truncated"] == b"false"
    assert footer[b"uda.export.rows"] == str(total).encode()
    ranked = local.export("payment retries", EVERYONE, sink=io.BytesIO(), max_rows=3)
    assert (ranked.rows, ranked.truncated, ranked.pages) == (3, True, 1)


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


def test_an_export_never_holds_what_the_caller_may_not_see(local: uda.Client) -> None:
    shown: dict[str, set[str]] = {}
    for clearance in CLEARANCES:
        for query, options in ((None, STRUCTURED), ("payment retries", RANKED)):
            for fmt in FORMATS:
                sink = io.BytesIO()
                local.export(query, clearance, format=fmt, sink=sink, **options)
                table = read_back(fmt, sink.getvalue())
                ids = table.column("element_id").to_pylist()
                assert ids, (clearance, query)
                nodes = {n for row in context_ids(fmt, table) for n in row}
                assert all(visible(BY_ID[i], clearance) for i in ids), (clearance, fmt)
                assert all(visible(BY_ID[n], clearance) for n in nodes), (clearance, fmt)
                if query is None:
                    assert ids == reference(clearance, key=lambda e: e.timestamp, descending=True)
                shown.setdefault(",".join(clearance), set()).update(nodes)
    # The confidential repository is context for those who may see it, and only for them.
    assert "repo:ops" in shown["restricted,project:*"]
    assert "repo:ops" not in shown["public"] | shown["internal"]
    assert "repo:pay" in shown["public"]


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


# -- HTTP and the remote client ---------------------------------------------------------
@pytest.fixture
async def service(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Service]:
    async with serve(tmp_path / "uda", embedder, elements=ELEMENTS, relations=RELATIONS) as s:
        yield s


async def local_export(
    client: uda.AsyncClient, fmt: str, clearance: list[str], **body: Any
) -> bytes:
    sink = io.BytesIO()
    await client.export(None, clearance, format=fmt, sink=sink, page_size=9, **body)
    return sink.getvalue()


async def test_http_streams_each_format_with_its_media_type(service: Service) -> None:
    headers = {"X-API-Key": service.keys.admin}
    for fmt in FORMATS:
        response = await service.http.post(
            "/v1/export",
            json={"format": fmt, "limit": 9, "clearance_scope": EVERYONE, **STRUCTURED},
            headers=headers,
        )
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].split(";")[0] == MEDIA_TYPES[fmt]
        assert response.headers["x-uda-clearance"] == "restricted,project:*"
        assert "attachment" in response.headers["content-disposition"]
        expected = await local_export(service.client, fmt, EVERYONE, **STRUCTURED)
        got = read_back(fmt, response.content)
        assert got.equals(read_back(fmt, expected)), fmt
        assert got.column("element_id").to_pylist() == NEWEST_FIRST


async def test_http_decides_the_clearance_as_search_does(service: Service) -> None:
    """The grant applies, a body may narrow it, never widen it; ids equal /v1/search's."""
    for key, asked, applied in (
        (service.keys.public, None, ["public"]),
        (service.keys.public, EVERYONE, ["public"]),  # asking for more gets the grant
        (service.keys.internal, None, INTERNAL_CORE),
        (service.keys.admin, ["internal"], ["internal"]),  # narrowed
    ):
        body: dict[str, Any] = {"format": "arrow", "order_by": "-timestamp", "limit": 100}
        if asked is not None:
            body["clearance_scope"] = asked
        headers = {"X-API-Key": key}
        exported = await service.http.post("/v1/export", json=body, headers=headers)
        search_body = {k: v for k, v in body.items() if k != "format"}
        searched = await service.http.post("/v1/search", json=search_body, headers=headers)
        assert exported.status_code == searched.status_code == 200
        assert exported.headers["x-uda-clearance"] == searched.headers["x-uda-clearance"]
        assert exported.headers["x-uda-clearance"] == ",".join(applied)
        ids = read_back("arrow", exported.content).column("element_id").to_pylist()
        assert ids == [r["element_id"] for r in searched.json()["results"]]
        assert ids == reference(applied, key=lambda e: e.timestamp, descending=True)


async def test_http_refuses_bad_exports_with_problem_documents(service: Service) -> None:
    headers = {"X-API-Key": service.keys.admin}
    for body, field in (
        ({"format": "xlsx", "order_by": "name"}, "format"),
        ({"max_rows": 0, "order_by": "name"}, "max_rows"),
        ({"max_rows": True, "order_by": "name"}, "max_rows"),
        ({"limit": 500, "order_by": "name"}, "limit"),
        ({"order_by": "name", "context_filters": {"stauts": "x"}}, "context_filters.stauts"),
        ({"order_by": "nope"}, "order_by"),
        ({"limit": 5}, "query"),
        ({"order_by": "name", "cursor": "forged.cursor"}, "cursor"),
    ):
        response = await service.http.post("/v1/export", json=body, headers=headers)
        assert response.status_code == 422, (body, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["field"] == field, body
    unauthenticated = await service.http.post("/v1/export", json={"order_by": "name"})
    assert unauthenticated.status_code == 401


async def test_openapi_documents_the_export(service: Service) -> None:
    spec = (await service.http.get("/openapi.json")).json()
    route = spec["paths"]["/v1/export"]["post"]
    assert set(route["responses"]["200"]["content"]) == set(MEDIA_TYPES.values())
    assert route["responses"]["422"]["content"]["application/problem+json"]
    body = spec["components"]["schemas"]["ExportRequest"]["properties"]
    assert {"format", "max_rows", "order_by", "context_filters", "cursor"} <= set(body)
    assert set(body["format"]["enum"]) == set(FORMATS)
    assert body["clearance_scope"]["items"]["pattern"]


async def test_the_remote_client_writes_what_a_local_export_writes(service: Service) -> None:
    transport = httpx.ASGITransport(app=service.app)
    async with AsyncRemoteClient(
        "http://uda.test", api_key=service.keys.admin, transport=transport
    ) as remote:
        for fmt in FORMATS:
            sink = io.BytesIO()
            seen: list[int] = []
            report = await remote.export(
                None,
                EVERYONE,
                format=fmt,
                sink=sink,
                page_size=9,
                max_rows=20,
                progress=seen.append,
                **STRUCTURED,
            )
            local = io.BytesIO()
            expected = await service.client.export(
                None, EVERYONE, format=fmt, sink=local, page_size=9, max_rows=20, **STRUCTURED
            )
            assert report == expected, fmt
            assert (report.rows, report.truncated, report.pages) == (20, True, 3)
            assert read_back(fmt, sink.getvalue()).equals(read_back(fmt, local.getvalue()))
            assert seen
            assert seen[-1] == 20
        with pytest.raises(InvalidRequestError) as unknown:  # the server's 422, as for search
            await remote.export(None, EVERYONE, sink=io.BytesIO(), context_filters={"stauts": 1})
        assert unknown.value.field == "context_filters.stauts"
        with pytest.raises(InvalidRequestError) as bad:
            await remote.export(None, EVERYONE, sink=io.BytesIO(), format="xlsx", order_by="name")
        assert bad.value.field == "format"


async def test_the_remote_client_refuses_a_stream_cut_short(
    service: Service, tmp_path: Path
) -> None:
    full = await service.http.post(
        "/v1/export",
        json={"order_by": "-timestamp", "limit": 7},
        headers={"X-API-Key": service.keys.admin},
    )
    assert full.status_code == 200
    for cut in (len(full.content) // 2, len(full.content) - 9):

        def handler(request: httpx.Request, cut: int = cut) -> httpx.Response:
            return httpx.Response(200, content=full.content[:cut])

        async with AsyncRemoteClient(
            "http://uda.test", api_key="k", transport=httpx.MockTransport(handler)
        ) as remote:
            target = tmp_path / "cut.parquet"
            with pytest.raises(ConnectorError, match="ended before its closing batch"):
                await remote.export(None, format="parquet", sink=target, order_by="-timestamp")
            assert not target.exists()


async def test_the_blocking_remote_client_exports_too(service: Service, tmp_path: Path) -> None:
    """`uda.connect(url)` gives a RemoteClient: its export is the async one's, blocking."""
    import asyncio

    from uda.http.remote import RemoteClient

    body = {"order_by": "-timestamp", "limit": 7, "clearance_scope": EVERYONE}
    served = await service.http.post(
        "/v1/export", json=body, headers={"X-API-Key": service.keys.admin}
    )
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, content=served.content)

    target = tmp_path / "blocking.csv"
    with RemoteClient("http://uda.test", api_key="k", transport=httpx.MockTransport(handler)) as rc:
        report = await asyncio.to_thread(
            rc.export, None, EVERYONE, format="csv", sink=target, page_size=7, order_by="-timestamp"
        )
    assert sent[0]["format"] == "arrow"  # the client always asks for Arrow, and converts
    assert sent[0]["max_rows"] == 10_000
    assert (report.rows, report.truncated, report.format) == (len(NEWEST_FIRST), False, "csv")
    assert read_back("csv", target.read_bytes()).column("element_id").to_pylist() == NEWEST_FIRST


async def test_server_and_embedded_round_trip_over_http(
    make_profile: ProfileFactory, embedder: Embedder, tmp_path: Path
) -> None:
    """POST /v1/export through the remote client equals the local export, on both profiles."""
    keys = Keys()
    async with uda.AsyncClient(make_profile("http"), embedder=embedder) as client:
        await client.ingest(ELEMENTS, RELATIONS)
        app = create_app(client, keys.authenticator())
        async with AsyncRemoteClient(
            "http://uda.test", api_key=keys.admin, transport=httpx.ASGITransport(app=app)
        ) as remote:
            for fmt, query, options in (
                ("parquet", None, STRUCTURED),
                ("csv", "payment retries", RANKED),
            ):
                target = tmp_path / f"remote-{fmt}"
                report = await remote.export(
                    query, EVERYONE, format=fmt, sink=target, page_size=8, **options
                )
                local = io.BytesIO()
                expected = await client.export(
                    query, EVERYONE, format=fmt, sink=local, page_size=8, **options
                )
                assert report.rows == expected.rows > 0
                assert read_back(fmt, target.read_bytes()).equals(read_back(fmt, local.getvalue()))


# -- the command line ---------------------------------------------------------------------
def test_cli_exports_every_format_and_reports_on_stderr(
    tmp_path: Path, embedder: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    del embedder  # loaded once for the session; the CLI reuses it
    store = tmp_path / "store"
    with uda.connect(path=store) as client:
        client.ingest(ELEMENTS, RELATIONS)
        expected = client.search(None, limit=100, clearance_scope=EVERYONE, **STRUCTURED)
    base = ["--path", str(store), "export", "--clearance", "restricted,project:*"]
    for fmt, name in (("parquet", "all.parquet"), ("arrow", "all.arrow"), ("csv", "all.csv")):
        out = tmp_path / name
        # The format comes from the suffix; --order-by and --depth as for search.
        assert main([*base, "--order-by=-timestamp", "--depth", "2", "--output", str(out)]) == 0
        err = capsys.readouterr().err
        assert f"{len(NEWEST_FIRST)} rows written to {out} ({fmt})" in err
        table = read_back(fmt, out.read_bytes())
        assert table.column("element_id").to_pylist() == [r.element_id for r in expected.results]
    capped = tmp_path / "capped.csv"
    assert main([*base, "--order-by=-timestamp", "--max-rows", "5", "--output", str(capped)]) == 0
    assert "stopped at --max-rows 5: more rows match" in capsys.readouterr().err
    assert read_back("csv", capped.read_bytes()).num_rows == 5
    where = tmp_path / "where.arrow"
    tree = json.dumps({"partOf.name": "payments"})
    assert main([*base, "--where", tree, "--format", "arrow", "--output", str(where)]) == EXIT_OK
    got = read_back("arrow", where.read_bytes()).column("element_id").to_pylist()
    assert got == reference(
        EVERYONE, keep=lambda e: e.element_id.startswith("doc:") and int(e.element_id[4:]) % 2 == 0
    )
    assert (
        main([*base, "--order-by", "name", "--max-rows", "2", "--output", "-", "--format", "csv"])
        == 0
    )
    captured = capsys.readouterr()
    assert len(captured.out.strip().splitlines()) == 3  # the header and two rows
    assert "2 rows written to standard output (csv)" in captured.err
    ranked = tmp_path / "ranked.parquet"
    assert main([*base, "payment retries", "--max-rows", "4", "--output", str(ranked)]) == 0
    assert read_back("parquet", ranked.read_bytes()).num_rows == 4
    # Mistakes: exit 2 with one line naming the option, and no file.
    for args, word in (
        (["--order-by", "name", "--output", str(tmp_path / "x.txt")], "--format"),
        (["--where", "{not json", "--output", str(tmp_path / "bad.csv")], "--where"),
        (["--order-by", "nope", "--output", str(tmp_path / "bad.csv")], "order_by"),
        (
            ["--order-by", "name", "--max-rows", "0", "--output", str(tmp_path / "bad.csv")],
            "max_rows",
        ),
    ):
        assert main([*base, *args]) == EXIT_USAGE, args
        assert word in capsys.readouterr().err
    assert not (tmp_path / "bad.csv").exists()
    with pytest.raises(SystemExit) as usage:
        main([*base, "--format", "xlsx", "--output", str(tmp_path / "x.xlsx")])
    assert usage.value.code == EXIT_USAGE
    # The other export, the ontology's JSON Schema, is as it was.
    schema = tmp_path / "schema.json"
    assert main(["--path", str(store), "ontology", "export", "--output", str(schema)]) == EXIT_OK
    assert "Decision" in json.loads(schema.read_text())["$defs"]


# -- agent tools and MCP ------------------------------------------------------------------
@pytest.fixture
async def aclient(tmp_path: Path, embedder: Embedder) -> AsyncIterator[uda.AsyncClient]:
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await client.ingest(ELEMENTS, RELATIONS)
        yield client


async def test_export_query_is_refused_without_an_export_folder(
    aclient: uda.AsyncClient, tmp_path: Path
) -> None:
    deps = UDADeps(client=aclient, clearance_scope=EVERYONE)
    found = await find_elements(deps, FindArgs(order_by="-timestamp"))
    before = set(Path.cwd().iterdir())
    with pytest.raises(ExportRefusedError, match="no export folder") as refused:
        await export_query(deps, ExportArgs(query_id=found.query_id))
    assert refused.value.field == "export_dir"
    assert set(Path.cwd().iterdir()) == before
    missing = UDADeps(client=aclient, clearance_scope=EVERYONE, export_dir=tmp_path / "nowhere")
    missing.conversation.add(deps.conversation.get(found.query_id, deps.clearance))
    with pytest.raises(ExportRefusedError, match="does not exist"):
        await export_query(missing, ExportArgs(query_id=found.query_id))
    assert not (tmp_path / "nowhere").exists()


async def test_export_query_writes_only_new_plain_files_in_the_folder(
    aclient: uda.AsyncClient, tmp_path: Path
) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    deps = UDADeps(client=aclient, clearance_scope=["internal"], export_dir=folder)
    found = await find_elements(deps, FindArgs(order_by="-timestamp", limit=3))
    answer = await export_query(deps, ExportArgs(query_id=found.query_id, file_name="decisions"))
    assert answer.file == "decisions.csv"
    expected = reference(["internal"], key=lambda e: e.timestamp, descending=True)
    assert (answer.rows, answer.truncated) == (len(expected), False)
    table = read_back("csv", (folder / "decisions.csv").read_bytes())
    assert table.column("element_id").to_pylist() == expected  # every page, not the first 3
    # A ranked search exports with the weights it ranked with, up to max_rows.
    ranked = await search(deps, SearchArgs(query="payment retries", limit=3))
    capped = await export_query(
        deps, ExportArgs(query_id=ranked.query_id, format="parquet", max_rows=5)
    )
    assert (capped.rows, capped.truncated) == (5, True)
    assert capped.file.startswith(ranked.query_id)
    assert capped.file.endswith(".parquet")
    exported = pq.read_table(folder / capped.file).column("element_id").to_pylist()
    deep = await aclient.search(
        "payment retries",
        limit=5,
        clearance_scope=["internal"],
        pool_size=1000,
        weights=ranked.weights,
    )
    assert exported == [r.element_id for r in deep.results]
    assert all(visible(BY_ID[i], ["internal"]) for i in exported)
    # Never overwrites, never follows a link planted under the name.
    with pytest.raises(ExportRefusedError, match="exists"):
        await export_query(deps, ExportArgs(query_id=found.query_id, file_name="decisions"))
    outside = tmp_path / "outside.csv"
    outside.write_text("keep me")
    os.symlink(outside, folder / "linked.csv")
    with pytest.raises(ExportRefusedError, match="exists"):
        await export_query(deps, ExportArgs(query_id=found.query_id, file_name="linked"))
    assert outside.read_text() == "keep me"
    # No folders, no dots, no traversal: the model's schema refuses, and so does the tool.
    for bad in ("../escape", "a/b", ".hidden", "x.csv", "a" * 65):
        with pytest.raises(ValidationError):
            ExportArgs(query_id=found.query_id, file_name=bad)
        with pytest.raises(ExportRefusedError):
            await export_query(
                deps,
                ExportArgs.model_construct(
                    query_id=found.query_id, file_name=bad, format="csv", max_rows=10
                ),
            )
    with pytest.raises(ValidationError):
        ExportArgs(max_rows=10_001)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["decisions.csv", capped.file, "linked.csv"]
    )
    # Another caller's searches are not theirs to export.
    other = UDADeps(
        client=aclient,
        clearance_scope=["public"],
        export_dir=folder,
        conversation=deps.conversation,
    )
    with pytest.raises(UnknownQueryError):
        await export_query(other, ExportArgs(query_id=found.query_id))


def test_uda_mcp_takes_an_export_folder(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["mcp", "--help"])
    assert done.value.code == 0
    assert "--export-dir" in capsys.readouterr().out


async def test_export_query_through_mcp(aclient: uda.AsyncClient, tmp_path: Path) -> None:
    from mcp import Client

    from uda.agent import TOOLS, build_mcp_server

    assert "export_query" in {spec.name for spec in TOOLS}
    async with Client(build_mcp_server(aclient, EVERYONE)) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert tools["export_query"].annotations.read_only_hint is True  # it cannot write here
        await session.call_tool("find_elements", {"order_by": "-timestamp"})
        refused = await session.call_tool("export_query", {})
        assert refused.is_error
        assert "no export folder" in " ".join(block.text for block in refused.content)
    folder = tmp_path / "mcp-exports"
    folder.mkdir()
    async with Client(build_mcp_server(aclient, EVERYONE, export_dir=folder)) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert tools["export_query"].annotations.read_only_hint is False
        assert tools["export_query"].annotations.destructive_hint is False
        assert tools["search"].annotations.read_only_hint is True
        assert "file_name" in tools["export_query"].input_schema["properties"]
        await session.call_tool("find_elements", {"order_by": "-timestamp"})
        done = await session.call_tool("export_query", {"format": "arrow", "file_name": "all"})
        assert not done.is_error, done.content
        assert done.structured_content["rows"] == len(NEWEST_FIRST)
        escaped = await session.call_tool("export_query", {"file_name": "../../etc/x"})
        assert escaped.is_error
    assert [p.name for p in folder.iterdir()] == ["all.arrow"]
    table = read_back("arrow", (folder / "all.arrow").read_bytes())
    assert table.column("element_id").to_pylist() == NEWEST_FIRST
