"""The shared conformance suite (`connectors.conformance`) against every built-in connector.

Each backend is one small class: a factory fixture parametrised with the backend's name (so
`-k chroma-server` selects it) and its known gaps as strict xfails. The Chroma server is a
real `chroma run`, started once per session by `ChromaService` and stopped at the end; each
connector it hands out gets a fresh collection.
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
    """Chroma's `PersistentClient` (HNSW: approximate, so `exact_vectors` stays False)."""

    @pytest.fixture(params=["chroma"])
    def connector_factory(self, tmp_path: Path) -> LocationFactory[Path]:
        return LocationFactory(
            make=lambda folder: ChromaConnector(path=folder), locations=_folders(tmp_path)
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
