"""Failover of the replicated PostgreSQL (issue 19): nothing acknowledged is lost.

A real primary and standby from `uda services up --replicas 1` (synchronous replication);
the primary is killed the hard way (`pg_ctl stop -m immediate`: no shutdown checkpoint, as
a crash); a standby is promoted; a connector opened before the failover keeps writing, and
the next `up` brings the old primary back as a standby, rewound with `pg_rewind`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
from postgres_fixtures import DIM, fresh_schema

from connectors.conformance.data import state
from connectors.contract.errors import ConnectorError
from connectors.contract.reads import read_scope
from connectors.contract.system_of_record import WriteBatch
from connectors.postgres.connector import PostgresConnector
from uda.cli.commands import EXIT_USAGE, main
from uda.config import load_profile
from uda.errors import UserError
from uda.services import manage, postgres_failover
from uda.services.postgres import PostgresService

pytestmark = pytest.mark.slow

T = TypeVar("T")


def crash(node: PostgresService) -> None:
    """Stop the server without a shutdown checkpoint, as a crash would."""
    saved = node.load_state()
    assert saved is not None
    node._pg(  # pyright: ignore[reportPrivateUsage]
        node._account(),  # pyright: ignore[reportPrivateUsage]
        [
            str(Path(saved["bin_dir"]) / "pg_ctl"),
            "-D",
            saved["data_dir"],
            "-m",
            "immediate",
            "stop",
        ],
        what="pg_ctl stop",
        data=Path(saved["data_dir"]),
    )


async def eventually(call: Callable[[], Awaitable[T]], seconds: float = 60.0) -> T:
    """`call`'s result once it stops failing (the pool finds the new primary)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await call()
        except ConnectorError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


def _admin_sql(node: PostgresService, statement: str) -> list[Any]:
    saved = node.load_state() or {}
    with psycopg.connect(
        host=saved["host"],
        port=saved["port"],
        user="postgres",
        password=saved["admin_password"],
        dbname="postgres",
        autocommit=True,
    ) as conn:
        return conn.execute(statement.encode()).fetchall()


async def test_failover_loses_nothing_acknowledged_and_the_old_primary_rejoins(
    tmp_path: Path,
) -> None:
    root = tmp_path / "services"
    try:
        infos, standby_infos, profile_file = manage.up(root, ("postgres",), replicas=1)
        primary_info = infos["postgres"]
        assert len(standby_infos) == 1
        first = PostgresService(root)
        # Synchronous: a commit is acknowledged once the standby has it on disk.
        assert _admin_sql(first, "SHOW synchronous_standby_names") == [('ANY 1 ("standby1")',)]
        assert _admin_sql(first, "SELECT sync_state FROM pg_stat_replication") == [("quorum",)]

        options = next(
            c.options for c in load_profile(profile_file).connectors if c.name == "postgres"
        )
        connector = PostgresConnector(
            options["dsn"],
            dimension=DIM,
            exact=True,
            schema=fresh_schema(),
            standbys=options["standbys"],
        )
        await connector.connect()
        try:
            acknowledged = [f"doc:{n}" for n in range(20)]
            for n, element_id in enumerate(acknowledged):
                await connector.commit(
                    WriteBatch(states=[state(element_id, 1, 100 + n)], hlc=100 + n)
                )

            crash(first)
            with pytest.raises(UserError):  # the first primary's folder is no standby
                postgres_failover.promote(root, 0)
            promoted = postgres_failover.promote(root)
            assert promoted.node.home.name == "postgres-standby-1"
            assert promoted.info is not None
            assert promoted.info.port != primary_info.port
            with pytest.raises(UserError, match="is running"):
                postgres_failover.promote(root)

            # The connector opened before the failover writes on: its DSN lists every node
            # and asks for the one that takes writes.
            await eventually(
                lambda: connector.commit(WriteBatch(states=[state("doc:after", 1, 500)], hlc=500))
            )
            found = await eventually(lambda: connector.fetch([*acknowledged, "doc:after"], None))
            assert sorted(found) == sorted([*acknowledged, "doc:after"])

            # The old primary comes back as a standby of the new one (pg_rewind), not as a
            # second primary, and replays what was written without it.
            again, standbys_again, _ = manage.up(root, ("postgres",))
            assert again["postgres"].port == promoted.info.port
            assert [i.port for i in standbys_again] == [primary_info.port]
            assert _admin_sql(first, "SELECT pg_is_in_recovery()") == [(True,)]
            new_primary = promoted.node
            assert _admin_sql(new_primary, "SHOW synchronous_standby_names") == [
                ('ANY 1 ("postgres")',)
            ]
            await eventually(
                lambda: connector.commit(WriteBatch(states=[state("doc:last", 1, 600)], hlc=600))
            )
            deadline = time.monotonic() + 30
            while True:
                with read_scope():
                    read = await connector.fetch(["doc:last"], None)
                assert set(read) == {"doc:last"}
                if connector.read_counts().get("postgres standby 1", 0) > 0:
                    break  # the rejoined former primary (first in the list) served a read
                assert time.monotonic() < deadline, "the rejoined node served no read"
                await asyncio.sleep(0.2)
        finally:
            await connector.close()
    finally:
        manage.down(root, purge=True)


def test_promote_refuses_while_the_primary_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "services"
    try:
        manage.up(root, ("postgres",), replicas=1)
        with pytest.raises(UserError, match="is running"):
            postgres_failover.promote(root)
        assert main(["services", "promote", "--root", str(root)]) == EXIT_USAGE
        err = capsys.readouterr().err
        assert "is running" in err
        assert "Traceback" not in err
    finally:
        manage.down(root, purge=True)
