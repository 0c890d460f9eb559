"""Stateless service replicas: two `uda serve` processes on one server profile, as behind a
load balancer, answer alike, see each other's writes, and continue each other's pages.

Nothing a search needs later lives in a service process: saved queries and the secret that
signs cursors are in the system of record (ADR 23, ADR 30), so any replica can answer the
next request of a conversation another one started.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from http_fixtures import INTERNAL_CORE, QUESTION, Keys, corpus
from serve_fixtures import Served, serving

import uda
from uda.embedding import Embedder
from uda.http.wire import API_KEY_HEADER


def _post(served: Served, key: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(
        f"{served.url}{path}", json=body, headers={API_KEY_HEADER: key}, timeout=60
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _get(served: Served, key: str, path: str, **params: Any) -> dict[str, Any]:
    response = httpx.get(
        f"{served.url}{path}", params=params, headers={API_KEY_HEADER: key}, timeout=60
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _ranked(answer: dict[str, Any]) -> list[tuple[str, float]]:
    return [(r["element_id"], r["score"]) for r in answer["results"]]


@pytest.mark.slow
def test_two_service_replicas_answer_alike_and_continue_each_others_pages(
    server_profile_file: Path, embedder: Embedder, tmp_path: Path
) -> None:
    keys = Keys()
    keys_file = tmp_path / "keys.toml"
    keys_file.write_text(keys.toml())
    with uda.connect(server_profile_file, embedder=embedder) as local:
        report = local.ingest(*corpus())
        assert report.hlc is not None
        as_of = report.hlc
        whole = local.search(QUESTION, limit=6, clearance_scope=INTERNAL_CORE, as_of=as_of)
    want = [(r.element_id, r.score) for r in whole.results]
    assert len(want) >= 3

    with (
        serving(server_profile_file, keys_file, tmp_path / "a.log", workers=1) as first,
        serving(server_profile_file, keys_file, tmp_path / "b.log", workers=1) as second,
    ):
        question = {"query": QUESTION, "limit": 6, "as_of": as_of}
        for replica in (first, second):
            assert _ranked(_post(replica, keys.internal, "/v1/search", question)) == want

        # A page begun on one replica is continued on the other, and the saved query is
        # found there too: both come from the system of record, not the process.
        page = _post(first, keys.internal, "/v1/search", {**question, "limit": 1})
        assert _ranked(page) == want[:1]
        assert page["next_cursor"]
        query_id = page["query_id"]
        following = _get(
            second, keys.internal, f"/v1/queries/{query_id}", cursor=page["next_cursor"]
        )
        assert _ranked(following) == want[1:2]
        again = _get(second, keys.internal, f"/v1/queries/{query_id}")
        assert _ranked(again) == want[:1]

        # Another principal cannot read it on either replica (the same 404 as a missing id).
        for replica in (first, second):
            response = httpx.get(
                f"{replica.url}/v1/queries/{query_id}",
                headers={API_KEY_HEADER: keys.public},
                timeout=60,
            )
            assert response.status_code == 404, response.text

        # A write acknowledged by one replica is read by the other's next search.
        note = {
            "element_type": "Document",
            "element_id": "doc:replica-note",
            "name": "Replica note",
            "text": "Zebra crossings are repainted every spring by the works department.",
            "sensitivity": "internal",
        }
        _post(second, keys.writer, "/v1/ingest", {"elements": [note]})
        found = _post(
            first,
            keys.internal,
            "/v1/search",
            {"query": "when are zebra crossings repainted", "limit": 3},
        )
        assert "doc:replica-note" in [r["element_id"] for r in found["results"]]
