"""Saved queries: every search is kept under its query_id and answered again, as it was, after
a restart and from another client of the same store; over HTTP only to the principal who made
it. Embedded and server profiles for the store; HTTP, the remote client and the CLI on top.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_fixtures import Service, serve
from test_paging import ELEMENTS, RELATIONS, START, ProfileFactory, make_profile, servers

import uda
from ontology import Document
from uda.cli.commands import EXIT_OK, EXIT_USAGE, main
from uda.embedding import Embedder
from uda.errors import InvalidRequestError, QueryNotFoundError
from uda.http.remote import AsyncRemoteClient

__all__ = ["make_profile", "servers"]  # the fixtures, shared with test_paging

EVERYONE = ["restricted", "project:*"]


def ids(response: Any) -> list[str]:
    return [r.element_id for r in response.results]


def test_a_saved_query_answers_again_after_a_restart_and_from_another_client(
    make_profile: ProfileFactory, embedder: Embedder
) -> None:
    profile = make_profile("saved")
    with uda.Client(profile, embedder=embedder) as client:
        client.ingest(ELEMENTS, RELATIONS)
        ranked = client.search("payment retries", limit=4, clearance_scope=EVERYONE)
        listed = client.search(None, limit=4, order_by="-timestamp", clearance_scope=EVERYONE)
        later = client.search(
            "payment retries", limit=4, clearance_scope=EVERYONE, cursor=ranked.next_cursor
        )
        assert ranked.query_id is not None
        assert listed.query_id is not None
        assert ranked.query_id != listed.query_id
        assert later.query_id == ranked.query_id  # a page belongs to its query
        # Written after the first pages: the reruns must not see any of it.
        client.ingest(
            [
                Document(
                    element_id="doc:late",
                    name="Payment retries, late",
                    text="Payment retries written after the query was asked.",
                    sensitivity="public",
                    timestamp=START.replace(year=2030),
                ),
                ELEMENTS[3].model_copy(update={"name": "Renamed later"}),
            ]
        )
    with uda.Client(profile, embedder=embedder) as reopened:
        again = reopened.rerun(ranked.query_id)
        assert ids(again) == ids(ranked)
        assert [r.score for r in again.results] == pytest.approx([r.score for r in ranked.results])
        assert again.query_id == ranked.query_id
        assert "embed" not in again.plan.timings_ms  # the saved embedding is reused
        assert ids(reopened.rerun(ranked.query_id, cursor=again.next_cursor)) == ids(later)
        assert ids(reopened.rerun(listed.query_id)) == ids(listed)
        more = reopened.rerun(listed.query_id, limit=8)
        assert ids(more)[:4] == ids(listed)
        assert "doc:late" not in ids(more)
        with pytest.raises(QueryNotFoundError):
            reopened.rerun("q_not-a-saved-query")
        # A cursor of one saved query is refused by another.
        with pytest.raises(InvalidRequestError):
            reopened.rerun(listed.query_id, cursor=again.next_cursor)


@pytest.fixture
async def service(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Service]:
    async with serve(tmp_path / "uda", embedder, elements=ELEMENTS, relations=RELATIONS) as s:
        yield s


async def test_http_serves_a_saved_query_only_to_its_principal(service: Service) -> None:
    admin = {"X-API-Key": service.keys.admin}
    body = {"query": "payment retries", "limit": 3}
    first = await service.http.post("/v1/search", json=body, headers=admin)
    assert first.status_code == 200, first.text
    saved = first.json()
    query_id = saved["query_id"]
    assert query_id.startswith("q_")
    again = await service.http.get(f"/v1/queries/{query_id}", headers=admin)
    assert again.status_code == 200, again.text
    assert [r["element_id"] for r in again.json()["results"]] == [
        r["element_id"] for r in saved["results"]
    ]
    page = await service.http.get(
        f"/v1/queries/{query_id}", params={"cursor": saved["next_cursor"]}, headers=admin
    )
    assert page.status_code == 200, page.text
    assert {r["element_id"] for r in page.json()["results"]}.isdisjoint(
        r["element_id"] for r in saved["results"]
    )
    for other in (service.keys.public, service.keys.internal, service.keys.writer):
        refused = await service.http.get(f"/v1/queries/{query_id}", headers={"X-API-Key": other})
        missing = await service.http.get("/v1/queries/q_missing", headers={"X-API-Key": other})
        assert refused.status_code == missing.status_code == 404
        assert refused.json()["detail"].replace(query_id, "X") == missing.json()["detail"].replace(
            "q_missing", "X"
        )
    transport = httpx.ASGITransport(app=service.app)
    async with AsyncRemoteClient(
        "http://uda.test", api_key=service.keys.admin, transport=transport
    ) as remote:
        rerun = await remote.rerun(query_id)
        assert [r.element_id for r in rerun.results] == [r["element_id"] for r in saved["results"]]
        assert rerun.query_id == query_id
    async with AsyncRemoteClient(
        "http://uda.test", api_key=service.keys.public, transport=transport
    ) as stranger:
        with pytest.raises(QueryNotFoundError):
            await stranger.rerun(query_id)


def test_cli_prints_the_query_id_and_reruns_it(
    tmp_path: Path, embedder: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    del embedder  # loaded once for the session; the CLI reuses it
    store = tmp_path / "store"
    with uda.connect(path=store) as client:
        client.ingest(ELEMENTS, RELATIONS)
    base = ["--path", str(store)]
    assert main([*base, "search", "payment retries", "--format", "json", "--limit", "3"]) == 0
    first = json.loads(capsys.readouterr().out)
    query_id = first["query_id"]
    assert main([*base, "rerun", query_id, "--format", "json"]) == EXIT_OK
    again = json.loads(capsys.readouterr().out)
    assert again["results"] == first["results"]
    assert main([*base, "rerun", query_id]) == EXIT_OK
    assert f"query_id: {query_id}" in capsys.readouterr().out
    assert main([*base, "rerun", "q_nope"]) == EXIT_USAGE
    assert "query_id" in capsys.readouterr().err
