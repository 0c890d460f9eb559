"""Chaos on real servers under the HTTP service and the CLI: a degraded answer is flagged
(a header, a warning), a missing system of record is a 503 or a clean exit status, and a
write the graph store missed is a 503 that is safe to send again.

The servers and the helpers are tests/chaos_fixtures.py's.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from chaos_fixtures import (
    BOUND_S,
    DEADLINES,
    LATE_NOTE,
    PUBLIC,
    RECOVERY_S,
    Servers,
    cluster,
    paused,
    profile,
    servers,
    visible,
)
from test_filter_trees import corpus

import uda
from uda.config import Profile
from uda.embedding import Embedder
from uda.errors import BackendUnavailableError, StoresBehindError

__all__ = ["profile", "servers"]  # fixtures


async def test_http_flags_a_degraded_answer_and_answers_503_without_the_store(
    profile: Profile,
    servers: Servers,
    embedder: Embedder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import httpx
    from http_fixtures import QUESTION, Keys
    from http_fixtures import corpus as http_corpus

    from uda.http import create_app
    from uda.http.remote import AsyncRemoteClient

    arcade, postmaster = servers.arcade, servers.postmaster()
    assert arcade.pid is not None
    keys = Keys()
    elements, relations = http_corpus()
    async with uda.AsyncClient(profile, embedder=embedder) as client:
        await client.ingest(elements, relations)
        app = create_app(client, keys.authenticator())
        transport = httpx.ASGITransport(app=app)
        admin = {"X-API-Key": keys.admin}
        body = {"query": QUESTION, "limit": 5}
        async with httpx.AsyncClient(transport=transport, base_url="http://uda.test") as http:
            whole = await http.post("/v1/search", json=body, headers=admin)
            assert whole.status_code == 200, whole.text
            assert whole.json()["degraded"] == []
            assert "X-UDA-Degraded" not in whole.headers
            found = whole.json()["results"][0]["element_id"]
            looked_up = await http.get(f"/v1/elements/{found}", headers=admin)
            assert looked_up.status_code == 200, looked_up.text
            assert looked_up.json()["degraded"] == []
            with paused([arcade.pid]):
                started = time.monotonic()
                alone = await http.get(f"/v1/elements/{found}", headers=admin)
                assert time.monotonic() - started < BOUND_S
                assert alone.status_code == 200, alone.text
                assert [d["leg"] for d in alone.json()["degraded"]] == ["graph"]
                assert alone.headers["X-UDA-Degraded"].endswith(":graph")
                assert alone.json()["context_nodes"] == []
                partial = await http.post("/v1/search", json=body, headers=admin)
                assert partial.status_code == 200, partial.text
                assert [d["leg"] for d in partial.json()["degraded"]] == ["graph"]
                assert partial.headers["X-UDA-Degraded"].endswith(":graph")
                async with AsyncRemoteClient(
                    "http://uda.test", api_key=keys.public, transport=transport
                ) as remote:
                    seen = await remote.search(QUESTION, limit=5)
                    assert [d.leg for d in seen.degraded] == ["graph"]
                    assert all(visible(r, PUBLIC) for r in seen.results)
            metrics = (await http.get("/metrics")).text
            assert 'uda_search_degraded_total{backend="' in metrics
            with paused(cluster(postmaster)):
                started = time.monotonic()
                missing = await http.get(f"/v1/elements/{found}", headers=admin)
                assert time.monotonic() - started < BOUND_S
                assert missing.status_code == 503, missing.text
                started = time.monotonic()
                refused = await http.post(
                    "/v1/ingest",
                    json={"elements": [LATE_NOTE.model_dump(mode="json")]},
                    headers=admin,
                )
                assert time.monotonic() - started < BOUND_S
                assert refused.status_code == 503, refused.text
                down = await http.post("/v1/search", json=body, headers=admin)
                assert down.status_code == 503, down.text
                assert down.headers["content-type"].startswith("application/problem+json")
                assert "postgres" in down.json()["detail"]
                assert down.headers["Retry-After"]
                async with AsyncRemoteClient(
                    "http://uda.test", api_key=keys.admin, transport=transport
                ) as remote:
                    with pytest.raises(BackendUnavailableError):
                        await remote.search(QUESTION, limit=5)
            # Resumed: whole answers again within seconds (the breaker probes it again).
            deadline = time.monotonic() + RECOVERY_S
            back = await http.post("/v1/search", json=body, headers=admin)
            while (back.status_code != 200 or back.json()["degraded"]) and (
                time.monotonic() < deadline
            ):
                await asyncio.sleep(0.2)  # the breaker's probe may come first: partial
                back = await http.post("/v1/search", json=body, headers=admin)
            assert back.status_code == 200, back.text
            assert back.json()["degraded"] == []
    # Every failure above was logged in a line that names it, never with a stack, and no
    # task of the client, the service or the remote client was left behind or unread.
    assert not [r.getMessage() for r in caplog.records if r.exc_info], "a traceback was logged"
    unclean = ("Task was destroyed", "Event loop is closed", "never retrieved")
    assert not [r.getMessage() for r in caplog.records if any(u in r.getMessage() for u in unclean)]


def _profile_file(profile: Profile, folder: Path) -> Path:
    """The profile as a TOML file the CLI reads."""
    lines = ["[uda]", f"path = {json.dumps(str(folder / 'data'))}", ""]
    for spec in profile.connectors:
        lines += ["[[connectors]]", f"name = {json.dumps(spec.name)}"]
        lines += [f"{key} = {json.dumps(value)}" for key, value in spec.options.items()]
        lines.append("")
    lines += [
        "[search]",
        f"call_timeout_s = {DEADLINES.call_s}",
        f"search_timeout_s = {DEADLINES.search_s}",
        f"connect_timeout_s = {DEADLINES.connect_s}",
    ]
    file = folder / "chaos.toml"
    file.write_text("\n".join(lines) + "\n")
    return file


def test_the_cli_warns_of_a_degraded_answer_and_fails_cleanly_without_the_store(
    profile: Profile,
    servers: Servers,
    embedder: Embedder,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from uda.cli.commands import EXIT_BACKEND, EXIT_OK, main

    arcade, postmaster = servers.arcade, servers.postmaster()
    assert arcade.pid is not None
    elements, relations = corpus()
    with uda.Client(profile, embedder=embedder) as client:
        client.ingest(elements, relations)
    base = ["--profile", str(_profile_file(profile, tmp_path))]
    search = [*base, "search", "payment retries", "--clearance", "public"]
    with paused([arcade.pid]):
        assert main(search) == EXIT_OK
        out, err = capsys.readouterr()
        assert "payment" in out.lower()  # the answer is printed
        assert "warning: degraded answer:" in err
        assert "(graph)" in err
        assert "Traceback" not in err
        assert main([*search, "--strict"]) == EXIT_BACKEND
        capsys.readouterr()
    with paused(cluster(postmaster)):
        assert main(search) == EXIT_BACKEND
        _, err = capsys.readouterr()
        assert "postgres" in err
        assert "Traceback" not in err
        assert "Event loop is closed" not in err
        assert "Task was destroyed" not in err
    assert main(search) == EXIT_OK
    assert "warning" not in capsys.readouterr().err


async def test_an_http_write_the_graph_store_missed_is_a_503_that_is_safe_to_send_again(
    profile: Profile, servers: Servers, embedder: Embedder
) -> None:
    import httpx
    from http_fixtures import Keys

    from uda.http import create_app
    from uda.http.remote import AsyncRemoteClient

    arcade = servers.arcade
    assert arcade.pid is not None
    keys = Keys()
    body = {
        "elements": [
            {"element_type": "Document", "element_id": "w1", "name": "w", "text": "a note"}
        ]
    }
    async with uda.AsyncClient(profile, embedder=embedder) as client:
        app = create_app(client, keys.authenticator())
        transport = httpx.ASGITransport(app=app)
        admin = {"X-API-Key": keys.admin}
        async with httpx.AsyncClient(transport=transport, base_url="http://uda.test") as http:
            with paused([arcade.pid]):
                behind = await http.post("/v1/ingest", json=body, headers=admin)
                assert behind.status_code == 503, behind.text
                assert behind.json()["type"].endswith("stores-behind")
                assert "arcadedb" in behind.json()["detail"]
                assert behind.headers["Retry-After"]
                async with AsyncRemoteClient(
                    "http://uda.test", api_key=keys.admin, transport=transport
                ) as remote:
                    with pytest.raises(StoresBehindError):
                        await remote.ingest(body["elements"])
            # Back: the same request again completes the write; nothing doubled.
            again = await http.post("/v1/ingest", json=body, headers=admin)
            assert again.status_code == 200, again.text
            assert again.json()["written"] == 0
        assert (await client.check()).clean
