"""The HTTP service on real embedded backends: endpoints, JSON vs Arrow, the Python client,
ingest, element lookup, readiness, metrics, problem documents, and `uda serve` for real.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from http_fixtures import INTERNAL_CORE, QUESTION, Keys, Service, corpus, serve

import uda
from connectors.base import VectorCapable
from ontology import Decision, Document, Person, Repository, result_schema
from uda.cli.commands import main as serve_main
from uda.embedding import Embedder
from uda.errors import ConfigError, InvalidRequestError, PlanError
from uda.http.errors import AuthenticationError, PermissionDeniedError
from uda.http.remote import AsyncRemoteClient, RemoteSearchResponse
from uda.http.wire import ARROW_STREAM, read_stream

ARROW = {"Accept": ARROW_STREAM}


@pytest.fixture
async def service(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Service]:
    async with serve(tmp_path / "uda", embedder) as running:
        yield running


def key(service: Service, who: str = "internal") -> dict[str, str]:
    return {"X-API-Key": getattr(service.keys, who)}


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
    assert set(data["results"][0]["legs"]) == {"semantic", "lexical", "centrality"}
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


# -- health, readiness, metrics ----------------------------------------------------------------


async def test_health_and_readiness(service: Service) -> None:
    assert (await service.http.get("/healthz")).json() == {"status": "ok"}
    ready = await service.http.get("/readyz")
    assert ready.status_code == 200, ready.text
    backends = ready.json()["backends"]
    assert {b["name"] for b in backends} == {"sqlite", "chroma", "networkx"}
    assert all(b["ok"] for b in backends)
    # A backend that stops answering makes the service unready, and says which.
    vector = next(c for c in service.client.connectors if isinstance(c, VectorCapable))
    await vector.close()  # type: ignore[attr-defined]
    down = await service.http.get("/readyz")
    assert down.status_code == 503
    status = {b["name"]: b for b in down.json()["backends"]}
    assert status["chroma"]["ok"] is False
    assert status["chroma"]["error"] == "ConnectorError"
    assert status["sqlite"]["ok"]
    assert status["networkx"]["ok"]
    # ... and a search that has no other leg (the lexical leg is off) fails as 503, naming
    # the backend but not its internal error (ADR 26).
    body = {"query": "q", "weights": {"lexical": 0}}
    failed = await service.http.post("/v1/search", json=body, headers=key(service))
    assert failed.status_code == 503
    problem = failed.json()
    assert problem["request_id"] == failed.headers["x-request-id"]
    assert problem["type"].endswith("backend-unavailable")
    assert "chroma" in problem["detail"]
    assert "connected" not in failed.text
    # With the lexical leg on, the answer comes without the vector store, flagged.
    partial = await service.http.post("/v1/search", json={"query": "q"}, headers=key(service))
    assert partial.status_code == 200, partial.text
    assert [d["backend"] for d in partial.json()["degraded"]] == ["chroma"]
    assert partial.headers["X-UDA-Degraded"] == "chroma:semantic"


_SAMPLE = re.compile(r"^([a-z_]+)(\{.*\})? (\S+)$")


def _samples(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        match = _SAMPLE.match(line)
        assert match, f"not exposition format: {line!r}"
        out[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return out


async def test_metrics_count_requests_and_search_phases(service: Service) -> None:
    for _ in range(3):
        await service.http.post("/v1/search", json={"query": QUESTION}, headers=key(service))
    await service.http.post("/v1/search", json={"query": ""}, headers=key(service))
    await service.http.get("/v1/elements/doc:nowhere", headers=key(service))
    response = await service.http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = _samples(response.text)
    search = 'route="/v1/search"'
    assert samples[f'uda_http_requests_total{{method="POST",{search},status="200"}}'] == 3
    assert samples[f'uda_http_requests_total{{method="POST",{search},status="422"}}'] == 1
    element = 'route="/v1/elements/{element_id}"'
    assert samples[f'uda_http_requests_total{{method="GET",{element},status="404"}}'] == 1
    assert "doc:nowhere" not in response.text  # routes are templates, never ids
    latency = f'uda_http_request_duration_seconds_count{{method="POST",{search}}}'
    assert samples[latency] == 4
    for phase in ("embed", "phase1", "phase2", "phase3", "total"):
        label = f'phase="{phase}"'
        count = samples[f"uda_search_phase_duration_seconds_count{{{label}}}"]
        assert count == 3
        inf = samples[f'uda_search_phase_duration_seconds_bucket{{{label},le="+Inf"}}']
        assert inf == count
        buckets = [
            v
            for k, v in samples.items()
            if k.startswith("uda_search_phase_duration_seconds_bucket") and label in k
        ]
        assert buckets == sorted(buckets)  # cumulative


# -- problems ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "status", "field"),
    [
        (b'{"query": "q", "limit": 0}', 422, "limit"),
        (b'{"query": "q", "limit": 101}', 422, "limit"),
        (b'{"query": "q", "limit": true}', 422, "limit"),
        (b'{"query": "q", "limit": "5"}', 422, "limit"),
        (b'{"query": "q", "limit": 5.0}', 422, "limit"),
        (b'{"query": "   "}', 422, "query"),
        (b'{"query": "' + b"x" * 4001 + b'"}', 422, "query"),
        (b'{"limit": 3}', 422, "query"),
        (b'{"query": "q", "expand_depth": 3}', 422, "expand_depth"),
        (b'{"query": "q", "colour": "red"}', 422, "colour"),
        (b'{"query": "q", "clearance_scope": ["top-secret"]}', 422, "clearance_scope"),
        (b'{"query": "q", "context_filters": {"colour": "red"}}', 422, "context_filters.colour"),
        (b'{"query": "q", "element_types": ["Person"]}', 422, "element_types"),
        (b'{"query": "q", "weights": {"semantic": -1}}', 422, "weights"),
        (b'{"query": "q", "weights": {"semantic": NaN}}', 400, "body"),
        (b'{"query": "q", "half_life": 1e999}', 400, "body"),
        (b'{"query": "q",}', 400, "body"),
        (b'["query"]', 422, "body"),
        (b"\xff\xfe", 400, "body"),
        (b'{"query": "q", "as_of": "9999-12-31T23:59:59Z"}', 422, "as_of"),
        (b'{"query": "q", "as_of": "1969-12-31T23:59:59Z"}', 422, "as_of"),
        (b'{"query": "q", "as_of": 99999999999999999999}', 400, "body"),
        (
            b'{"query": "q", "context_filters": {"confidence": {"$gt": 1' + b"0" * 30 + b"}}}",
            400,
            "body",
        ),
        (b'{"query": "\\ud800"}', 400, "body"),
    ],
)
async def test_bad_search_input_is_a_problem_naming_the_field(
    service: Service, content: bytes, status: int, field: str
) -> None:
    headers = {**key(service), "Content-Type": "application/json"}
    response = await service.http.post("/v1/search", content=content, headers=headers)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == status
    assert problem["field"] == field
    assert problem["request_id"] == response.headers["x-request-id"]
    assert problem["type"].startswith("urn:uda:problem:")


async def test_body_size_is_bounded_before_parsing(tmp_path: Path, embedder: Embedder) -> None:
    async with serve(tmp_path / "uda", embedder, max_body_bytes=200) as small:
        headers = {**key(small), "Content-Type": "application/json"}
        big = b'{"query": "' + b"x" * 300 + b'"}'
        declared = await small.http.post("/v1/search", content=big, headers=headers)
        assert declared.status_code == 413
        assert declared.json()["field"] == "body"

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
            yield b'{"query": "'
            for _ in range(50):
                yield b"x" * 10
            yield b'"}'

        streamed = await small.http.post("/v1/search", content=chunks(), headers=headers)
        assert streamed.status_code == 413
        assert "content-length" not in streamed.request.headers
        ok = await small.http.post("/v1/search", json={"query": "retry"}, headers=key(small))
        assert ok.status_code == 200


async def test_other_mistakes_are_problems_too(service: Service) -> None:
    text = await service.http.post(
        "/v1/search", content=b"query", headers={**key(service), "Content-Type": "text/plain"}
    )
    assert text.status_code == 415
    unknown = await service.http.get("/v2/search", headers=key(service))
    assert unknown.status_code == 404
    assert unknown.headers["content-type"] == "application/problem+json"
    method = await service.http.delete("/v1/search", headers=key(service))
    assert method.status_code == 405
    assert method.json()["status"] == 405
    refused = await service.http.post(
        "/v1/search", json={"query": "q"}, headers={**key(service), "Accept": "text/csv"}
    )
    assert refused.status_code == 406
    depth = await service.http.get(
        "/v1/elements/doc:retries", params={"expand_depth": 9}, headers=key(service)
    )
    assert depth.status_code == 422
    assert depth.json()["field"] == "expand_depth"


async def test_a_fault_is_a_generic_500_and_the_details_stay_in_the_log(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    # Two routes that fail the way a broken phase or a bug would (test doubles of a fault,
    # not of a backend): the caller gets the request id, the log gets the rest.
    async def broken_phase() -> None:
        raise PlanError("phase3", "OperationalError: disk I/O error at /var/lib/uda/x.db")

    async def bug() -> None:
        raise RuntimeError("token=hunter2 in /etc/uda/secret")

    service.app.add_api_route("/test/phase", broken_phase)
    service.app.add_api_route("/test/bug", bug)
    for path, secret in (("/test/phase", "/var/lib/uda"), ("/test/bug", "hunter2")):
        response = await service.http.get(path)
        assert response.status_code == 500
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        request_id = response.headers["x-request-id"]
        assert problem["request_id"] == request_id
        assert request_id in problem["detail"]
        assert secret not in response.text
        logged = [r for r in caplog.records if request_id in r.getMessage()]
        assert logged
        assert logged[0].exc_info is not None
        assert secret in str(logged[0].exc_info[1])


async def test_remote_client_reads_the_key_from_the_environment(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UDA_API_KEY", service.keys.public)
    transport = httpx.ASGITransport(app=service.app)
    async with AsyncRemoteClient("http://uda.test", transport=transport) as remote:
        res = await remote.search(QUESTION)
        assert res.clearance["granted"] == ["public"]
    with pytest.raises(ConfigError, match="not both"):
        AsyncRemoteClient("http://uda.test", api_key="a", token="b")  # noqa: S106


# -- the real `uda serve` ----------------------------------------------------------------------


def test_serve_refuses_to_start_without_authentication(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert serve_main(["--path", str(tmp_path), "serve"]) == 2
    assert "no authentication configured" in capsys.readouterr().err
    missing = "UDA_TEST_SECRET_THAT_IS_NOT_SET"
    assert serve_main(["--path", str(tmp_path), "serve", "--token-secret-env", missing]) == 2
    assert missing in capsys.readouterr().err
    (tmp_path / "keys.toml").write_text('[[keys]]\nname = "x"\nsha256 = "abc"\n')
    args = ["--path", str(tmp_path), "serve", "--keys", str(tmp_path / "keys.toml")]
    assert serve_main(args) == 2
    assert "sha256" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_up(url: str, process: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "uda serve exited early"
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"uda serve did not become ready within {seconds} s")


@pytest.mark.slow
def test_uda_serve_answers_like_the_in_process_client(tmp_path: Path, embedder: Embedder) -> None:
    store, keys = tmp_path / "uda", Keys()
    (tmp_path / "keys.toml").write_text(keys.toml())
    questions = [QUESTION, "ledger of attempts", "roadmap for the core project"]
    with uda.connect(path=store, embedder=embedder) as local:
        report = local.ingest(*corpus())
        assert report.hlc is not None
        # A fixed `as_of` makes decay, and so every column, independent of the wall clock.
        expected = [
            local.search(q, limit=5, clearance_scope=INTERNAL_CORE, as_of=report.hlc).to_arrow()
            for q in questions
        ]
    port = _free_port()
    command = [sys.executable, "-m", "uda.cli", "--path", str(store), "serve"]
    command += [
        "--port",
        str(port),
        "--keys",
        str(tmp_path / "keys.toml"),
        "--log-level",
        "info",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)  # noqa: S603
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, process, seconds=120)
        with uda.connect(url, api_key=keys.internal) as remote:
            for question, table in zip(questions, expected, strict=True):
                got = remote.search(
                    question, limit=5, clearance_scope=INTERNAL_CORE, as_of=report.hlc
                )
                assert isinstance(got, RemoteSearchResponse)
                rows, want = got.to_arrow().to_pylist(), table.to_pylist()
                assert [r["element_id"] for r in rows] == [r["element_id"] for r in want]
                assert [r["score"] for r in rows] == [r["score"] for r in want]
                assert got.to_arrow().equals(table)
            assert remote.search(QUESTION, clearance_scope=["restricted"]).clearance["capped"]
        denied = httpx.post(url + "/v1/search", json={"query": "q"}, timeout=10)
        assert denied.status_code == 401
        assert "server" not in denied.headers
    finally:
        process.terminate()
        code = process.wait(timeout=60)
        log.close()
    # uvicorn shuts down gracefully (the lifespan closes the stores), then re-raises SIGTERM.
    output = (tmp_path / "serve.log").read_text()
    assert code in {0, -signal.SIGTERM}, output[-2000:]
    assert "Application shutdown complete" in output, output[-2000:]
    for noise in ("Traceback", "Event loop is closed", "Task was destroyed"):
        assert noise not in output, output[-2000:]


def test_table_equality_is_strict() -> None:
    """`pa.Table.equals` (used above) sees a changed score: the comparisons can fail."""
    table = pa.table({"score": [1.0, 0.5]})
    assert not table.equals(pa.table({"score": [1.0, 0.5000001]}))
