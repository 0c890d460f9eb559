"""The HTTP service when a backend fails or a caller errs: health and readiness (a backend
that stops answering), metrics, and problem documents for bad input, oversized bodies, other
mistakes and faults.

Search, ingest and element lookup are in test_http.py, the real `uda serve` in
test_http_serve.py; the corpus, the keys and the served app are tests/http_fixtures.py's.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from http_fixtures import QUESTION, Service, key, serve, service

from connectors.base import VectorCapable
from uda.embedding import Embedder
from uda.errors import ConfigError, PlanError
from uda.http.remote import AsyncRemoteClient

__all__ = ["service"]  # a fixture


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
