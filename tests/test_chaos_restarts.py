"""Chaos on real servers, killed (SIGKILL) and restarted, or ending their sessions: a dead
graph store degrades searches, a dead system of record fails them fast, and once the server
is back the same client answers whole again with nothing lost.

The servers and the helpers are tests/chaos_fixtures.py's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from chaos_fixtures import (
    BOUND_S,
    EVERYONE,
    LATE_NOTE,
    PUBLIC,
    Servers,
    cluster,
    profile,
    recovered,
    servers,
    visible,
)
from test_filter_trees import corpus

import uda
from uda.config import Profile
from uda.embedding import Embedder
from uda.errors import BackendUnavailableError, StoresBehindError

__all__ = ["profile", "servers"]  # fixtures


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
                assert all(visible(r, clearance) for r in answer.results)
            with pytest.raises(StoresBehindError) as caught:  # an ingest: it stands
                client.ingest([LATE_NOTE], [])
            assert caught.value.report.written == 1
        # Restarted (`up()` returns once it answers): whole again within seconds, no restart
        # of the client; the data written before the crash is all there.
        again = recovered(client)
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
        with killed(cluster(servers.postmaster()), servers.postgres.up):
            for _ in range(4):  # the first calls meet dead connections, the rest the breaker
                started = time.monotonic()
                with pytest.raises(BackendUnavailableError) as caught:
                    client.search("payment retries", limit=5, clearance_scope=EVERYONE)
                assert time.monotonic() - started < BOUND_S
                assert caught.value.connector == "postgres"
            with pytest.raises(BackendUnavailableError):  # and an ingest, clearly
                client.ingest(elements[:1], [])
        # Restarted: the pool's dead connections are replaced, the breaker probes again.
        after = recovered(client)
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
