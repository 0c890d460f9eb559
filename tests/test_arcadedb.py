"""ArcadeDB connector, embedded (in process) and server (HTTP), against real engines: the
graph, the vectors, and one query per expansion.

The graph side is held to the reference networkx connector on identical inputs; the vector
side to an exact numpy ranking with the filter's reference semantics. One real server,
started through `ArcadeDBService` for the module, serves every server-mode test, each in a
database of its own. Persistence, the service's state and the errors are in
test_arcadedb_persistence.py; the server fixture and the seeded data are
tests/arcadedb_fixtures.py's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from arcadedb_fixtures import (
    DIM,
    FILTERS,
    HOSTILE,
    RELATIONS,
    _chunks,
    _exact,
    _graph,
    _same,
    remote,
    server,
)

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

__all__ = ["server"]  # a fixture


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
