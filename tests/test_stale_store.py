"""Defence in depth: a vector store whose metadata lags the system of record leaks nothing.

The Chroma copy of a restricted chunk is rewritten to claim it is public, as a store that
missed an update would. Phase 3 must still drop it, and nothing reachable only through it may
enter the results or the context.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import uda
from connectors.chroma.connector import ChromaConnector
from connectors.contract.records import OPEN, GraphEdge, SearchFilter
from ontology import Document, Repository
from uda.embedding import Embedder
from uda.query.graph_context import reachable_subgraph, within_reach


def test_within_reach_keeps_only_what_seeds_reach() -> None:
    edges = [
        GraphEdge(source_id="a", relation="relatedTo", target_id="b", valid_from=1),
        GraphEdge(source_id="b", relation="relatedTo", target_id="c", valid_from=1),
        GraphEdge(source_id="x", relation="relatedTo", target_id="y", valid_from=1),
    ]
    assert [e.key for e in within_reach(edges, ["a"], 1)] == [("a", "relatedTo", "b")]
    assert len(within_reach(edges, ["a"], 2)) == 2
    assert within_reach(edges, ["z"], 2) == []
    assert all(e.valid_to == OPEN for e in within_reach(edges, ["c"], 2))


def test_reachable_subgraph_cuts_hidden_nodes_and_the_edges_beyond_them() -> None:
    """A hidden node drops its edges; what only it led to drops out of edges and adjacency."""
    edges = [
        GraphEdge(source_id="a", relation="relatedTo", target_id="b", valid_from=1),
        GraphEdge(source_id="b", relation="relatedTo", target_id="c", valid_from=1),
        GraphEdge(source_id="a", relation="partOf", target_id="h", valid_from=1),
        GraphEdge(source_id="h", relation="relatedTo", target_id="d", valid_from=1),
        GraphEdge(source_id="d", relation="relatedTo", target_id="e", valid_from=1),
    ]
    visible = {"a", "b", "c", "d", "e"}
    reached, adj = reachable_subgraph(edges, visible, ["a"], 2)
    assert [e.key for e in reached] == [("a", "relatedTo", "b"), ("b", "relatedTo", "c")]
    assert adj == {
        "a": [("b", "relatedTo", "out")],
        "b": [("a", "relatedTo", "in"), ("c", "relatedTo", "out")],
        "c": [("b", "relatedTo", "in")],
    }
    # Walking backwards only in the first hop: c is reached from b, but not b's way back.
    _, forward = reachable_subgraph(edges, visible, ["b"], 2, backward_hops=0)
    assert forward == {"b": [("c", "relatedTo", "out")], "c": [("b", "relatedTo", "in")]}


def _top_public_hit(folder: Path, query: list[float]) -> str:
    """The id of the nearest chunk the vector store hands a public caller."""

    async def search() -> str:
        store = ChromaConnector(path=folder)
        await store.connect()
        try:
            hits = await store.vector_search(query, 1, SearchFilter(max_sensitivity_rank=0))
        finally:
            await store.close()
        return hits[0].chunk_id

    return asyncio.run(search())


def test_stale_vector_metadata_does_not_leak(tmp_path: Path, embedder: Embedder) -> None:
    secret = Document(
        element_id="secret",
        name="Merger plan",
        text="The merger with Initech closes in March.",
        sensitivity="restricted",
    )
    neighbour = Document(
        element_id="neighbour",
        name="Canteen menu",
        text="Soup of the day is tomato.",
        sensitivity="public",
    )
    canteen = Repository(element_id="canteen", name="canteen", sensitivity="public")
    with uda.connect(path=tmp_path, embedder=embedder) as client:
        client.ingest(
            [secret, neighbour, canteen],
            [("secret", "relatedTo", "neighbour"), ("neighbour", "partOf", "canteen")],
        )
        before = client.search(
            "merger closes in March",
            limit=5,
            clearance_scope=["public"],
            graph_candidates=True,
            pool_size=1,
            expand_depth=2,
            decay=False,
        ).to_arrow()

    # Make the vector store's copy lie: the restricted chunk now claims to be public in the
    # chunk directory that embedded searches filter on (Chroma holds vectors only, ADR 52).
    directory = sqlite3.connect(tmp_path / "chroma" / "uda_chunks.directory.sqlite3")
    with directory:
        directory.execute("UPDATE chunks SET sensitivity_rank = 0 WHERE element_id = 'secret'")
    directory.close()
    query = embedder.embed_query("merger closes in March").tolist()
    assert _top_public_hit(tmp_path / "chroma", query).startswith("secret@")  # it now leaks

    with uda.connect(path=tmp_path, embedder=embedder) as client:
        res = client.search(
            "merger closes in March",
            limit=5,
            clearance_scope=["public"],
            graph_candidates=True,
            pool_size=1,
            expand_depth=2,
            decay=False,
        )
        after = res.to_arrow()
        explained = str(res.explain())
    assert before.column("element_id").to_pylist() == ["neighbour"]  # on its own merit
    ids = after.column("element_id").to_pylist()
    assert "secret" not in ids
    # The stale hit took the one-item pool, so the neighbour could now come only through the
    # secret's graph expansion: it must not. (Recall suffers; nothing leaks.)
    assert "neighbour" not in ids
    assert "Merger plan" not in explained
