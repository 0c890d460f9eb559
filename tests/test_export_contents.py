"""Export: what an export holds, in every format.

The reference is what the caller could read page by page with cursors (and the one deep
query those pages make up); an export must equal it in every format, stop at `max_rows` and
say so, and never hold an element or context node the caller may not see. The shared ground
is in export_fixtures.py; writing page by page and to paths in test_export_writing.py; HTTP
and the remote client in test_export_http.py; the CLI in test_export_cli.py; the agent tools
and MCP in test_export_agent.py.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from export_fixtures import (
    BY_ID,
    EVERYONE,
    FORMATS,
    NEWEST_FIRST,
    RANKED,
    STRUCTURED,
    local,
    read_back,
)
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
from uda.embedding import Embedder
from uda.query.export_writers import csv_schema

__all__ = ["local", "make_profile", "servers"]  # the fixtures, shared with test_paging


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
