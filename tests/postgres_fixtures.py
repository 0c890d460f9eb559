"""A real PostgreSQL for the test modules of the PostgreSQL connector, and helpers on it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from connectors.contract.records import SearchFilter
from connectors.postgres.connector import PostgresConnector
from uda.services.postgres import PostgresService, dsn

DIM = 16  # small vectors keep the synthetic tests fast; the end-to-end test uses 384
PUBLIC = SearchFilter(max_sensitivity_rank=0)


@contextmanager
def running_postgres(folder: Path) -> Iterator[tuple[PostgresService, str]]:
    """A real PostgreSQL in `folder`, always stopped (and its files removed) after."""
    service = PostgresService(folder)
    try:
        info = service.up()
        yield service, dsn(info)
    finally:
        service.destroy()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PostgresService, str]]:
    """One real PostgreSQL per test module."""
    with running_postgres(tmp_path_factory.mktemp("services")) as running:
        yield running


@pytest.fixture
async def pg(server: tuple[PostgresService, str]) -> AsyncIterator[PostgresConnector]:
    """A connector on a fresh schema (exact vector search unless a test asks otherwise)."""
    connector = PostgresConnector(server[1], dimension=DIM, exact=True, schema=fresh_schema())
    await connector.connect()
    yield connector
    await connector.close()


def fresh_schema() -> str:
    """A schema name no other test uses."""
    return f"t_{uuid.uuid4().hex[:12]}"


def run_sql(url: str, schema: str, query: str, params: Any = None) -> list[Any]:
    """Read or damage a store directly, as an operator would."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', %s, false)", (f"{schema}, public",))
        cur = conn.execute(query.encode(), params)
        return cur.fetchall() if cur.description else []
