"""ArcadeDB connector and service: an embedded store survives close and reopen, a restarted
server keeps its data, the service's state file is private, and failures are connector errors.

The graph and vector behaviour, and one query per expansion, are in test_arcadedb.py; the
server fixture (one real server for this module) and the seeded data are
tests/arcadedb_fixtures.py's.
"""

from __future__ import annotations

import json
import os
import stat
import uuid
from pathlib import Path

import httpx
import numpy as np
import pytest
from arcadedb_fixtures import DIM, FILTERS, _chunks, _exact, _graph, _same, remote, server

from connectors.arcadedb.connector import ArcadeDBConnector
from uda.errors import ConnectorError
from uda.services.arcadedb import ArcadeDBService
from uda.services.base import ServiceInfo

__all__ = ["server"]  # a fixture


# -- persistence ----------------------------------------------------------------------------
async def test_embedded_store_survives_close_and_reopen(tmp_path: Path) -> None:
    nodes, edges = _graph(seed=19, n_nodes=50, n_edges=150)
    chunks = _chunks(seed=4, n=80)
    first = ArcadeDBConnector(path=tmp_path / "arcadedb")
    await first.connect()
    await first.connect()  # idempotent
    await first.upsert_nodes(nodes)
    await first.upsert_edges(edges)
    await first.upsert_chunks(chunks)
    before = (await first.edge_states(), await first.node_ids(), await first.chunk_states())
    expanded = await first.expand(["n1", "n2"], 2, None, None)
    await first.close()
    await first.close()  # idempotent
    with pytest.raises(ConnectorError, match="not connected"):
        await first.node_ids()

    again = ArcadeDBConnector(path=tmp_path / "arcadedb")
    await again.connect()
    try:
        assert (
            await again.edge_states(),
            await again.node_ids(),
            await again.chunk_states(),
        ) == before
        assert _same(await again.expand(["n1", "n2"], 2, None, None), expanded)
        query = np.ones(DIM)
        hits = await again.vector_search(query.tolist(), 5, FILTERS[2])
        assert [h.chunk_id for h in hits] == [c for c, _ in _exact(chunks, query, 5, FILTERS[2])]
    finally:
        await again.close()


async def test_server_restart_keeps_data(server: tuple[ArcadeDBService, ServiceInfo]) -> None:
    service, info = server
    database = f"t_{uuid.uuid4().hex[:12]}"
    nodes, edges = _graph(seed=23, n_nodes=40, n_edges=100)
    connector = remote(info, database)
    await connector.connect()
    await connector.upsert_nodes(nodes)
    await connector.upsert_edges(edges)
    await connector.upsert_chunks(_chunks(seed=5, n=30))
    before = (
        await connector.edge_states(),
        await connector.node_ids(),
        await connector.chunk_states(),
    )
    await connector.close()

    pid = info.pid
    service.down()
    assert service.status() is None
    # ArcadeDB keeps the root password of its first start: a lost one is named, not waited on.
    saved = service.load_state() or {}
    service.save_state({**saved, "password": "another-password"})
    with pytest.raises(ConnectorError, match="refuses the saved root password"):
        service.up()
    service.save_state(saved)
    restarted = service.up()
    assert restarted.pid != pid
    assert restarted.password == info.password
    assert service.up() == restarted  # idempotent: the running server is reused
    connector = remote(restarted, database)
    await connector.connect()
    try:
        assert (
            await connector.edge_states(),
            await connector.node_ids(),
            await connector.chunk_states(),
        ) == before
    finally:
        await connector.close()


def test_service_state_is_private_and_names_the_process(
    server: tuple[ArcadeDBService, ServiceInfo],
) -> None:
    service, _ = server
    info = service.status()
    assert info is not None
    assert (info.host, info.database) == ("127.0.0.1", "uda")
    saved = json.loads(service.state_file.read_text())
    assert (saved["pid"], saved["port"]) == (info.pid, info.port)
    assert stat.S_IMODE(os.stat(service.state_file).st_mode) == 0o600
    assert len(info.password or "") >= 8
    cmdline = Path(f"/proc/{info.pid}/cmdline").read_bytes()
    assert b"uda.services.arcadedb" in cmdline
    assert (info.password or "").encode() not in cmdline


# -- errors ---------------------------------------------------------------------------------
async def test_failures_are_connector_errors(
    server: tuple[ArcadeDBService, ServiceInfo], tmp_path: Path
) -> None:
    _, info = server
    wrong = ArcadeDBConnector(url=f"http://{info.host}:{info.port}", password="not-the-password")  # noqa: S106
    with pytest.raises(ConnectorError, match="403") as caught:
        await wrong.connect()
    assert isinstance(caught.value.__cause__, httpx.HTTPStatusError)
    assert "not-the-password" not in str(caught.value)

    closed_port = ArcadeDBConnector(url="http://127.0.0.1:9", password="x" * 8)
    with pytest.raises(ConnectorError, match="cannot reach") as caught:
        await closed_port.connect()
    assert isinstance(caught.value.__cause__, httpx.HTTPError)

    embedded = ArcadeDBConnector(path=tmp_path / "arcadedb")
    with pytest.raises(ConnectorError, match="not connected"):
        await embedded.expand(["a"], 1, None, None)
    await embedded.connect()
    try:
        await embedded.upsert_chunks(_chunks(seed=6, n=5))
        with pytest.raises(ConnectorError) as caught:  # a query vector of the wrong size
            await embedded.vector_search([1.0, 2.0, 3.0], 3, FILTERS[2])
        assert caught.value.__cause__ is not None
        assert caught.value.connector == "arcadedb"
    finally:
        await embedded.close()
    with pytest.raises(ValueError, match="either path"):
        ArcadeDBConnector()
