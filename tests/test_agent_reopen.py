"""An agent reopens a search saved by another conversation: the same answer, as it was,
narrowed to its own clearance; next_page continues it. Locally, over MCP and through the
HTTP service (where the saved search is the principal's own)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from http_fixtures import Service, serve
from test_paging import ELEMENTS, RELATIONS, START

import uda
from ontology import Document
from uda.agent.deps import UDADeps
from uda.agent.models import FindArgs, NextPageArgs, ReopenArgs, SearchArgs
from uda.agent.tools import find_elements, next_page, reopen_query, search
from uda.embedding import Embedder
from uda.errors import QueryNotFoundError
from uda.http.remote import AsyncRemoteClient
from uda.query.clearance import Clearance

EVERYONE = ["restricted", "project:*"]
BY_ID = {e.element_id: e for e in ELEMENTS}


def hits(answer: object) -> list[str]:
    return [h.element_id for h in answer.hits]  # type: ignore[attr-defined]


def visible_to(entries: list[str], element_id: str) -> bool:
    element = BY_ID[element_id]
    clearance = Clearance.parse(entries)
    return clearance.level.rank >= element.sensitivity.rank and (
        element.scope is None or clearance.all_projects or element.scope in clearance.projects
    )


LATE = Document(
    element_id="doc:late",
    name="Payment retries, late",
    text="Payment retries written after the search was saved.",
    sensitivity="public",
    timestamp=START.replace(year=2030),
)


async def test_another_conversation_reopens_a_saved_search_as_it_was(
    tmp_path: Path, embedder: Embedder
) -> None:
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await client.ingest(ELEMENTS, RELATIONS)
        first = UDADeps(client=client, clearance_scope=EVERYONE)
        listed = await find_elements(first, FindArgs(order_by="-timestamp", limit=4))
        ranked = await search(first, SearchArgs(query="payment retries", limit=4))
        assert listed.saved_id is not None
        assert listed.saved_id.startswith("q_")
        second_page = await next_page(first, NextPageArgs(query_id=listed.query_id))
        await client.ingest([LATE])  # after saving: a reopened search must not see it

        later = UDADeps(client=client, clearance_scope=EVERYONE)  # a new conversation
        reopened = await reopen_query(later, ReopenArgs(saved_id=listed.saved_id))
        assert hits(reopened) == hits(listed)
        assert reopened.saved_id == listed.saved_id
        assert reopened.order_by == "-timestamp"
        assert reopened.strategy == "structured"
        assert "reopened" in reopened.reason
        assert reopened.more
        page = await next_page(later, NextPageArgs(query_id=reopened.query_id))
        assert hits(page) == hits(second_page)
        assert page.page == 2
        again = await reopen_query(later, ReopenArgs(saved_id=ranked.saved_id or ""))
        assert hits(again) == hits(ranked)
        assert again.query == "payment retries"
        assert "doc:late" not in hits(again)

        # A less cleared caller sees only what both clearances allow, never more.
        public = UDADeps(client=client, clearance_scope=["public"])
        narrowed = await reopen_query(public, ReopenArgs(saved_id=listed.saved_id, limit=20))
        assert hits(narrowed)
        assert all(visible_to(["public"], h) for h in hits(narrowed))
        everything = await client.rerun(listed.saved_id, limit=100)
        expected = [
            r.element_id for r in everything.results if visible_to(["public"], r.element_id)
        ]
        assert hits(narrowed) == expected[: len(hits(narrowed))]

        with pytest.raises(QueryNotFoundError):
            await reopen_query(later, ReopenArgs(saved_id="q_not-saved"))


async def test_mcp_offers_reopen_query(tmp_path: Path, embedder: Embedder) -> None:
    from mcp import Client

    from uda.agent import build_mcp_server

    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await client.ingest(ELEMENTS, RELATIONS)
        async with Client(build_mcp_server(client, clearance_scope=EVERYONE)) as session:
            found = await session.call_tool("find_elements", {"order_by": "name", "limit": 3})
            assert not found.is_error, found.content
            saved_id = found.structured_content["saved_id"]
        async with Client(build_mcp_server(client, clearance_scope=EVERYONE)) as session:
            again = await session.call_tool("reopen_query", {"saved_id": saved_id})
            assert not again.is_error, again.content
            assert [h["element_id"] for h in again.structured_content["hits"]] == [
                h["element_id"] for h in found.structured_content["hits"]
            ]
            missing = await session.call_tool("reopen_query", {"saved_id": "q_nope"})
            assert missing.is_error


@pytest.fixture
async def service(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Service]:
    async with serve(tmp_path / "uda", embedder, elements=ELEMENTS, relations=RELATIONS) as s:
        yield s


async def test_http_reopens_a_saved_search_narrowed_by_the_callers_clearance(
    service: Service,
) -> None:
    transport = httpx.ASGITransport(app=service.app)
    async with AsyncRemoteClient(
        "http://uda.test", api_key=service.keys.admin, transport=transport
    ) as remote:
        agent = UDADeps(client=remote, clearance_scope=EVERYONE)
        listed = await find_elements(agent, FindArgs(order_by="-timestamp", limit=20))
        assert listed.saved_id is not None
        public = UDADeps(client=remote, clearance_scope=["public"])
        narrowed = await reopen_query(public, ReopenArgs(saved_id=listed.saved_id))
        assert hits(narrowed)
        assert all(visible_to(["public"], h) for h in hits(narrowed))
        # The query parameter itself: narrows, never widens; a bad entry is a 422 naming it.
        admin = {"X-API-Key": service.keys.admin}
        path = f"/v1/queries/{listed.saved_id}"
        wide = await service.http.get(
            path, params={"clearance_scope": ["restricted", "project:*"]}, headers=admin
        )
        assert wide.status_code == 200, wide.text
        assert [r["element_id"] for r in wide.json()["results"]] == hits(listed)
        bad = await service.http.get(
            path, params={"clearance_scope": ["top-secret"]}, headers=admin
        )
        assert bad.status_code == 422
        assert "top-secret" in bad.text
