"""A hot standby of a local primary, from the installed packages alone (issue 19's first step).

PostgreSQL's own streaming replication: what the primary commits reaches the standby, which
answers reads and refuses writes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from uda.errors import ConnectorError
from uda.services.postgres import PostgresService, dsn
from uda.services.postgres_standby import PostgresStandby

pytestmark = pytest.mark.slow


@pytest.fixture
def primary(tmp_path: Path) -> Iterator[PostgresService]:
    service = PostgresService(tmp_path)
    try:
        service.up()
        yield service
    finally:
        service.destroy()


def _replayed(standby_dsn: str, lsn: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    with psycopg.connect(standby_dsn, autocommit=True) as conn:
        while True:
            row = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()
            if row is not None and row[0]:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby did not replay {lsn} within {seconds} s")
            time.sleep(0.05)


def test_a_standby_follows_the_primary_answers_reads_and_refuses_writes(
    primary: PostgresService,
) -> None:
    standby = PostgresStandby(primary, 1)
    try:
        info = standby.up()
        primary_info = primary.status()
        assert primary_info is not None
        assert info.port != primary_info.port
        assert standby.status() is not None
        with psycopg.connect(dsn(primary_info), autocommit=True) as conn:
            conn.execute("CREATE TABLE notes (id int PRIMARY KEY, body text)")
            conn.execute("INSERT INTO notes VALUES (1, 'replicated')")
            row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
            assert row is not None
        _replayed(dsn(info), row[0])
        with psycopg.connect(dsn(info), autocommit=True) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
            assert conn.execute("SELECT body FROM notes").fetchall() == [("replicated",)]
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
                conn.execute("INSERT INTO notes VALUES (2, 'refused')")
        # Stopped and started again, it catches up with what it missed.
        standby.down()
        assert standby.status() is None
        with psycopg.connect(dsn(primary_info), autocommit=True) as conn:
            conn.execute("INSERT INTO notes VALUES (3, 'while it was down')")
            row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
            assert row is not None
        info = standby.up()
        _replayed(dsn(info), row[0])
        with psycopg.connect(dsn(info), autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM notes").fetchone() == (2,)
    finally:
        standby.destroy()


def test_a_standby_needs_a_running_primary(tmp_path: Path) -> None:
    primary = PostgresService(tmp_path)
    standby = PostgresStandby(primary, 1)
    with pytest.raises(ConnectorError, match="primary must be running"):
        standby.up()
    with pytest.raises(ValueError, match="index"):
        PostgresStandby(primary, 0)


def test_connection_string_values_are_quoted() -> None:
    from uda.services.postgres_standby import quoted

    assert quoted("plain") == "'plain'"
    assert quoted("it's a\\b c") == "'it\\'s a\\\\b c'"
