"""Chaos on real servers: ArcadeDB and PostgreSQL paused (SIGSTOP), killed (SIGKILL) and
restarted, or ending their sessions, in the middle of searches, ingests and aggregates.

A paused or dead graph store costs a search at most its deadline and the answer says it was
made without it, with clearance as strict as ever; a paused or dead system of record fails
the search fast with an error naming it. Resumed or restarted, the next searches are whole
again, without restarting the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from test_filter_trees import corpus

import uda
from ontology import Document
from uda.config import Profile, SearchDefaults
from uda.embedding import Embedder
from uda.errors import BackendUnavailableError, StoresBehindError
from uda.query.deadlines import Deadlines
from uda.services.arcadedb import ArcadeDBService
from uda.services.base import ServiceInfo
from uda.services.postgres import PostgresService

DEADLINES = Deadlines(call_s=0.5, search_s=2.0, connect_s=2.0, write_s=2.0)
BOUND_S = DEADLINES.search_s + 1.5  # and a margin for a loaded machine
RECOVERY_S = 5.0  # the bound: whole answers again within 5 s of the return
PUBLIC = ["public"]
# Written while a backend is away.
LATE_NOTE = Document(element_id="late-note", name="late note", text="written during an outage")
EVERYONE = ["restricted", "project:*"]


@dataclasses.dataclass(frozen=True)
class Servers:
    """The real servers of this module, and how to find their processes."""

    url: str
    postgres: PostgresService
    arcadedb: ArcadeDBService

    @property
    def arcade(self) -> ServiceInfo:
        info = self.arcadedb.status()
        assert info is not None
        assert info.pid is not None
        return info

    def postmaster(self) -> int:
        state = self.postgres.load_state() or {}
        pid_file = Path(state["data_dir"]) / "postmaster.pid"
        return int(pid_file.read_text().split("\n", 1)[0])


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    pytest.importorskip("psycopg")
    pytest.importorskip("arcadedb_embedded")
    from arcadedb_fixtures import running_arcadedb
    from postgres_fixtures import running_postgres

    root = tmp_path_factory.mktemp("chaos")
    with running_postgres(root / "pg") as (pg, url), running_arcadedb(root / "arc") as (arc, _):
        yield Servers(url, pg, arc)


@pytest.fixture
def profile(servers: Servers, tmp_path: Path) -> Profile:
    from arcadedb_fixtures import server_profile

    unique = uuid.uuid4().hex[:10]
    base = server_profile(
        tmp_path,
        servers.url,
        servers.arcade,
        schema=f"s_{unique}",
        database=f"d_{unique}",
        exact=True,
    )
    return dataclasses.replace(base, search=SearchDefaults(deadlines=DEADLINES))


@contextmanager
def paused(pids: list[int]) -> Iterator[None]:
    """The processes stopped (as a hung server is), resumed at the end whatever happens.

    Stopped parent first (it starts no child after), resumed children first: a child that
    had exited just before is reaped by its parent once that runs, and is gone then.
    """
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in reversed(pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def _cluster(postmaster: int) -> list[int]:
    """The postmaster and every process it started (each connection has its own)."""
    children: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == postmaster:
                children.append(int(entry.name))
    return [postmaster, *children]


def _recovered(client: uda.Client) -> Any:
    """The first whole answer once the backend is back (failing after `RECOVERY_S`)."""
    deadline = time.monotonic() + RECOVERY_S
    while True:
        try:
            answer = client.search("payment retries", limit=5, clearance_scope=EVERYONE)
        except BackendUnavailableError:
            if time.monotonic() > deadline:
                raise
        else:
            if not answer.degraded or time.monotonic() > deadline:
                return answer
        time.sleep(0.2)


def _visible(result: object, clearance: list[str]) -> bool:
    from uda.query.clearance import Clearance

    props = result.properties  # type: ignore[attr-defined]
    allowed = Clearance.parse(clearance)
    rank = {"public": 0, "internal": 1, "confidential": 2, "restricted": 3}[props["sensitivity"]]
    scope = props.get("scope")
    return rank <= allowed.level.rank and (
        scope is None or allowed.all_projects or scope in allowed.projects
    )


def test_a_paused_graph_store_degrades_searches_until_it_resumes(
    profile: Profile,
    servers: Servers,
    embedder: Embedder,
) -> None:
    arcade = servers.arcade
    assert arcade.pid is not None
    elements, relations = corpus()
    with uda.Client(profile, embedder=embedder) as client:
        client.ingest(elements, relations)
        whole = client.search("payment retries", limit=5, clearance_scope=EVERYONE)
        assert whole.degraded == []
        assert any(r.context_nodes for r in whole.results)
        with paused([arcade.pid]):
            for clearance in (PUBLIC, EVERYONE):
                started = time.monotonic()
                answer = client.search("payment retries", limit=5, clearance_scope=clearance)
                assert time.monotonic() - started < BOUND_S
                assert [d.leg for d in answer.degraded] == ["graph"]
                assert answer.results
                assert all(_visible(r, clearance) for r in answer.results)
                assert all(not r.context_nodes for r in answer.results)
        # Resumed: whole answers again, within seconds, without a restart.
        again = _recovered(client)
        assert again.degraded == []
        assert [r.element_id for r in again.results] == [r.element_id for r in whole.results]


def test_a_paused_system_of_record_fails_fast_and_recovers(
    profile: Profile,
    servers: Servers,
    embedder: Embedder,
) -> None:
    postmaster = servers.postmaster()
    elements, relations = corpus()
    with uda.Client(profile, embedder=embedder) as client:
        client.ingest(elements, relations)
        before = client.search("payment retries", limit=5, clearance_scope=EVERYONE)
        with paused(_cluster(postmaster)):
            started = time.monotonic()
            with pytest.raises(BackendUnavailableError) as caught:
                client.search("payment retries", limit=5, clearance_scope=EVERYONE)
            assert time.monotonic() - started < BOUND_S
            assert caught.value.connector == "postgres"
            started = time.monotonic()
            with pytest.raises(BackendUnavailableError, match="postgres"):  # nothing written
                client.ingest([LATE_NOTE], [])
            assert time.monotonic() - started < BOUND_S
        # Resumed: the pool serves again, within seconds; the same answer as before.
        after = _recovered(client)
        assert [r.element_id for r in after.results] == [r.element_id for r in before.results]
        assert client.ingest([LATE_NOTE], []).written == 1  # the refused write, sent again
        assert client.check().clean


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
                    assert all(_visible(r, PUBLIC) for r in seen.results)
            metrics = (await http.get("/metrics")).text
            assert 'uda_search_degraded_total{backend="' in metrics
            with paused(_cluster(postmaster)):
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
    with paused(_cluster(postmaster)):
        assert main(search) == EXIT_BACKEND
        _, err = capsys.readouterr()
        assert "postgres" in err
        assert "Traceback" not in err
        assert "Event loop is closed" not in err
        assert "Task was destroyed" not in err
    assert main(search) == EXIT_OK
    assert "warning" not in capsys.readouterr().err


def test_an_ingest_with_the_graph_store_paused_stands_and_sync_completes_it(
    profile: Profile,
    servers: Servers,
    embedder: Embedder,
) -> None:
    arcade = servers.arcade
    assert arcade.pid is not None
    elements, relations = corpus()
    with uda.Client(profile, embedder=embedder) as client:
        with paused([arcade.pid]):
            started = time.monotonic()
            with pytest.raises(StoresBehindError) as caught:
                client.ingest(elements, relations)
            assert time.monotonic() - started < DEADLINES.write_s * 4 + 5
            assert "uda sync" in str(caught.value)
            assert any("arcadedb" in store for store in caught.value.behind)
            assert caught.value.report.written == len(elements)
            # The system of record has it all: searches answer (without graph context).
            answer = client.search("payment retries", limit=5, clearance_scope=EVERYONE)
            assert answer.results
        assert not client.check().clean  # the graph store is behind, and says so
        applied = client.sync()
        assert sum(applied.values()) > 0
        assert client.check().clean
        # Nothing lost, nothing doubled: ingesting again changes nothing.
        again = client.ingest(elements, relations)
        assert again.written == 0
        assert client.check().clean
        whole = _recovered(client)
        assert any(r.context_nodes for r in whole.results)


def test_an_aggregate_without_the_system_of_record_fails_fast(
    profile: Profile,
    servers: Servers,
    embedder: Embedder,
) -> None:
    postmaster = servers.postmaster()
    elements, relations = corpus()
    with uda.Client(profile, embedder=embedder) as client:
        client.ingest(elements, relations)
        counted = client.aggregate(clearance_scope=EVERYONE, group_by=["element_type"])
        with paused(_cluster(postmaster)):
            for group_by in (["element_type"], ["partOf.name"]):  # pushed down, and in Python
                started = time.monotonic()
                with pytest.raises(BackendUnavailableError):
                    client.aggregate(clearance_scope=EVERYONE, group_by=group_by)
                assert time.monotonic() - started < BOUND_S
            started = time.monotonic()  # and the visible values of the filter paths
            with pytest.raises(BackendUnavailableError):
                client.fields("status", EVERYONE)
            assert time.monotonic() - started < BOUND_S
        deadline = time.monotonic() + RECOVERY_S
        while True:  # the breaker-free path: the next call after the return answers
            try:
                again = client.aggregate(clearance_scope=EVERYONE, group_by=["element_type"])
                break
            except BackendUnavailableError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert again.rows == counted.rows


# -- killed and restarted --------------------------------------------------------------
@contextmanager
def killed(pids: list[int], restart: Callable[[], object]) -> Iterator[None]:
    """The processes killed (SIGKILL: a crash, no goodbye), started again at the end."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _gone(pids)
    try:
        yield
    finally:
        restart()


