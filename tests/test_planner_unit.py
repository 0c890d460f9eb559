"""Planner unit tests over test doubles: capability selection, batching, concurrency.

The doubles below are fakes of the *connector interface*, used only to count and time the
planner's calls; every behaviour test elsewhere runs on the real backends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import uda
from connectors.base import Connector, GraphCapable, TextCapable, VectorCapable
from connectors.contract.records import (
    ChunkHit,
    ChunkRecord,
    GraphEdge,
    GraphNode,
    SearchFilter,
    Subgraph,
)
from connectors.contract.system_of_record import StateHead, StoredState
from connectors.networkx_graph import NetworkXConnector
from connectors.sqlite.connector import SQLiteConnector
from ontology import Decision, Document, Person, Relation, Repository
from uda.config import SearchDefaults
from uda.hlc import HybridLogicalClock
from uda.query.contracts import SearchRequest
from uda.query.planner import Planner
from uda.write.writer import Writer, derived_stores


class FixedEmbedder:
    """Test double: a deterministic 4-d embedding, no model."""

    dimension = 4
    fingerprint = "test-double-4d"

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray([self.embed_query(t) for t in texts], dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        rng = np.random.default_rng(abs(hash(text)) % 2**32)
        v = rng.normal(size=4).astype(np.float32)
        return v / np.linalg.norm(v)


class RecordingVectorDouble(Connector, VectorCapable):
    """Test double of a vector store: brute force in memory, counting calls."""

    def __init__(self, name: str, delay: float = 0.0, *, with_text: bool = True) -> None:
        self.name = name  # type: ignore[misc]
        self.delay = delay
        self.with_text = with_text  # False: hits come without text, as the embedded store's
        self.chunks: dict[str, ChunkRecord] = {}
        self.search_calls = 0
        self.score_calls: list[list[str]] = []
        self.active = 0
        self.max_active_seen = 0

    async def connect(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def upsert_chunks(self, chunks: Sequence[ChunkRecord]) -> None:
        self.chunks.update({c.chunk_id: c for c in chunks})

    async def delete_chunks(self, element_ids: Sequence[str]) -> None:
        self.chunks = {k: c for k, c in self.chunks.items() if c.element_id not in element_ids}

    async def chunk_states(self) -> dict[str, int]:
        return {k: c.valid_to for k, c in self.chunks.items()}

    async def delete_chunk_ids(self, chunk_ids: Sequence[str]) -> None:
        self.chunks = {k: c for k, c in self.chunks.items() if k not in chunk_ids}

    async def vector_search(
        self, embedding: Sequence[float], k: int, search_filter: SearchFilter
    ) -> list[ChunkHit]:
        self.search_calls += 1
        self.active += 1
        SHARED_ACTIVITY.append(self.name)
        await asyncio.sleep(self.delay)
        self.max_active_seen = max(self.max_active_seen, len(set(SHARED_ACTIVITY)))
        self.active -= 1
        SHARED_ACTIVITY.remove(self.name)
        return self._scored(embedding, search_filter)[:k]

    async def vector_scores(
        self, embedding: Sequence[float], element_ids: Sequence[str], search_filter: SearchFilter
    ) -> list[ChunkHit]:
        self.score_calls.append(list(element_ids))
        return self._scored(embedding, search_filter, set(element_ids))

    def _scored(
        self, embedding: Sequence[float], search_filter: SearchFilter, only: set[str] | None = None
    ) -> list[ChunkHit]:
        """Every passing chunk (of the `only` elements, if given) by dot product, best first."""
        q = np.asarray(embedding)
        hits = [
            ChunkHit(
                chunk_id=c.chunk_id,
                element_id=c.element_id,
                version=c.version,
                text=c.text if self.with_text else None,
                score=float(np.dot(q, np.asarray(c.embedding))),
            )
            for c in self.chunks.values()
            if (only is None or c.element_id in only) and search_filter.allows_chunk(c)
        ]
        return sorted(hits, key=lambda h: -h.score)


SHARED_ACTIVITY: list[str] = []


class RecordingGraphDouble(Connector, GraphCapable):
    """Test double of a graph store: counts expand() calls and their batch sizes."""

    name = "graph-double"

    def __init__(self) -> None:
        self.edges: dict[tuple[str, str, str], GraphEdge] = {}
        self.expand_calls: list[int] = []

    async def connect(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def upsert_nodes(self, nodes: Sequence[GraphNode]) -> None:
        pass

    async def upsert_edges(self, edges: Sequence[GraphEdge]) -> None:
        self.edges.update({e.key: e for e in edges})

    async def delete_nodes(self, element_ids: Sequence[str]) -> None:
        pass

    async def edge_states(self) -> dict[tuple[str, str, str], tuple[int, int]]:
        return {k: (e.valid_from, e.valid_to) for k, e in self.edges.items()}

    async def node_ids(self) -> set[str]:
        return {n for e in self.edges.values() for n in (e.source_id, e.target_id)}

    async def delete_edges(self, keys: Sequence[tuple[str, str, str]]) -> None:
        for key in keys:
            self.edges.pop(key, None)

    async def expand(
        self,
        element_ids: Sequence[str],
        depth: int,
        relations: Sequence[str] | None,
        as_of: int | None,
        backward_hops: int | None = None,
    ) -> Subgraph:
        self.expand_calls.append(len(element_ids))
        ids = set(element_ids)
        edges = [e for e in self.edges.values() if e.source_id in ids or e.target_id in ids]
        nodes = {n: "" for e in edges for n in (e.source_id, e.target_id)}
        return Subgraph(nodes=nodes, edges=tuple(edges))


async def _setup(
    tmp_path: Path, connectors: list[Connector], sor: SQLiteConnector | None = None
) -> tuple[Planner, Writer, SQLiteConnector]:
    sor = sor or SQLiteConnector(tmp_path / "sor.sqlite3")
    await sor.connect()
    everything: list[Connector] = [sor, *connectors]
    embedder = FixedEmbedder()
    writer = Writer(
        system_of_record=sor,
        stores=derived_stores(everything),
        embedder=embedder,
        clock=HybridLogicalClock(),
    )
    planner = Planner(
        connectors=everything, system_of_record=sor, embedder=embedder, defaults=SearchDefaults()
    )
    return planner, writer, sor


async def test_one_batched_call_per_connector_per_phase(tmp_path: Path) -> None:
    vectors = [RecordingVectorDouble("vec-a"), RecordingVectorDouble("vec-b")]
    graph = RecordingGraphDouble()
    planner, writer, sor = await _setup(tmp_path, [*vectors, graph])
    docs = [
        Document(element_id=f"d{i}", name=f"doc {i}", text=f"text {i}", sensitivity="public")
        for i in range(30)
    ]
    repo = Repository(element_id="r", name="repo", sensitivity="public")
    await writer.ingest(
        [repo, *docs],
        [Relation(source_id=d.element_id, relation="partOf", target_id="r") for d in docs],
    )
    response = await planner.search(SearchRequest(query="text", limit=10))
    assert [v.search_calls for v in vectors] == [1, 1]
    # One expansion call for the whole candidate batch, not one per candidate.
    assert len(graph.expand_calls) == 1
    assert graph.expand_calls[0] == 30
    assert len(response) == 10
    await sor.close()


async def test_vector_legs_run_concurrently(tmp_path: Path) -> None:
    vectors = [RecordingVectorDouble("slow-a", 0.2), RecordingVectorDouble("slow-b", 0.2)]
    planner, writer, sor = await _setup(tmp_path, list(vectors))
    await writer.ingest([Document(element_id="d", name="d", text="t", sensitivity="public")])
    await planner.search(SearchRequest(query="t"))
    # Both doubles were inside vector_search at the same moment (no timing involved).
    assert max(v.max_active_seen for v in vectors) == 2
    await sor.close()


async def test_capabilities_select_connectors_by_isinstance(tmp_path: Path) -> None:
    vector = RecordingVectorDouble("vec")
    planner, _, sor = await _setup(tmp_path, [vector])
    plan = planner.plan(SearchRequest(query="q"))
    assert plan.vector_connectors == ("vec",)
    assert plan.text_connectors == ("sqlite",)  # SQLite is TextCapable through FTS5
    assert plan.graph_connectors == ()
    assert isinstance(sor, TextCapable)
    await sor.close()


async def test_profile_without_vector_store_is_a_typed_error(tmp_path: Path) -> None:
    sor = SQLiteConnector(tmp_path / "sor.sqlite3")
    await sor.connect()
    with pytest.raises(uda.MissingCapabilityError, match="VectorCapable"):
        Planner(
            connectors=[sor],
            system_of_record=sor,
            embedder=FixedEmbedder(),
            defaults=SearchDefaults(),
        )
    await sor.close()


async def test_no_graph_connector_means_no_centrality(tmp_path: Path) -> None:
    planner, writer, sor = await _setup(tmp_path, [RecordingVectorDouble("vec")])
    await writer.ingest(
        [
            Document(element_id=f"d{i}", name=f"d{i}", text="x", sensitivity="public")
            for i in range(5)
        ]
    )
    response = await planner.search(SearchRequest(query="x"))
    table = response.to_arrow()
    assert table.column("centrality_rank").null_count == len(response)
    await sor.close()


async def test_graph_only_candidates_get_semantic_scores_in_one_call(tmp_path: Path) -> None:
    """A candidate reached only through the graph is scored by one batched vector call."""
    vector = RecordingVectorDouble("vec")
    planner, writer, sor = await _setup(tmp_path, [vector, RecordingGraphDouble()])
    docs = [
        Document(element_id="seed", name="seed", text="alpha", sensitivity="public"),
        Document(element_id="near", name="near", text="beta", sensitivity="public"),
        Document(element_id="far", name="far", text="gamma", sensitivity="public"),
        Document(element_id="hidden", name="hidden", text="delta", sensitivity="restricted"),
    ]
    await writer.ingest(
        docs,
        [
            Relation(source_id="seed", relation="relatedTo", target_id="near"),
            Relation(source_id="seed", relation="relatedTo", target_id="hidden"),
        ],
    )
    # Set the stored vectors: `seed` is the query's direction (the pool of one), `far` is
    # nearer than `near` but unconnected, `near` is reached through `seed` only.
    query = FixedEmbedder().embed_query("what is alpha")
    other = np.roll(query, 1) - np.dot(np.roll(query, 1), query) * query
    other /= np.linalg.norm(other)
    direction = {
        "seed": query,
        "near": 0.3 * query + 0.954 * other,
        "far": 0.6 * query + 0.8 * other,
    }
    for key, record in list(vector.chunks.items()):
        if record.element_id in direction:
            vector.chunks[key] = replace(record, embedding=direction[record.element_id].tolist())
    request = SearchRequest(
        query="what is alpha",
        limit=5,
        pool_size=1,
        expand_depth=1,
        graph_candidates=True,
        decay=False,
        weights={"semantic": 1.0, "lexical": 0.0, "centrality": 1.0},
    )
    rows = (await planner.search(request)).to_arrow().to_pylist()
    assert [r["element_id"] for r in rows] == ["seed", "near"]
    assert vector.score_calls == [["near"]]  # visible and reached: the hidden one is not asked
    assert rows[1]["semantic_score"] == pytest.approx(0.3, abs=1e-3)
    assert rows[1]["semantic_rank"] == 2

    vector.score_calls.clear()
    await planner.search(SearchRequest(query="what is alpha", pool_size=1, expand_depth=1))
    assert vector.score_calls == []  # no graph candidates, nothing to score
    await sor.close()


class ReclassifyingStore(SQLiteConnector):
    """The real SQLite store, recording its reads; it can run a write between a search's
    read of heads and its read of whole states, as a concurrent writer might."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.whole_reads: list[list[str]] = []
        self.head_reads: list[list[str]] = []
        self.version_reads: list[list[str]] = []
        self.between: Callable[[], Awaitable[None]] | None = None

    async def fetch(self, element_ids: Sequence[str], as_of: int | None) -> dict[str, StoredState]:
        self.whole_reads.append(list(element_ids))
        return await super().fetch(element_ids, as_of)

    async def fetch_heads(
        self, element_ids: Sequence[str], as_of: int | None, *, filter_values: bool = True
    ) -> dict[str, StateHead]:
        self.head_reads.append(list(element_ids))
        found = await super().fetch_heads(element_ids, as_of, filter_values=filter_values)
        if self.between is not None:
            await self.between()
        return found

    async def fetch_versions(self, heads: Sequence[StateHead]) -> dict[str, StoredState]:
        self.version_reads.append([h.element_id for h in heads])
        return await super().fetch_versions(heads)


