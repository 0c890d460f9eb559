"""Chaos on real servers: ArcadeDB and PostgreSQL paused (SIGSTOP), killed (SIGKILL) and
restarted, or ending their sessions, in the middle of searches, ingests and aggregates.

A paused or dead graph store costs a search at most its deadline and the answer says it was
made without it, with clearance as strict as ever; a paused or dead system of record fails
the search fast with an error naming it. Resumed or restarted, the next searches are whole
again, without restarting the client.

Here: servers paused under the client's searches, ingests, aggregates and exports;
killed and restarted in test_chaos_restarts.py, under the HTTP service and the CLI in
test_chaos_surfaces.py. The servers and the helpers are tests/chaos_fixtures.py's.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from chaos_fixtures import (
    BOUND_S,
    DEADLINES,
    EVERYONE,
    LATE_NOTE,
    PUBLIC,
    RECOVERY_S,
    Servers,
    cluster,
    paused,
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
                assert all(visible(r, clearance) for r in answer.results)
                assert all(not r.context_nodes for r in answer.results)
        # Resumed: whole answers again, within seconds, without a restart.
        again = recovered(client)
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
        with paused(cluster(postmaster)):
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
        after = recovered(client)
        assert [r.element_id for r in after.results] == [r.element_id for r in before.results]
        assert client.ingest([LATE_NOTE], []).written == 1  # the refused write, sent again
        assert client.check().clean


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
        whole = recovered(client)
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
        with paused(cluster(postmaster)):
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
