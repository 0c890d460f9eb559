"""ArcadeDB connector, embedded (in process) and server (HTTP), against real engines.

The graph side is held to the reference networkx connector on identical inputs; the vector
side to an exact numpy ranking with the filter's reference semantics. One real server,
started through `ArcadeDBService` for the module, serves every server-mode test, each in a
database of its own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import stat
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from arcadedb_fixtures import remote, running_arcadedb

from connectors.arcadedb.connector import ArcadeDBConnector
from connectors.contract.predicates import Op, Predicate
from connectors.contract.records import (
    OPEN,
    ChunkRecord,
    GraphEdge,
    GraphNode,
    SearchFilter,
    Subgraph,
)
from connectors.networkx_graph import NetworkXConnector
from uda.errors import ConnectorError
from uda.services.arcadedb import ArcadeDBService
from uda.services.base import ServiceInfo

HOSTILE = [
    "it's",
    'say "hi"',
    "back`tick`",
    "x'}) DETACH DELETE n //",
    'n0"}) MATCH (m) DETACH DELETE m RETURN 1 //',
    "'; DROP TYPE UdaNode UNSAFE; --",
    "a' OR '1'='1",
    "$ids",
    "$rows",
    "$open",
    ":limit",
    "{eid: 'n1'}",
    "line\nbreak",
    "ünïcödé ✓ 🚀",
    "back\\slash",
    "",
]
RELATIONS = ["partOf", "relatedTo", "authoredBy"]
DIM = 48


class CountingTransport(httpx.AsyncBaseTransport):
    """A real HTTP transport that records the path of every request."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


# -- fixtures -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ArcadeDBService, ServiceInfo]]:
    """A real ArcadeDB server for the module."""
    with running_arcadedb(tmp_path_factory.mktemp("services")) as running:
        yield running


@pytest.fixture(params=["embedded", "server"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ArcadeDBConnector]:
    """A connected, empty connector in either mode."""
    if request.param == "embedded":
        connector = ArcadeDBConnector(path=tmp_path / "arcadedb")
    else:
        _, info = request.getfixturevalue("server")
        connector = remote(info)
    await connector.connect()
    try:
        yield connector
    finally:
        await connector.close()


@pytest.fixture
async def reference(tmp_path: Path) -> AsyncIterator[NetworkXConnector]:
    graph = NetworkXConnector(tmp_path / "networkx")
    await graph.connect()
    try:
        yield graph
    finally:
        await graph.close()


# -- data -----------------------------------------------------------------------------------
def _graph(seed: int, n_nodes: int, n_edges: int) -> tuple[list[GraphNode], list[GraphEdge]]:
    rng = random.Random(seed)
    ids = [f"n{i}" for i in range(n_nodes)] + HOSTILE
    nodes = [GraphNode(element_id=i, element_type=rng.choice(["Document", "Person"])) for i in ids]
    edges: dict[tuple[str, str, str], GraphEdge] = {}
    for _ in range(n_edges):
        # Some endpoints are not nodes yet: the store must create them without a type.
        source = rng.choice([*ids, "orphan-a", "orphan-b"])
        relation = rng.choice([*RELATIONS, "rel`]->() DELETE e //"])
        valid_from = rng.randrange(1, 100)
        valid_to = rng.choice([OPEN, OPEN, valid_from + rng.randrange(1, 100)])
        edge = GraphEdge(
            source_id=source,
            relation=relation,
            target_id=rng.choice(ids),
            valid_from=valid_from,
            valid_to=valid_to,
        )
        edges[edge.key] = edge
    edges[("n1", "relatedTo", "n1")] = GraphEdge(  # a self-loop
        source_id="n1", relation="relatedTo", target_id="n1", valid_from=1
    )
    return nodes, list(edges.values())


def _same(a: Subgraph, b: Subgraph) -> bool:
    return dict(a.nodes) == dict(b.nodes) and sorted(a.edges, key=str) == sorted(b.edges, key=str)


def _chunks(seed: int, n: int) -> list[ChunkRecord]:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, DIM))
    chunks: list[ChunkRecord] = []
    for i in range(n):
        valid_from = int(rng.integers(1, 100))
        chunks.append(
            ChunkRecord(
                chunk_id=f"c{i}@1#0" if i % 17 else HOSTILE[i % len(HOSTILE)] + f"#{i}",
                element_id=f"e{i // 2}",
                version=1 + i % 3,
                index=i % 2,
                text=f"chunk {i}",
                embedding=vectors[i].tolist(),
                element_type=["Document", "Evidence", "SourcePill"][i % 3],
                name=f"Element {i // 2}",
                sensitivity_rank=int(rng.integers(0, 4)),
                scope=[None, None, "project:a", "project:b", "project:o'brien"][i % 5],
                valid_from=valid_from,
                valid_to=OPEN if i % 4 else valid_from + int(rng.integers(1, 50)),
                filter_values={"year": 2000 + i % 25, "lang": ["en", "de", "fr"][i % 3]},
            )
        )
    return chunks


