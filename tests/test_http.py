"""The HTTP service on real embedded backends: search (JSON, Arrow and the Python client
agree), ingest, element lookup and the ontology.

Readiness, metrics and problem documents are in test_http_problems.py, the real `uda serve`
in test_http_serve.py; the corpus, the keys and the served app (`service`, `key`) are
tests/http_fixtures.py's.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from http_fixtures import INTERNAL_CORE, QUESTION, Service, key, service

import uda
from ontology import Decision, Document, Person, Repository, result_schema
from uda.errors import InvalidRequestError
from uda.http.errors import AuthenticationError, PermissionDeniedError
from uda.http.remote import AsyncRemoteClient
from uda.http.wire import ARROW_STREAM, read_stream

__all__ = ["service"]  # a fixture

ARROW = {"Accept": ARROW_STREAM}


def _json_results(local: uda.SearchResponse) -> list[dict[str, Any]]:
    return [r.model_dump(mode="json") for r in local.results]


# -- search: JSON, Arrow, and the local client agree -----------------------------------------


async def test_json_search_equals_the_local_client(service: Service) -> None:
    body = {"query": QUESTION, "limit": 10, "clearance_scope": INTERNAL_CORE}
    response = await service.http.post("/v1/search", json=body, headers=key(service))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    data = response.json()
    local = await service.client.search(QUESTION, limit=10, clearance_scope=INTERNAL_CORE)
    assert data["results"] == _json_results(local)
    ids = [r["element_id"] for r in data["results"]]
    assert {"doc:retries", "doc:ledger", "doc:core-plan"} <= set(ids)
    assert not {"doc:costs", "doc:incident", "doc:other", "adr:retry"} & set(ids)
    # The saved query's id (GET /v1/queries/{id} answers it again), not the request's.
    assert data["query_id"].startswith("q_")
    assert data["query_id"] != response.headers["x-request-id"]
    assert data["plan"]["clearance"] == INTERNAL_CORE
    assert set(data["plan"]["timings_ms"]) >= {"embed", "phase1", "phase2", "phase3", "total"}
    assert data["clearance"] == {
        "granted": INTERNAL_CORE,
        "requested": INTERNAL_CORE,
        "effective": INTERNAL_CORE,
        "narrowed": False,
        "capped": False,
    }
    assert response.headers["x-uda-clearance"] == "internal,project:core"


async def test_arrow_stream_equals_json_and_the_local_table(service: Service) -> None:
    body = {"query": QUESTION, "limit": 10, "clearance_scope": INTERNAL_CORE, "decay": False}
    streamed = await service.http.post("/v1/search", json=body, headers={**key(service), **ARROW})
    as_json = await service.http.post("/v1/search", json=body, headers=key(service))
    assert streamed.status_code == 200, streamed.text
    assert streamed.headers["content-type"] == ARROW_STREAM
    assert "content-length" not in streamed.headers  # streamed, not buffered into one body
    table, extra = read_stream(streamed.content)
    assert table.schema.equals(result_schema(), check_metadata=True)
    local = await service.client.search(
        QUESTION, limit=10, clearance_scope=INTERNAL_CORE, decay=False
    )
    assert table.equals(local.to_arrow())
    rows = table.to_pylist()
    results = as_json.json()["results"]
    assert [r["element_id"] for r in rows] == [r["element_id"] for r in results]
    assert [r["score"] for r in rows] == [r["score"] for r in results]
    assert extra["clearance"]["effective"] == INTERNAL_CORE
    assert extra["query_id"].startswith("q_")
    assert extra["explain"]["results"] == local.explain().to_dict()["results"]


async def test_async_remote_client_behaves_like_the_local_one(service: Service) -> None:
    transport = httpx.ASGITransport(app=service.app)
    async with AsyncRemoteClient(
        "http://uda.test", api_key=service.keys.admin, transport=transport
    ) as remote:
        res = await remote.search(QUESTION, limit=10, clearance_scope=["restricted"], decay=False)
        local = await service.client.search(
            QUESTION, limit=10, clearance_scope=["restricted"], decay=False
        )
        assert len(res) == len(local) > 0
        assert res.to_arrow().equals(local.to_arrow())
        assert [r.model_dump() for r in res.results] == [r.model_dump() for r in local.results]
        assert list(res.to_batches().read_all().to_pylist()) == local.to_arrow().to_pylist()
        doc = next(e for e in res.to_elements() if e.element_id == "doc:retries")
        assert type(doc) is Document
        assert isinstance(doc.repository, Repository)
        assert doc.repository.name == "payments"
        assert [type(d) for d in doc.decisions] == [Decision]
        assert [a.name for a in doc.authors] == ["Ada Lovelace"]
        assert type(doc.authors[0]) is Person
        explained, expected = res.explain(), local.explain()
        assert explained.to_dict()["results"] == expected.to_dict()["results"]
        assert explained.plan.clearance == expected.plan.clearance
        assert explained.plan.decay is False
        assert str(explained).splitlines()[-len(res) :] == str(expected).splitlines()[-len(res) :]
        # The admin key grants restricted and every project; the request narrowed it.
        assert res.clearance["narrowed"] is True
        assert res.clearance["effective"] == ["restricted"]
        assert res.query_id
        # Omitting clearance_scope asks for the whole grant (not `public` as locally).
        everything = await remote.search(QUESTION, limit=20)
        assert "doc:other" in {r.element_id for r in everything.results}
        with pytest.raises(InvalidRequestError, match="limit"):
            await remote.search(QUESTION, limit=0)


async def test_to_pandas_on_a_remote_response(service: Service) -> None:
    pytest.importorskip("pandas")
    transport = httpx.ASGITransport(app=service.app)
    async with AsyncRemoteClient(
        "http://uda.test", api_key=service.keys.internal, transport=transport
    ) as remote:
        frame = (await remote.search(QUESTION)).to_pandas()
        assert list(frame.columns) == result_schema().names


async def test_explain_endpoint(service: Service) -> None:
    body = {"query": QUESTION, "limit": 3}
    response = await service.http.post("/v1/explain", json=body, headers=key(service, "public"))
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["clearance"]["effective"] == ["public"]
    assert data["plan"]["request"]["query"] == QUESTION
    assert [r["element_id"] for r in data["results"]] == ["doc:retries"]
    assert set(data["results"][0]["legs"]) == {"semantic", "lexical", "centrality", "entity"}
    assert "phase 1 dense" in data["text"]
    assert "adr:retry" not in response.text  # the restricted decision, not even in the plan


# -- ingest ------------------------------------------------------------------------------------


def _doc(element_id: str, sensitivity: str = "internal", **extra: Any) -> dict[str, Any]:
    return {
        "element_type": "Document",
        "element_id": element_id,
        "name": f"Document {element_id}",
        "text": "Refunds are issued within five days of a failed payment.",
        "sensitivity": sensitivity,
        **extra,
    }


async def test_ingest_by_a_writer_is_searchable(service: Service) -> None:
    body = {
        "elements": [_doc("doc:refunds")],
        "relations": [["doc:refunds", "partOf", "repo:payments"]],
    }
    response = await service.http.post("/v1/ingest", json=body, headers=key(service, "writer"))
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["written"] == 1
    assert report["edges"] == 1
    again = await service.http.post("/v1/ingest", json=body, headers=key(service, "writer"))
    assert again.json()["unchanged"] == 1
    found = await service.http.post(
        "/v1/search", json={"query": "when are refunds issued?", "limit": 1}, headers=key(service)
    )
    assert found.json()["results"][0]["element_id"] == "doc:refunds"


async def test_remote_ingest_needs_a_writer(service: Service) -> None:
    transport = httpx.ASGITransport(app=service.app)
    element = Document(element_id="doc:typed", name="Typed", text="Typed element over HTTP.")
    async with AsyncRemoteClient(
        "http://uda.test", api_key=service.keys.writer, transport=transport
    ) as writer:
        report = await writer.ingest([element], [("doc:typed", "authoredBy", "person:ada")])
        assert (report.written, report.edges) == (1, 1)
    async with AsyncRemoteClient(
        "http://uda.test", api_key=service.keys.internal, transport=transport
    ) as reader:
        with pytest.raises(PermissionDeniedError, match="may not write"):
            await reader.ingest([element])
    async with AsyncRemoteClient(
        "http://uda.test", api_key="not-a-key", transport=transport
    ) as stranger:
        with pytest.raises(AuthenticationError):
            await stranger.search(QUESTION)


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"elements": [_doc("doc:x", sensitivity="restricted")]}, 403, "elements[0].sensitivity"),
        (
            {"elements": [_doc("doc:ok"), _doc("doc:y", scope="project:other")]},
            403,
            "elements[1].scope",
        ),
        ({"elements": [_doc("doc:incident")]}, 403, "elements[0].element_id"),
        ({"elements": [{"element_type": "Spaceship", "element_id": "s"}]}, 422, None),
        (
            {"elements": [_doc("doc:z")], "relations": [["doc:z", "flies", "repo:payments"]]},
            422,
            None,
        ),
        ({"elements": [], "extra": 1}, 422, "extra"),
        ({"elements": "not a list"}, 422, "elements"),
    ],
    ids=["above-grant", "other-project", "replace-hidden", "type", "relation", "extra", "shape"],
)
async def test_bad_or_forbidden_ingest_writes_nothing(
    service: Service, body: dict[str, Any], status: int, field: str | None
) -> None:
    before = await service.client.stats()
    response = await service.http.post("/v1/ingest", json=body, headers=key(service, "writer"))
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    if field is not None:
        assert response.json()["field"] == field
    assert await service.client.stats() == before


async def test_relation_to_a_hidden_element_reads_as_to_a_missing_one(service: Service) -> None:
    async def link(target: str) -> dict[str, Any]:
        body = {"elements": [_doc("doc:new")], "relations": [["doc:new", "governedBy", target]]}
        response = await service.http.post("/v1/ingest", json=body, headers=key(service, "writer"))
        assert response.status_code == 422, response.text
        problem = response.json()
        problem.pop("request_id")
        return problem

    hidden, missing = await link("adr:retry"), await link("adr:nowhere")
    assert hidden == {**missing, "detail": missing["detail"].replace("adr:nowhere", "adr:retry")}


# -- elements, ontology ------------------------------------------------------------------------


async def test_element_with_context_respects_clearance(service: Service) -> None:
    admin = await service.http.get("/v1/elements/doc:retries", headers=key(service, "admin"))
    public = await service.http.get("/v1/elements/doc:retries", headers=key(service, "public"))
    assert admin.status_code == public.status_code == 200
    seen = {n["element_id"] for n in admin.json()["context_nodes"]}
    assert seen == {"repo:payments", "adr:retry", "person:ada"}
    shown = {n["element_id"] for n in public.json()["context_nodes"]}
    assert shown == {"repo:payments", "person:ada"}
    assert "adr:retry" not in public.text
    assert public.json()["properties"]["text"].startswith("Failed payment calls")
    flat = await service.http.get(
        "/v1/elements/doc:retries", params={"expand_depth": 0}, headers=key(service)
    )
    assert flat.json()["context_nodes"] == []
    # Two hops from the repository reach the other documents; hidden ones never appear.
    deep = await service.http.get(
        "/v1/elements/repo:payments", params={"expand_depth": 2}, headers=key(service)
    )
    ids = {n["element_id"] for n in deep.json()["context_nodes"]}
    assert {"doc:retries", "doc:ledger", "person:ada"} <= ids
    assert not ids & {"doc:incident", "adr:retry", "doc:costs"}


async def test_ontology_is_the_json_schema(service: Service) -> None:
    response = await service.http.get("/v1/ontology", headers=key(service, "public"))
    assert response.status_code == 200
    assert {"Document", "Decision", "Relation"} <= set(response.json()["$defs"])