# The context mode, asked for: these tests are about how its context nodes are read (the
# fixture's repository joins the document and the decision, which the automatic mode reads
# as an associative graph).
CONTEXT = {"expand_depth": 2, "traverse": "context", "graph_candidates": False}


async def _context_fixture(
    tmp_path: Path,
) -> tuple[Planner, Writer, ReclassifyingStore, NetworkXConnector]:
    sor = ReclassifyingStore(tmp_path / "sor.sqlite3")
    graph = NetworkXConnector(tmp_path / "graph")
    await graph.connect()
    planner, writer, _ = await _setup(tmp_path, [RecordingVectorDouble("vec"), graph], sor)
    await writer.ingest(
        [
            Document(element_id="d", name="doc", text="alpha", sensitivity="public"),
            Repository(element_id="r", name="repo", sensitivity="public"),
            Person(element_id="p", name="author", sensitivity="public"),
            Decision(
                element_id="x",
                name="decision",
                text="use x",
                status="accepted",
                sensitivity="public",
            ),
        ],
        [
            Relation(source_id="d", relation="partOf", target_id="r"),
            Relation(source_id="d", relation="authoredBy", target_id="p"),
            Relation(source_id="r", relation="governedBy", target_id="x"),
        ],
    )
    sor.whole_reads, sor.head_reads, sor.version_reads = [], [], []  # the tests count a search's
    return planner, writer, sor, graph


