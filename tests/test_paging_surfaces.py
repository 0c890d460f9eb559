"""Structured retrieval and cursors on every surface: HTTP (JSON and Arrow), the remote client,
the CLI, the agent tools and MCP. The semantics are tested in test_paging.py; here each
surface must carry the same pages and refuse the same cursors as the Python API.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from http_fixtures import Service, serve
from test_paging import ELEMENTS, RELATIONS, reference

import uda
from uda.agent.deps import UDADeps
from uda.agent.models import FindArgs, NextPageArgs, RefineArgs
from uda.agent.state import UnknownQueryError
from uda.agent.tools import find_elements, next_page, refine_search
from uda.cli.commands import EXIT_OK, EXIT_USAGE, main
from uda.embedding import Embedder
from uda.errors import InvalidRequestError
from uda.http.remote import AsyncRemoteClient
from uda.http.wire import ARROW_STREAM, read_stream

EVERYONE = ["restricted", "project:*"]
NEWEST_FIRST = reference(EVERYONE, key=lambda e: e.timestamp, descending=True)


@pytest.fixture
async def service(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Service]:
    async with serve(tmp_path / "uda", embedder, elements=ELEMENTS, relations=RELATIONS) as s:
        yield s


async def test_http_pages_with_cursors_in_json_and_arrow(service: Service) -> None:
    headers = {"X-API-Key": service.keys.admin}
    body: dict[str, Any] = {"order_by": "-timestamp", "limit": 7, "clearance_scope": EVERYONE}
    seen: list[str] = []
    cursor: str | None = None
    arrow = False
    while True:
        sent = {**body, **({"cursor": cursor} if cursor else {})}
        if arrow:
            response = await service.http.post(
                "/v1/search", json=sent, headers={**headers, "Accept": ARROW_STREAM}
            )
            assert response.status_code == 200, response.text
            table, extra = read_stream(response.content)
            seen += [row["element_id"] for row in table.to_pylist()]
            cursor = extra.get("next_cursor")
        else:
            response = await service.http.post("/v1/search", json=sent, headers=headers)
            assert response.status_code == 200, response.text
            data = response.json()
            seen += [r["element_id"] for r in data["results"]]
            cursor = data["next_cursor"]
        arrow = not arrow  # the formats take turns: one cursor serves both
        if cursor is None:
            break
    assert seen == NEWEST_FIRST


async def test_http_refuses_a_cursor_of_another_principal(service: Service) -> None:
    body: dict[str, Any] = {"order_by": "name", "limit": 3}
    first = await service.http.post(
        "/v1/search", json=body, headers={"X-API-Key": service.keys.admin}
    )
    cursor = first.json()["next_cursor"]
    assert cursor
    # Same request, another principal: its grant is narrower, so its clearance differs.
    other = await service.http.post(
        "/v1/search", json={**body, "cursor": cursor}, headers={"X-API-Key": service.keys.public}
    )
    assert other.status_code == 422
    assert other.headers["content-type"] == "application/problem+json"
    assert other.json()["field"] == "cursor"
    tampered = await service.http.post(
        "/v1/search",
        json={**body, "cursor": cursor[:-3] + "AAA"},
        headers={"X-API-Key": service.keys.admin},
    )
    assert tampered.status_code == 422
    assert tampered.json()["field"] == "cursor"
    no_query = await service.http.post(
        "/v1/search", json={"limit": 3}, headers={"X-API-Key": service.keys.admin}
    )
    assert no_query.status_code == 422
    assert no_query.json()["field"] == "query"


async def test_openapi_documents_the_paging_fields(service: Service) -> None:
    spec = (await service.http.get("/openapi.json")).json()
    request = spec["components"]["schemas"]["SearchRequest"]["properties"]
    assert {"cursor", "order_by"} <= set(request)
    assert "next_cursor" in spec["components"]["schemas"]["SearchOut"]["properties"]


async def test_remote_client_pages_like_the_local_one(service: Service) -> None:
    transport = httpx.ASGITransport(app=service.app)
    async with AsyncRemoteClient(
        "http://uda.test", api_key=service.keys.admin, transport=transport
    ) as remote:
        seen: list[str] = []
        cursor: str | None = None
        while True:
            page = await remote.search(
                None, limit=5, order_by="-timestamp", clearance_scope=EVERYONE, cursor=cursor
            )
            local = await service.client.search(
                None, limit=5, order_by="-timestamp", clearance_scope=EVERYONE, cursor=cursor
            )
            assert page.to_arrow().equals(local.to_arrow())
            seen += [r.element_id for r in page.results]
            cursor = page.next_cursor
            assert (cursor is None) == (local.next_cursor is None)
            if cursor is None:
                break
        assert seen == NEWEST_FIRST
        with pytest.raises(InvalidRequestError):
            await remote.search(None, limit=5, order_by="name", cursor="forged.cursor")


def test_cli_pages_and_follows_every_cursor(
    tmp_path: Path, embedder: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    del embedder  # loaded once for the session; the CLI reuses it
    store = tmp_path / "store"
    with uda.connect(path=store) as client:
        client.ingest(ELEMENTS, RELATIONS)
    args = ["--path", str(store), "search", "--order-by=-timestamp", "--clearance"]
    assert main([*args, "restricted,project:*", "--limit", "4", "--format", "json"]) == EXIT_OK
    first = json.loads(capsys.readouterr().out)
    assert [r["element_id"] for r in first["results"]] == NEWEST_FIRST[:4]
    cursor = first["next_cursor"]
    assert cursor
    assert (
        main(
            [*args, "restricted,project:*", "--limit", "4", "--cursor", cursor, "--format", "json"]
        )
        == EXIT_OK
    )
    second = json.loads(capsys.readouterr().out)
    assert [r["element_id"] for r in second["results"]] == NEWEST_FIRST[4:8]
    assert main([*args, "restricted,project:*", "--limit", "4", "--all", "--format", "json"]) == 0
    everything = json.loads(capsys.readouterr().out)
    assert [r["element_id"] for r in everything["results"]] == NEWEST_FIRST
    assert everything["next_cursor"] is None
    out = tmp_path / "all.arrow"
    assert (
        main([*args, "restricted,project:*", "--all", "--format", "arrow", "--output", str(out)])
        == EXIT_OK
    )
    table = pa.ipc.open_stream(out.read_bytes()).read_all()
    assert table.column("element_id").to_pylist() == NEWEST_FIRST
    assert main([*args, "restricted,project:*", "--limit", "3"]) == EXIT_OK
    text = capsys.readouterr().out
    assert "more: add --cursor" in text
    # Another clearance with the same cursor: refused, exit 2, naming the cursor.
    assert main([*args, "public", "--limit", "4", "--cursor", cursor]) == EXIT_USAGE
    assert "cursor" in capsys.readouterr().err
    assert main(["--path", str(store), "search"]) == EXIT_USAGE
    assert "query" in capsys.readouterr().err


async def test_agent_finds_elements_and_pages(tmp_path: Path, embedder: Embedder) -> None:
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await client.ingest(ELEMENTS, RELATIONS)
        deps = UDADeps(client=client, clearance_scope=EVERYONE)
        answer = await find_elements(deps, FindArgs(order_by="-timestamp", limit=10))
        assert answer.strategy == "structured"
        assert answer.query is None
        assert answer.more
        assert answer.page == 1
        assert "next_page" in (answer.note or "")
        seen = [h.element_id for h in answer.hits]
        while answer.more:
            answer = await next_page(deps, NextPageArgs(query_id=answer.query_id))
            seen += [h.element_id for h in answer.hits]
        assert seen == NEWEST_FIRST
        assert answer.page == len(NEWEST_FIRST) // 10 + 1
        with pytest.raises(UnknownQueryError):
            await next_page(deps, NextPageArgs(query_id=answer.query_id))
        with pytest.raises(InvalidRequestError):
            await find_elements(deps, FindArgs())
        # A query turns a listing into a ranked search of the same filters.
        listed = await find_elements(deps, FindArgs(where={"partOf.name": "payments"}))
        ranked = await refine_search(deps, RefineArgs(query="payment retries"))
        assert ranked.refined_from == listed.query_id
        assert ranked.strategy == "default"
        assert ranked.order_by is None
        assert ranked.where == {"partOf.name": "payments"}


async def test_mcp_finds_elements_and_pages(tmp_path: Path, embedder: Embedder) -> None:
    from mcp import Client

    from uda.agent import build_mcp_server

    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await client.ingest(ELEMENTS, RELATIONS)
        server = build_mcp_server(client, clearance_scope=EVERYONE)
        async with Client(server) as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert {"find_elements", "next_page"} <= names
            found = await session.call_tool("find_elements", {"order_by": "-timestamp"})
            assert not found.is_error, found.content
            seen = [hit["element_id"] for hit in found.structured_content["hits"]]
            answer = found.structured_content
            while answer["more"]:
                page = await session.call_tool("next_page", {"query_id": answer["query_id"]})
                assert not page.is_error, page.content
                answer = page.structured_content
                seen += [hit["element_id"] for hit in answer["hits"]]
            assert seen == NEWEST_FIRST
            last = await session.call_tool("next_page", {})
            assert last.is_error
            assert "last page" in " ".join(block.text for block in last.content)