def _exact(
    chunks: list[ChunkRecord], query: np.ndarray, k: int, search_filter: SearchFilter
) -> list[tuple[str, float]]:
    passing = [c for c in chunks if search_filter.allows_chunk(c)]
    matrix = np.array([c.embedding for c in passing], dtype=np.float64)
    scores = matrix @ query / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
    ranked = sorted(zip(passing, scores, strict=True), key=lambda p: (-p[1], p[0].chunk_id))
    return [(c.chunk_id, float(s)) for c, s in ranked[:k]]


FILTERS = [
    SearchFilter(max_sensitivity_rank=1),
    SearchFilter(max_sensitivity_rank=3, projects=("project:a", "project:o'brien")),
    SearchFilter(max_sensitivity_rank=3, all_projects=True, as_of=40),
    SearchFilter(max_sensitivity_rank=2, all_projects=True, element_types=("Evidence",)),
    SearchFilter(
        max_sensitivity_rank=3,
        all_projects=True,
        predicates=(
            Predicate(field="year", op=Op.GTE, value=2012),
            Predicate(field="lang", op=Op.IN, value=("en", "fr")),
        ),
    ),
]


# -- graph ----------------------------------------------------------------------------------
async def test_expand_equals_networkx(
    store: ArcadeDBConnector, reference: NetworkXConnector
) -> None:
    nodes, edges = _graph(seed=7, n_nodes=150, n_edges=500)
    for graph in (store, reference):
        await graph.upsert_nodes(nodes)
        await graph.upsert_edges(edges)
    rng = random.Random(3)
    seeds = rng.sample([n.element_id for n in nodes], 25) + HOSTILE[:4] + ["n1", "absent"]
    checked = 0
    for depth in (1, 2):
        for relations in (None, ["partOf", "relatedTo"], ["rel`]->() DELETE e //"], []):
            for as_of in (None, 30, 120):
                got = await store.expand(seeds, depth, relations, as_of)
                want = await reference.expand(seeds, depth, relations, as_of)
                assert _same(got, want), (depth, relations, as_of)
                checked += len(got.edges)
    assert checked > 500  # the comparisons were not vacuous
    assert await store.edge_states() == await reference.edge_states()
    assert await store.node_ids() == await reference.node_ids()
    assert (await store.expand(["absent"], 2, None, None)).nodes == {}
    assert await store.expand([], 2, None, None) == Subgraph(nodes={}, edges=())


async def test_deletes_match_networkx(
    store: ArcadeDBConnector, reference: NetworkXConnector
) -> None:
    nodes, edges = _graph(seed=11, n_nodes=60, n_edges=200)
    doomed_nodes = ["n3", "n4", HOSTILE[3], "never-there"]
    doomed_edges = [edges[0].key, edges[5].key, ("no", "such", "edge"), edges[0].key]
    for graph in (store, reference):
        await graph.upsert_nodes(nodes)
        await graph.upsert_edges(edges)
        await graph.delete_nodes(doomed_nodes)
        await graph.delete_edges(doomed_edges)
    assert await store.edge_states() == await reference.edge_states()
    assert await store.node_ids() == await reference.node_ids()
    assert not {"n3", "n4", HOSTILE[3]} & await store.node_ids()
    seeds = [n.element_id for n in nodes]
    assert _same(
        await store.expand(seeds, 2, None, None), await reference.expand(seeds, 2, None, None)
    )