async def test_only_the_page_and_its_context_are_read_whole(tmp_path: Path) -> None:
    """Heads of every candidate and reached node in one read; whole states of the page's
    results and their context nodes in one more (ADR 51)."""
    planner, _, sor, graph = await _context_fixture(tmp_path)
    try:
        request = SearchRequest(query="alpha", limit=1, element_types=["Document"], **CONTEXT)
        [result] = (await planner.search(request)).results
    finally:
        await graph.close()
        await sor.close()
    assert [(n["element_id"], n["name"]) for n in result.context_nodes] == [
        ("p", "author"),
        ("r", "repo"),
        ("x", "decision"),
    ]
    assert sor.head_reads == [["d", "p", "r", "x"]]
    assert sor.version_reads == [["d", "p", "r", "x"]]
    assert sor.whole_reads == []


async def test_a_context_node_hidden_between_the_reads_is_dropped_with_what_it_led_to(
    tmp_path: Path,
) -> None:
    planner, writer, sor, graph = await _context_fixture(tmp_path)

    async def reclassify() -> None:
        sor.between = None
        await writer.ingest([Repository(element_id="r", name="repo", sensitivity="restricted")])

    sor.between = reclassify
    try:
        request = SearchRequest(query="alpha", limit=1, element_types=["Document"], **CONTEXT)
        [result] = (await planner.search(request)).results
    finally:
        await graph.close()
        await sor.close()
    # The repository was visible when clearance was read and restricted when the context was
    # hydrated: neither it nor the decision reached through it is shown.
    assert [n["element_id"] for n in result.context_nodes] == ["p"]


async def test_a_result_hidden_between_ranking_and_hydration_is_not_shown(
    tmp_path: Path,
) -> None:
    """Ranked on its head while public, restricted before its whole state is read: the page
    leaves it out, and nothing of it (not its context either) reaches the caller."""
    planner, writer, sor, graph = await _context_fixture(tmp_path)

    async def reclassify() -> None:
        sor.between = None
        await writer.ingest(
            [Document(element_id="d", name="doc", text="alpha", sensitivity="restricted")]
        )

    sor.between = reclassify
    try:
        request = SearchRequest(query="alpha", limit=1, element_types=["Document"], **CONTEXT)
        response = await planner.search(request)
    finally:
        await graph.close()
        await sor.close()
    assert response.results == []
    assert sor.version_reads == [["d", "p", "r", "x"]]  # it was ranked, then read, then dropped
