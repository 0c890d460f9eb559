"""Export over HTTP and through the remote client.

POST /v1/export streams each format with its media type, decides the clearance as /v1/search
does, and refuses bad requests with 422 problem documents; the remote client (async and
blocking) writes what a local export writes, refuses a stream cut short, and round-trips on
both profiles. The shared ground is in export_fixtures.py; what an export holds in
test_export_contents.py.
"""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from export_fixtures import EVERYONE, FORMATS, NEWEST_FIRST, RANKED, STRUCTURED, read_back
from http_fixtures import INTERNAL_CORE, Keys, Service, serve
from test_paging import (
    ELEMENTS,
    RELATIONS,
    ProfileFactory,
    make_profile,
    reference,
    servers,
)

import uda
from uda.embedding import Embedder
from uda.errors import ConnectorError, InvalidRequestError
from uda.http import create_app
from uda.http.remote import AsyncRemoteClient
from uda.query.export import MEDIA_TYPES

__all__ = ["make_profile", "servers"]  # the fixtures, shared with test_paging


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