async def test_upserts_are_idempotent_and_replace_validity(store: ArcadeDBConnector) -> None:
    nodes, edges = _graph(seed=5, n_nodes=40, n_edges=120)
    for _ in range(2):
        await store.upsert_nodes(nodes + nodes[:5])  # a batch may repeat itself too
        await store.upsert_edges(edges)
    states = await store.edge_states()
    assert states == {e.key: (e.valid_from, e.valid_to) for e in edges}
    closed = GraphEdge(
        source_id=edges[0].source_id,
        relation=edges[0].relation,
        target_id=edges[0].target_id,
        valid_from=edges[0].valid_from,
        valid_to=edges[0].valid_from + 1,
    )
    await store.upsert_edges([closed])
    await store.upsert_nodes([GraphNode(element_id="n0", element_type="Repository")])
    states = await store.edge_states()
    assert len(states) == len(edges)
    assert states[closed.key] == (closed.valid_from, closed.valid_to)
    got = await store.expand(["n0"], 1, None, None)
    assert got.nodes["n0"] == "Repository"
    assert (await store.stats())["edges"] == sum(1 for vt in states.values() if vt[1] == OPEN)


async def test_hostile_ids_are_data(store: ArcadeDBConnector) -> None:
    await store.upsert_nodes([GraphNode(element_id=i, element_type="Document") for i in HOSTILE])
    chain = [
        GraphEdge(source_id=a, relation=r, target_id=b, valid_from=1)
        for a, b, r in zip(
            HOSTILE, HOSTILE[1:], [*RELATIONS, "x`}]-() DELETE e //"] * 5, strict=False
        )
    ]
    await store.upsert_edges(chain)
    assert await store.node_ids() == set(HOSTILE)
    assert set(await store.edge_states()) == {e.key for e in chain}
    got = await store.expand([HOSTILE[0]], 2, None, None)
    assert set(got.nodes) == set(HOSTILE[:3])
    got = await store.expand(HOSTILE, 1, ["x`}]-() DELETE e //"], None)
    assert {e.relation for e in got.edges} == {"x`}]-() DELETE e //"}
    chunks = [
        ChunkRecord(
            chunk_id=cid,
            element_id=cid,
            version=1,
            index=0,
            text=cid,
            embedding=[1.0, float(i)],
            element_type="Document",
            name=cid,
            sensitivity_rank=0,
            scope=cid or None,
            valid_from=1,
            valid_to=OPEN,
            filter_values={"lang": cid},
        )
        for i, cid in enumerate(HOSTILE)
    ]
    await store.upsert_chunks(chunks)
    assert set(await store.chunk_states()) == set(HOSTILE)
    search = SearchFilter(
        max_sensitivity_rank=0,
        projects=tuple(HOSTILE[:6]),
        predicates=(Predicate(field="lang", op=Op.IN, value=tuple(HOSTILE)),),
    )
    hits = await store.vector_search([1.0, 0.0], len(HOSTILE), search)
    assert {h.chunk_id for h in hits} == {c.chunk_id for c in chunks if search.allows_chunk(c)}
    await store.delete_chunk_ids(HOSTILE[3:5])
    await store.delete_nodes(HOSTILE[5:6])
    assert set(await store.chunk_states()) == set(HOSTILE) - set(HOSTILE[3:5])
    assert await store.node_ids() == set(HOSTILE) - {HOSTILE[5]}


# -- vectors --------------------------------------------------------------------------------
async def test_vector_search_equals_exact_ranking(store: ArcadeDBConnector) -> None:
    chunks = _chunks(seed=1, n=400)
    await store.upsert_chunks(chunks)
    await store.upsert_chunks(chunks[:50])  # idempotent
    assert len(await store.chunk_states()) == len(chunks)
    rng = np.random.default_rng(9)
    for search_filter in FILTERS:
        query = rng.normal(size=DIM)
        hits = await store.vector_search(query.tolist(), 10, search_filter)
        want = _exact(chunks, query, 10, search_filter)
        assert [h.chunk_id for h in hits] == [cid for cid, _ in want], search_filter
        assert [h.score for h in hits] == pytest.approx([s for _, s in want], abs=1e-5)
        by_id = {c.chunk_id: c for c in chunks}
        assert all(
            (h.element_id, h.version, h.text)
            == (by_id[h.chunk_id].element_id, by_id[h.chunk_id].version, by_id[h.chunk_id].text)
            for h in hits
        )


