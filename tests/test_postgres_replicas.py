"""Search reads on hot standbys, never staler than the primary (issue 19, read replicas).

A real primary and a real hot standby (`uda.services`); the PostgreSQL connector lists the
standby in `standbys` (connectors/postgres/replicas.py). The standby is held back the ways
an operator would meet it: its replay paused (`pg_wal_replay_pause()`), or its server
stopped.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from postgres_fixtures import DIM, fresh_schema

import uda
from connectors.conformance.data import state
from connectors.contract.errors import ConfigError
from connectors.contract.reads import read_scope
from connectors.contract.system_of_record import WriteBatch
from connectors.postgres import replicas
from connectors.postgres.connector import PostgresConnector
from ontology import Document
from uda.config import ConnectorSpec, Profile
from uda.embedding import Embedder
from uda.http.metrics import Metrics
from uda.services.base import ServiceInfo
from uda.services.postgres import ADMIN_USER, PostgresService, dsn
from uda.services.postgres_standby import PostgresStandby

pytestmark = pytest.mark.slow

RESTRICTED_RANK = 3


@dataclass(frozen=True)
class Pair:
    """A running primary and its standby, with how to reach them."""

    primary: PostgresService
    standby: PostgresStandby
    primary_dsn: str
    standby_dsn: str

    def standby_admin(self) -> str:
        """A superuser's DSN on the standby (pausing replay needs one)."""
        state = self.standby.load_state() or {}
        info = self.standby.status()
        assert info is not None
        password = quote(str(state["admin_password"]), safe="")
        return f"postgresql://{ADMIN_USER}:{password}@{info.host}:{info.port}/{info.database}"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    root = tmp_path_factory.mktemp("replicas")
    primary = PostgresService(root)
    standby = PostgresStandby(primary, 1)
    try:
        primary_info = primary.up()
        standby_info = standby.up()
        yield Pair(primary, standby, dsn(primary_info), dsn(standby_info))
    finally:
        standby.destroy()
        primary.destroy()


