"""Schemathesis against the service's own OpenAPI document, in process over ASGI.

Every operation gets generated requests (valid and invalid); none may answer 5xx, and every
answer must match the document: status codes, content types, headers and bodies (problem
documents for errors). Bounded and derandomized, so that it is the same run every time.

The schema is loaded eagerly (Schemathesis's lazy fixture loader does not run on this pytest).
The app owns its client: Schemathesis runs the app, and its lifespan that opens the stores,
on an event loop of its own, at the first request — after the fixture below has written the
corpus.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from http_fixtures import Keys, corpus
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig
from schemathesis.python import asgi

import uda
from uda.embedding import Embedder
from uda.http import create_app

KEYS = Keys()
STORE = Path(tempfile.gettempdir()) / f"uda-fuzz-{uuid.uuid4().hex}"  # created by the fixture
APP = create_app(uda.aconnect(path=STORE), KEYS.authenticator(), owns_client=True)
CONFIG = SchemathesisConfig.from_dict(
    {
        "checks": {
            # A body over the server's limit is refused before it is read, with 413; that is a
            # rejection too (Schemathesis builds such bodies to violate `maxItems`).
            "negative_data_rejection": {
                "expected-statuses": [400, 401, 403, 404, 405, 406, 413, 415, 422]
            },
            # A schema-valid request can still be wrong: a filter on a field no element type
            # has, an element that fails its class's validation. Those are 422s by design (the
            # ontology is richer than the OpenAPI document), so this check does not apply.
            "positive_data_acceptance": {"enabled": False},
        }
    }
)
schema = schemathesis.openapi.from_dict(APP.openapi(), config=CONFIG)
schema.app = APP


@pytest.fixture(scope="module", autouse=True)
def stored_corpus(embedder: Embedder) -> Iterator[None]:
    with uda.connect(path=STORE, embedder=embedder) as client:
        client.ingest(*corpus())
    yield
    asgi.shutdown_lifespans()  # close the app's stores now, not at interpreter exit
    shutil.rmtree(STORE, ignore_errors=True)


@schema.parametrize()
@settings(
    max_examples=30,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_and_never_fails(case: schemathesis.Case) -> None:
    case.call_and_validate(headers={"X-API-Key": KEYS.admin})


def test_the_fuzzer_reached_every_operation_without_a_5xx() -> None:
    """The run above did run: every route was called, many times, and none answered 5xx."""
    samples = re.findall(
        r'uda_http_requests_total\{method="(\w+)",route="([^"]+)",status="(\d+)"\} (\d+)',
        APP.state.metrics.render(),
    )
    if not samples:
        pytest.skip("run together with test_api_conforms_and_never_fails")
    calls: dict[str, int] = {}
    for method, route, status, count in samples:
        assert not status.startswith("5"), (method, route, status)
        calls[f"{method} {route}"] = calls.get(f"{method} {route}", 0) + int(count)
    paths = APP.openapi()["paths"]
    for path, operations in paths.items():
        for method, operation in operations.items():
            name = f"{method.upper()} {path}".replace(":path}", "}")
            # An operation without inputs is called once per phase; the others many times.
            wanted = 10 if operation.get("parameters") or operation.get("requestBody") else 1
            assert calls.get(name, 0) >= wanted, (name, calls)
    assert "QUERY /v1/search" not in calls  # unknown methods share one label: "OTHER"
