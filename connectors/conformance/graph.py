"""Conformance of `GraphCapable`: batched expansion, directions, relations, validity, ids."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence

import pytest_asyncio

from connectors.base import GraphCapable
from connectors.conformance.data import (
    EDGES,
    HOSTILE_IDS,
    NODES,
    edge,
    graph_nodes,
    reference_expand,
)
from connectors.conformance.fixtures import ConformanceBase, Harness, claim
from connectors.contract.records import OPEN, GraphEdge, GraphNode, Subgraph

Key = tuple[str, str, str]


def keys(*triples: str) -> set[Key]:
    """Edge keys from "source relation target" strings."""
    out: set[Key] = set()
    for triple in triples:
        source, relation, target = triple.split()
        out.add((source, relation, target))
    return out


def check_subgraph(
    sub: Subgraph,
    seeds: Iterable[str],
    stored: Mapping[Key, GraphEdge],
    types: Mapping[str, str],
) -> set[Key]:
    """The subgraph is well formed; returns its edge keys.

    Each edge once, with its stored validity; its ends among the nodes with their types; no
    node that is neither a seed nor an end of a returned edge.
    """
    found = [e.key for e in sub.edges]
    assert len(found) == len(set(found)), f"an edge returned twice: {found}"
    ends: set[str] = set()
    for e in sub.edges:
        assert e.key in stored, f"unknown edge {e.key}"
        want = stored[e.key]
        assert (e.valid_from, e.valid_to) == (want.valid_from, want.valid_to), e
        ends |= {e.source_id, e.target_id}
    assert ends <= set(sub.nodes), f"edge ends missing from nodes: {ends - set(sub.nodes)}"
    extra = set(sub.nodes) - ends - set(seeds)
    assert not extra, f"nodes that no returned edge reaches: {extra}"
    for node in ends:
        if node in types:
            assert sub.nodes[node] == types[node], f"{node}: {sub.nodes[node]!r}"
    return set(found)


class GraphConformance(ConformanceBase):
    """Tests for connectors that claim `GraphCapable` (skipped for the others)."""

    @pytest_asyncio.fixture
    async def graph(self, harness: Harness) -> GraphCapable:
        """A fresh connector as GraphCapable, or a skip naming the capability."""
        return claim(await harness.new(), GraphCapable)

    @pytest_asyncio.fixture
    async def loaded(self, graph: GraphCapable) -> GraphCapable:
        """The fresh graph with the suite's nodes and edges (`data.NODES`, `data.EDGES`)."""
        await graph.upsert_nodes(graph_nodes())
        await graph.upsert_edges(EDGES)
        return graph

    async def _graph_expand(
        self,
        graph: GraphCapable,
        seeds: Sequence[str],
        depth: int,
        relations: Sequence[str] | None = None,
        as_of: int | None = None,
        edges: Sequence[GraphEdge] = EDGES,
        backward_hops: int | None = None,
    ) -> set[Key]:
        sub = await graph.expand(seeds, depth, relations, as_of, backward_hops=backward_hops)
        return check_subgraph(sub, seeds, {e.key: e for e in edges}, NODES)

    async def test_graph_expand_depth_one_both_directions(self, loaded: GraphCapable) -> None:
        """Depth 1 follows outgoing and incoming edges of every seed."""
        assert await self._graph_expand(loaded, ["d1"], 1) == keys(
            "d1 partOf repo",
            "d1 relatedTo repo",
            "d1 authoredBy ada",
            "d1 governedBy dec",
            "d4 relatedTo d1",
        )
        assert await self._graph_expand(loaded, ["repo"], 1) == keys(
            "d1 partOf repo", "d2 partOf repo", "d1 relatedTo repo"
        )
        assert await self._graph_expand(loaded, ["lone"], 1) == set()

    async def test_graph_expand_depth_two(self, loaded: GraphCapable) -> None:
        """Depth 2 adds the edges of the nodes one hop away, in either direction."""
        assert await self._graph_expand(loaded, ["d1"], 2) == keys(
            "d1 partOf repo",
            "d1 relatedTo repo",
            "d1 authoredBy ada",
            "d1 governedBy dec",
            "d4 relatedTo d1",
            "d2 partOf repo",
            "d3 authoredBy ada",
            "dec supersedes dec0",
        )
        assert await self._graph_expand(loaded, ["dec0"], 2) == keys(
            "dec supersedes dec0", "d1 governedBy dec"
        )

    async def test_graph_expand_walks_back_only_in_the_first_hops(
        self, loaded: GraphCapable
    ) -> None:
        """With `backward_hops=1`, hops after the first follow edges along their direction.

        d1 reaches its repository, not the repository's other document.
        """
        assert await self._graph_expand(loaded, ["d1"], 2, backward_hops=1) == keys(
            "d1 partOf repo",
            "d1 relatedTo repo",
            "d1 authoredBy ada",
            "d1 governedBy dec",
            "d4 relatedTo d1",
            "dec supersedes dec0",
        )
        # Incoming edges at the first hop still count (dec0 is superseded by dec) ...
        assert await self._graph_expand(loaded, ["dec0"], 2, backward_hops=1) == keys(
            "dec supersedes dec0"
        )
        # ... and no backward hop at all follows edges along their direction only.
        assert await self._graph_expand(loaded, ["repo"], 1, backward_hops=0) == set()
        assert await self._graph_expand(loaded, ["d1"], 2, backward_hops=2) == (
            await self._graph_expand(loaded, ["d1"], 2)
        )

    async def test_graph_expand_follows_only_allowed_relations(self, loaded: GraphCapable) -> None:
        """The relation allow-list limits the edges returned and the paths followed."""
        assert await self._graph_expand(loaded, ["d1"], 2, ["partOf"]) == keys(
            "d1 partOf repo", "d2 partOf repo"
        )
        assert await self._graph_expand(loaded, ["d1"], 2, ["authoredBy", "governedBy"]) == keys(
            "d1 authoredBy ada", "d3 authoredBy ada", "d1 governedBy dec"
        )
        assert await self._graph_expand(loaded, ["dec0"], 2, ["governedBy"]) == set()

    async def test_graph_expand_as_of_selects_valid_edges(self, loaded: GraphCapable) -> None:
        """`as_of` keeps edges with valid_from <= as_of < valid_to; None means current."""
        assert await self._graph_expand(loaded, ["d2"], 1) == keys("d2 partOf repo")
        assert await self._graph_expand(loaded, ["d2"], 1, as_of=200) == keys(
            "d2 partOf repo", "d2 relatedTo d3"
        )
        assert await self._graph_expand(loaded, ["d2"], 1, as_of=300) == keys("d2 partOf repo")
        assert await self._graph_expand(loaded, ["d2"], 1, as_of=99) == set()
        assert ("d4", "relatedTo", "d1") not in await self._graph_expand(
            loaded, ["d1"], 1, as_of=499
        )
        assert keys("d4 relatedTo d1") <= await self._graph_expand(loaded, ["d1"], 1, as_of=500)
        # At 200 the path d2 - d3 - ada exists; now it does not.
        assert keys("d3 authoredBy ada") <= await self._graph_expand(loaded, ["d2"], 2, as_of=200)
        assert keys("d3 authoredBy ada").isdisjoint(await self._graph_expand(loaded, ["d2"], 2))

    async def test_graph_expand_matches_reference(self, loaded: GraphCapable) -> None:
        """Every seed set, depth, allow-list and time agrees with a breadth-first reference."""
        seed_sets = [[n] for n in NODES] + [["d2", "dec0"], ["repo", "ada", "lone"]]
        relation_sets = [None, ["partOf", "relatedTo"], ["supersedes"]]
        failures: list[str] = []
        for seeds, depth, relations, as_of, back in itertools.product(
            seed_sets, (1, 2), relation_sets, (None, 150, 300, 600), (None, 0, 1)
        ):
            got = await self._graph_expand(loaded, seeds, depth, relations, as_of, EDGES, back)
            want = reference_expand(EDGES, seeds, depth, relations, as_of, back)
            if got != want:
                failures.append(
                    f"{seeds} depth={depth} {relations} as_of={as_of} back={back}: {got ^ want}"
                )
        assert not failures, "\n".join(failures)

    async def test_graph_one_batch_with_missing_ids(self, loaded: GraphCapable) -> None:
        """One call expands the whole batch; ids that do not exist are ignored everywhere."""
        batch = await self._graph_expand(loaded, ["missing", "d2", "dec0", "d2", "also-missing"], 1)
        assert batch == keys("d2 partOf repo", "dec supersedes dec0")
        assert await self._graph_expand(loaded, ["missing"], 2) == set()
        await loaded.delete_nodes(["missing"])
        await loaded.delete_edges([("missing", "partOf", "repo"), ("d1", "nope", "repo")])
        assert await loaded.node_ids() == set(NODES)
        assert await loaded.edge_states() == {e.key: (e.valid_from, e.valid_to) for e in EDGES}

    async def test_graph_listings(self, loaded: GraphCapable) -> None:
        """`edge_states` lists every edge (closed ones too); `node_ids` every node."""
        assert await loaded.edge_states() == {e.key: (e.valid_from, e.valid_to) for e in EDGES}
        assert await loaded.node_ids() == set(NODES)

    async def test_graph_upserts_are_idempotent(self, loaded: GraphCapable) -> None:
        """Upserting the same nodes and edges again changes nothing; node types are replaced."""
        await loaded.upsert_nodes(graph_nodes())
        await loaded.upsert_edges(EDGES)
        assert await loaded.edge_states() == {e.key: (e.valid_from, e.valid_to) for e in EDGES}
        assert await loaded.node_ids() == set(NODES)
        await loaded.upsert_nodes([GraphNode(element_id="lone", element_type="Project")])
        await loaded.upsert_edges([edge("lone", "relatedTo", "repo")])
        sub = await loaded.expand(["lone"], 1, None, None)
        assert sub.nodes.get("lone") == "Project"

    async def test_graph_edge_reupsert_changes_validity(self, loaded: GraphCapable) -> None:
        """Re-upserting an edge key replaces its validity: closing and reopening it."""
        closed = edge("d1", "partOf", "repo", 100, 400)
        await loaded.upsert_edges([closed])
        states = await loaded.edge_states()
        assert states[closed.key] == (100, 400)
        assert len(states) == len(EDGES)
        changed = [closed if e.key == closed.key else e for e in EDGES]
        assert closed.key not in await self._graph_expand(loaded, ["d1"], 1, edges=changed)
        assert closed.key in await self._graph_expand(loaded, ["d1"], 1, as_of=350, edges=changed)
        assert closed.key not in await self._graph_expand(
            loaded, ["d1"], 1, as_of=400, edges=changed
        )
        reopened = edge("d1", "partOf", "repo", 450)
        await loaded.upsert_edges([reopened])
        assert (await loaded.edge_states())[reopened.key] == (450, OPEN)
        changed = [reopened if e.key == reopened.key else e for e in EDGES]
        assert reopened.key in await self._graph_expand(loaded, ["d1"], 1, edges=changed)

    async def test_graph_delete_nodes_removes_their_edges(self, loaded: GraphCapable) -> None:
        """Deleting nodes removes them and every edge touching them; the rest stays."""
        await loaded.delete_nodes(["d1", "dec0"])
        assert await loaded.node_ids() == set(NODES) - {"d1", "dec0"}
        left = [e for e in EDGES if not {e.source_id, e.target_id} & {"d1", "dec0"}]
        assert await loaded.edge_states() == {e.key: (e.valid_from, e.valid_to) for e in left}
        assert await self._graph_expand(loaded, ["repo"], 2) == keys("d2 partOf repo")
        assert await self._graph_expand(loaded, ["d1"], 2) == set()

    async def test_graph_delete_edges_keeps_nodes(self, loaded: GraphCapable) -> None:
        """Deleting edges by key removes exactly those edges; their nodes stay."""
        gone = [("d1", "partOf", "repo"), ("dec", "supersedes", "dec0")]
        await loaded.delete_edges(gone)
        assert await loaded.node_ids() == set(NODES)
        left = {e.key: (e.valid_from, e.valid_to) for e in EDGES if e.key not in gone}
        assert await loaded.edge_states() == left
        assert await self._graph_expand(loaded, ["repo"], 1) == keys(
            "d2 partOf repo", "d1 relatedTo repo"
        )

    async def test_graph_hostile_ids_round_trip(self, graph: GraphCapable) -> None:
        """Quotes, SQL, Cypher, unicode, `@`/`#` in node ids are data."""
        types = dict.fromkeys(HOSTILE_IDS, "Document")
        await graph.upsert_nodes(graph_nodes(types))
        chain = [edge(a, "relatedTo", b) for a, b in itertools.pairwise(HOSTILE_IDS)]
        await graph.upsert_edges(chain)
        assert await graph.node_ids() == set(HOSTILE_IDS)
        assert await graph.edge_states() == {e.key: (e.valid_from, e.valid_to) for e in chain}
        stored = {e.key: e for e in chain}
        for i, eid in enumerate(HOSTILE_IDS):
            sub = await graph.expand([eid], 1, None, None)
            got = check_subgraph(sub, [eid], stored, types)
            want = {
                e.key for e in chain[max(i - 1, 0) : i + 1] if eid in (e.source_id, e.target_id)
            }
            assert got == want, eid
        await graph.delete_edges([chain[0].key])
        await graph.delete_nodes([HOSTILE_IDS[-1]])
        assert await graph.node_ids() == set(HOSTILE_IDS[:-1])
        assert set(await graph.edge_states()) == {e.key for e in chain[1:-1]}

    async def test_graph_empty_store(self, graph: GraphCapable) -> None:
        """A fresh store lists nothing and expands to nothing."""
        assert await graph.node_ids() == set()
        assert await graph.edge_states() == {}
        sub = await graph.expand(["d1"], 2, None, None)
        assert list(sub.edges) == []