def _gone(pids: list[int], timeout: float = 15.0) -> None:
    """Wait until the processes are gone, reaped too: a server that finds its old pid still
    there (a zombie not yet reaped) refuses to start on the same data."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)  # our child (ArcadeDB's launcher): reap it
            if not (Path("/proc") / str(pid)).exists():
                break
            time.sleep(0.05)


def test_a_killed_graph_store_degrades_searches_until_it_is_restarted(
    profile: Profile, servers: Servers, embedder: Embedder
) -> None:
    elements, relations = corpus()
    with uda.Client(profile, embedder=embedder) as client:
        client.ingest(elements, relations)
        whole = client.search("payment retries", limit=5, clearance_scope=EVERYONE)
        assert any(r.context_nodes for r in whole.results)
        pid = servers.arcade.pid
        assert pid is not None
        with killed([pid], servers.arcadedb.up):
            for clearance in (PUBLIC, EVERYONE, PUBLIC, EVERYONE):  # the breaker opens
                started = time.monotonic()
                answer = client.search("payment retries", limit=5, clearance_scope=clearance)
                assert time.monotonic() - started < BOUND_S
                assert [d.leg for d in answer.degraded] == ["graph"]
                assert answer.results
                assert all(_visible(r, clearance) for r in answer.results)
            with pytest.raises(StoresBehindError) as caught:  # an ingest: it stands
                client.ingest([LATE_NOTE], [])
            assert caught.value.report.written == 1
        # Restarted (`up()` returns once it answers): whole again within seconds, no restart
        # of the client; the data written before the crash is all there.
        again = _recovered(client)
        assert again.degraded == []
        found = [r.element_id for r in again.results if r.element_id != LATE_NOTE.element_id]
        assert found == [r.element_id for r in whole.results][: len(found)]
        client.sync()
        assert client.check().clean


def test_a_killed_system_of_record_fails_fast_and_nothing_is_lost_after_restart(
    profile: Profile, servers: Servers, embedder: Embedder
) -> None:
    elements, relations = corpus()
    with uda.Client(profile, embedder=embedder) as client:
        client.ingest(elements, relations)
        before = client.search("payment retries", limit=5, clearance_scope=EVERYONE)
        with killed(_cluster(servers.postmaster()), servers.postgres.up):
            for _ in range(4):  # the first calls meet dead connections, the rest the breaker
                started = time.monotonic()
                with pytest.raises(BackendUnavailableError) as caught:
                    client.search("payment retries", limit=5, clearance_scope=EVERYONE)
                assert time.monotonic() - started < BOUND_S
                assert caught.value.connector == "postgres"
            with pytest.raises(BackendUnavailableError):  # and an ingest, clearly
                client.ingest(elements[:1], [])
        # Restarted: the pool's dead connections are replaced, the breaker probes again.
        after = _recovered(client)
        assert [r.element_id for r in after.results] == [r.element_id for r in before.results]
        assert client.ingest(elements, relations).written == 0  # everything acknowledged stands
        assert client.check().clean


def test_connections_the_server_drops_cost_a_retry_not_an_error(
    profile: Profile, servers: Servers, embedder: Embedder
) -> None:
    """A server that ends its sessions (a restart, an administrator, a proxy) is retried."""
    import psycopg

    elements, relations = corpus()
    with uda.Client(profile, embedder=embedder) as client:
        client.ingest(elements, relations)
        before = client.search("payment retries", limit=5, clearance_scope=EVERYONE)
        for _ in range(3):
            state = servers.postgres.load_state() or {}
            admin = servers.url.replace(
                f"{state['user']}:{state['password']}",
                f"{state['admin_user']}:{state['admin_password']}",
            )
            with psycopg.connect(admin, autocommit=True) as conn:
                ended = conn.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE usename = %s AND pid <> pg_backend_pid()",
                    (state["user"],),
                ).fetchone()
            assert ended is not None
            assert ended[0] >= 1
            answer = client.search("payment retries", limit=5, clearance_scope=EVERYONE)
            assert answer.degraded == []
            assert [r.element_id for r in answer.results] == [r.element_id for r in before.results]


def test_a_store_down_when_the_client_opens_is_connected_once_it_answers(
    profile: Profile, servers: Servers, embedder: Embedder
) -> None:
    """Searches and writes both reconnect a store that was down at open, without a restart."""
    elements, relations = corpus()
    arcade = servers.arcade
    assert arcade.pid is not None
    with paused([arcade.pid]):
        started = time.monotonic()
        client = uda.Client(profile, embedder=embedder)  # opens: the graph store is left out
        assert time.monotonic() - started < DEADLINES.connect_s + 3
    with client:
        # Back now, but not yet connected: the ingest connects it for its outbox.
        client.ingest(elements, relations)
        assert client.check().clean
        whole = client.search("payment retries", limit=5, clearance_scope=EVERYONE)
        assert whole.degraded == []
        assert any(r.context_nodes for r in whole.results)


def test_an_export_says_which_backend_its_pages_were_answered_without(
    profile: Profile, servers: Servers, embedder: Embedder, tmp_path: Path
) -> None:
    import pyarrow as pa

    from uda.query.export_writers import META_DEGRADED

    elements, relations = corpus()
    arcade = servers.arcade
    assert arcade.pid is not None
    with uda.Client(profile, embedder=embedder) as client:
        client.ingest(elements, relations)
        whole = client.export(None, EVERYONE, sink=tmp_path / "whole.arrow", order_by="-timestamp")
        assert whole.degraded == ()
        with paused([arcade.pid]):
            partial = client.export(
                None, EVERYONE, sink=tmp_path / "partial.arrow", order_by="-timestamp"
            )
        assert [d.leg for d in partial.degraded] == ["graph"]
        assert partial.rows == whole.rows  # the same matches, without their context
        with pa.ipc.open_stream(tmp_path / "partial.arrow") as reader:
            metadata = [b.custom_metadata for b in reader.iter_batches_with_custom_metadata()]
        end = metadata[-1]
        assert end is not None
        assert b"graph" in end[META_DEGRADED.encode()]


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