@contextmanager
def replay_paused(pair: Pair) -> Iterator[None]:
    """The standby receives WAL but applies none of it until the block ends."""
    with psycopg.connect(pair.standby_admin(), autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
        try:
            yield
        finally:
            conn.execute("SELECT pg_wal_replay_resume()")


def wait_replayed(pair: Pair, seconds: float = 30.0) -> None:
    """Until the standby has replayed everything the primary has written so far."""
    with psycopg.connect(pair.primary_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    deadline = time.monotonic() + seconds
    with psycopg.connect(pair.standby_dsn, autocommit=True) as conn:
        while True:
            done = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", row).fetchone()
            if done == (True,):
                return
            assert time.monotonic() < deadline, "the standby did not catch up"
            time.sleep(0.05)


@pytest.fixture
async def routed(pair: Pair) -> AsyncIterator[PostgresConnector]:
    """A connector on a fresh schema that reads from the standby."""
    connector = PostgresConnector(
        pair.primary_dsn,
        dimension=DIM,
        exact=True,
        schema=fresh_schema(),
        standbys=[pair.standby_dsn],
    )
    await connector.connect()
    try:
        yield connector
    finally:
        await connector.close()


async def test_reads_go_to_the_standby_once_it_has_replayed_the_writes(
    pair: Pair, routed: PostgresConnector
) -> None:
    await routed.commit(WriteBatch(states=[state("doc:a", 1, 100)], hlc=100))
    # Whatever server answers, the write just acknowledged is read.
    assert set(await routed.fetch(["doc:a"], None)) == {"doc:a"}
    wait_replayed(pair)
    before = routed.read_counts()["postgres standby 1"]
    with read_scope() as reads:
        for _ in range(3):
            assert set(await routed.fetch(["doc:a"], None)) == {"doc:a"}
    assert routed.read_counts()["postgres standby 1"] == before + 3
    assert reads.notices == []


async def test_a_clearance_raised_on_the_primary_holds_while_the_standby_lags(
    pair: Pair, routed: PostgresConnector
) -> None:
    await routed.commit(WriteBatch(states=[state("doc:b", 1, 100)], hlc=100))
    wait_replayed(pair)
    with replay_paused(pair):
        raised = state("doc:b", 2, 200, sensitivity_rank=RESTRICTED_RANK)
        await routed.commit(WriteBatch(states=[raised], retire=[("doc:b", 1, 200)], hlc=200))
        primary_reads = routed.read_counts()["primary"]
        with read_scope() as reads:
            heads = await routed.fetch_heads(["doc:b"], None)
        # The standby still holds version 1 (public); the answer is the primary's.
        assert heads["doc:b"].version == 2
        assert heads["doc:b"].sensitivity_rank == RESTRICTED_RANK
        assert routed.read_counts()["primary"] == primary_reads + 1
        assert [n.backend for n in reads.notices] == ["postgres standby 1"]
        assert "behind the primary" in reads.notices[0].reason
    wait_replayed(pair)
    with read_scope() as reads:
        assert (await routed.fetch(["doc:b"], None))["doc:b"].version == 2
    assert reads.notices == []


async def test_one_fence_serves_every_read_of_a_search(
    pair: Pair, routed: PostgresConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    await routed.commit(WriteBatch(states=[state("doc:c", 1, 100)], hlc=100))
    wait_replayed(pair)
    fences = 0
    position = routed._position  # pyright: ignore[reportPrivateUsage]

    async def counted() -> int:
        nonlocal fences
        fences += 1
        return await position()

    monkeypatch.setattr(routed, "_position", counted)
    with read_scope():
        for _ in range(4):
            await routed.fetch(["doc:c"], None)
    assert fences == 1
    # A search begun after that fence was read needs a fence of its own.
    with read_scope():
        await routed.fetch(["doc:c"], None)
    assert fences == 2


async def test_a_stopped_standby_is_passed_over_then_used_again(
    pair: Pair, routed: PostgresConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replicas, "STANDBY_COOL_DOWN_S", 0.5)
    await routed.commit(WriteBatch(states=[state("doc:d", 1, 100)], hlc=100))
    wait_replayed(pair)
    pair.standby.down()
    try:
        with read_scope() as reads:
            assert set(await routed.fetch(["doc:d"], None)) == {"doc:d"}
        assert [n.backend for n in reads.notices] == ["postgres standby 1"]
        assert "unreachable" in reads.notices[0].reason
        # While it cools down it is not tried: nothing to tell.
        with read_scope() as reads:
            assert set(await routed.fetch(["doc:d"], None)) == {"doc:d"}
        assert reads.notices == []
    finally:
        pair.standby.up()
    wait_replayed(pair)
    time.sleep(0.6)
    deadline = time.monotonic() + 20
    before = routed.read_counts()["postgres standby 1"]
    while routed.read_counts()["postgres standby 1"] == before:
        assert time.monotonic() < deadline, "the standby was not used again"
        with read_scope():
            assert set(await routed.fetch(["doc:d"], None)) == {"doc:d"}
        time.sleep(0.1)


def test_standbys_must_be_a_list_of_connection_strings() -> None:
    for bad in ("postgresql://one", [""], [3]):
        with pytest.raises(ConfigError) as raised:
            PostgresConnector("postgresql://primary", standbys=bad)  # pyright: ignore[reportArgumentType]
        assert raised.value.field == "standbys"


def _profile(root: Path, pair: Pair, schema: str) -> Profile:
    return Profile(
        name="server",
        root=root,
        connectors=(
            ConnectorSpec(
                name="postgres",
                options={
                    "dsn": pair.primary_dsn,
                    "schema": schema,
                    "exact": True,
                    "standbys": [pair.standby_dsn],
                },
            ),
            ConnectorSpec(name="networkx", options={"path": str(root / "graph")}),
        ),
    )


def test_a_search_never_shows_what_the_primary_has_hidden(
    pair: Pair, tmp_path: Path, embedder: Embedder
) -> None:
    """The end-to-end guarantee: a reclassification holds on the next search."""
    fields = {
        "element_id": "doc:replicated-note",
        "name": "Harbour dredging schedule",
        "text": "The harbour is dredged every autumn by the port authority.",
    }
    note = Document(**fields, sensitivity="public")
    question = "when is the harbour dredged"
    with uda.Client(_profile(tmp_path, pair, fresh_schema()), embedder=embedder) as client:
        client.ingest([note])
        found = client.search(question, limit=3, clearance_scope=["public"])
        assert "doc:replicated-note" in [r.element_id for r in found.results]
        wait_replayed(pair)
        with replay_paused(pair):
            client.ingest([Document(**{**fields, "sensitivity": "restricted"})])
            hidden = client.search(question, limit=3, clearance_scope=["public"])
            assert "doc:replicated-note" not in [r.element_id for r in hidden.results]
            assert any(
                d.backend == "postgres standby 1" and d.leg == "replica" for d in hidden.degraded
            )
            cleared = client.search(question, limit=3, clearance_scope=["restricted"])
            assert "doc:replicated-note" in [r.element_id for r in cleared.results]
        wait_replayed(pair)
        again = client.search(question, limit=3, clearance_scope=["public"])
        assert "doc:replicated-note" not in [r.element_id for r in again.results]
        assert again.degraded == []
        reads = client.read_counts()["postgres"]
        assert reads["primary"] > 0
        assert reads["postgres standby 1"] > 0  # the last search read there
    exposition = Metrics().render({}, {"postgres": reads})
    assert f'uda_search_reads_total{{backend="postgres",server="primary"}} {reads["primary"]}' in (
        exposition
    )


def test_services_up_with_replicas_writes_a_profile_that_reads_from_them(
    tmp_path: Path,
) -> None:
    from uda.services import manage

    root = tmp_path / "services"
    try:
        infos, standby_infos, profile = manage.up(root, ("postgres",), replicas=1)
        assert list(infos) == ["postgres"]
        assert len(standby_infos) == 1
        loaded = uda.config.load_profile(profile)
        (postgres,) = [c for c in loaded.connectors if c.name == "postgres"]
        # Every node in both lists: the profile holds whichever node is the primary.
        assert postgres.options["standbys"] == [dsn(infos["postgres"]), dsn(standby_infos[0])]
        assert postgres.options["dsn"].endswith("/uda?target_session_attrs=read-write")
        status = manage.status(root)
        assert set(status) == {"postgres", "postgres-standby-1"}
        assert all(isinstance(info, ServiceInfo) for info in status.values())
        # Without --replicas, `up` keeps the standbys it made; 0 stops them.
        _, kept, _ = manage.up(root, ("postgres",))
        assert [i.port for i in kept] == [standby_infos[0].port]
        _, none, profile = manage.up(root, ("postgres",), replicas=0)
        assert none == []
        assert "standbys" not in profile.read_text()
        assert "postgres-standby-1" not in manage.status(root)
    finally:
        manage.down(root, purge=True)
    assert not (root / "postgres-standby-1").exists()