async def test_selective_filter_still_returns_k(store: ArcadeDBConnector) -> None:
    chunks = _chunks(seed=2, n=600)
    await store.upsert_chunks(chunks)
    # About 2 % of the chunks pass; the nearest ones are almost all invisible.
    search = SearchFilter(
        max_sensitivity_rank=3,
        all_projects=True,
        predicates=(Predicate(field="year", op=Op.EQ, value=2003),),
    )
    passing = [c for c in chunks if search.allows_chunk(c)]
    assert 10 < len(passing) < 30
    query = np.array(passing[0].embedding) * -1.0  # the passing chunks are far from it
    hits = await store.vector_search(query.tolist(), 10, search)
    assert [h.chunk_id for h in hits] == [cid for cid, _ in _exact(chunks, query, 10, search)]
    hits = await store.vector_search(query.tolist(), 100, search)
    assert len(hits) == len(passing)  # fewer than k exist: all of them


async def test_chunk_deletes_and_validity_updates(store: ArcadeDBConnector) -> None:
    chunks = _chunks(seed=3, n=60)
    await store.upsert_chunks(chunks)
    retired = [dataclasses.replace(c, valid_to=c.valid_from + 1) for c in chunks[:10]]
    await store.upsert_chunks(retired)
    states = await store.chunk_states()
    assert all(states[c.chunk_id] == c.valid_from + 1 for c in retired)
    await store.delete_chunks(["e1", "e2", "nobody"])
    await store.delete_chunk_ids([chunks[20].chunk_id, "nothing"])
    gone = {c.chunk_id for c in chunks if c.element_id in ("e1", "e2")} | {chunks[20].chunk_id}
    assert set(await store.chunk_states()) == {c.chunk_id for c in chunks} - gone
    with pytest.raises(ConnectorError):
        await store.upsert_chunks([dataclasses.replace(chunks[0], embedding=None)])


# -- one query per expansion -------------------------------------------------------------
async def test_expand_is_one_request_per_call(server: tuple[ArcadeDBService, ServiceInfo]) -> None:
    transport = CountingTransport()
    connector = remote(server[1], transport=transport)
    await connector.connect()
    try:
        nodes, edges = _graph(seed=13, n_nodes=300, n_edges=900)
        await connector.upsert_nodes(nodes)
        await connector.upsert_edges(edges)
        seeds = [n.element_id for n in nodes[:50]]
        for depth, relations, as_of in ((1, None, None), (2, None, None), (2, RELATIONS, 50)):
            transport.paths.clear()
            got = await connector.expand(seeds, depth, relations, as_of)
            assert len(transport.paths) == 1
            assert transport.paths[0].startswith("/api/v1/query/")
            assert got.edges
    finally:
        await connector.close()


async def test_embedded_expand_is_one_query_per_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    connector = ArcadeDBConnector(path=tmp_path / "arcadedb")
    await connector.connect()
    try:
        nodes, edges = _graph(seed=17, n_nodes=200, n_edges=600)
        await connector.upsert_nodes(nodes)
        await connector.upsert_edges(edges)
        backend: Any = connector._backend  # counting the real engine's calls
        calls: list[str] = []
        query = backend.query

        async def counted(language: str, command: str, params: Any) -> Any:
            calls.append(command)
            return await query(language, command, params)

        monkeypatch.setattr(backend, "query", counted)
        got = await connector.expand([n.element_id for n in nodes[:50]], 2, None, None)
        assert len(calls) == 1
        assert got.edges
        # Concurrent readers and a writer in worker threads: each sees a consistent store.
        results = await asyncio.gather(
            *(connector.expand([f"n{i}"], 2, None, None) for i in range(10)),
            connector.upsert_edges(
                [GraphEdge(source_id="n0", relation="partOf", target_id="z", valid_from=1)]
            ),
        )
        assert len(results) == 11
    finally:
        await connector.close()


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
