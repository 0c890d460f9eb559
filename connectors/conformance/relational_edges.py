"""Conformance of `RelationalCapable`'s edges and graph shape.

Edges are upserted by key and read with their current validity; the graph shape (assets,
bridges, asset pairs) and the selective bridges are counted over what a clearance may see;
the tuning document chosen from them is kept as written.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest_asyncio

from connectors.base import RelationalCapable
from connectors.conformance.data import edge, state
from connectors.conformance.fixtures import ConformanceBase, Harness, claim
from connectors.contract.graph_shape import ShapeClearance
from connectors.contract.records import OPEN, GraphEdge
from connectors.contract.system_of_record import WriteBatch


def edge_set(edges: Sequence[GraphEdge]) -> set[tuple[str, str, str, int, int]]:
    """Edges as comparable tuples, validity included."""
    return {(e.source_id, e.relation, e.target_id, e.valid_from, e.valid_to) for e in edges}


class RelationalEdgesConformance(ConformanceBase):
    """Edges, graph shape, bridges and tuning of connectors that claim `RelationalCapable`."""

    @pytest_asyncio.fixture
    async def relational(self, harness: Harness) -> RelationalCapable:
        """A fresh connector as RelationalCapable, or a skip naming the capability."""
        return claim(await harness.new(), RelationalCapable)

    async def test_relational_edges(self, relational: RelationalCapable) -> None:
        """Edges are upserted by key; `live_edges` and `load_edges` read current validity."""
        ab, bc = edge("a", "partOf", "b"), edge("b", "relatedTo", "c")
        ca = edge("c", "relatedTo", "a", 100, 150)
        states = [state(x, 1, 100) for x in "abc"]
        await relational.commit(WriteBatch(states=states, edges=[ab, bc, ca], hlc=100))
        assert edge_set(await relational.live_edges(["b"])) == edge_set([ab, bc])
        assert edge_set(await relational.live_edges(["a"])) == edge_set([ab])
        assert await relational.live_edges(["missing"]) == []
        assert await relational.live_edges([]) == []
        loaded = await relational.load_edges([ab.key, ca.key, ("x", "y", "z"), ab.key])
        assert sorted(e.key for e in loaded) == sorted([ab.key, ca.key])
        assert edge_set(loaded) == edge_set([ab, ca])
        closed = edge("a", "partOf", "b", 100, 300)
        await relational.commit(WriteBatch(edges=[closed], hlc=300))
        assert edge_set(await relational.load_edges([ab.key])) == edge_set([closed])
        assert await relational.live_edges(["a"]) == []
        assert await relational.expected_edges() == {
            closed.key: (100, 300),
            bc.key: (100, OPEN),
            ca.key: (100, 150),
        }
        assert (await relational.counts())["edges"] == 1
        assert await relational.load_edges([]) == []

    async def test_relational_graph_shape(self, relational: RelationalCapable) -> None:
        """Bridges are nodes adjacent to two or more current assets; pairs are d * (d - 1)."""
        everything = ShapeClearance(max_sensitivity_rank=9, all_projects=True)
        assert (await relational.graph_shape(["Document"], everything)).to_dict() == {
            "assets": 0,
            "edges": 0,
            "bridges": 0,
            "asset_pairs": 0,
            "widest_bridge": 0,
            "neighbours_per_asset": 0.0,
        }
        documents = [state(x, 1, 100) for x in ("d1", "d2", "d3", "d4")]
        others = [
            state("e1", 1, 100, element_type="Person"),
            state("e2", 1, 100, element_type="Person"),
            state("gone", 1, 100, tombstone=True),
        ]
        edges = [
            edge("d1", "mentions", "e1"),  # e1 bridges d1, d2, d3: 6 ordered pairs
            edge("d2", "mentions", "e1"),
            edge("e1", "mentions", "d3"),  # either direction counts
            edge("d1", "relatedTo", "d4"),  # d1 bridges d4 alone, d4 bridges d1 alone
            edge("d2", "mentions", "e2"),  # e2 touches one current asset and a tombstone
            edge("gone", "mentions", "e2"),
            edge("d3", "mentions", "e2", 100, 150),  # closed: not current
            edge("d4", "relatedTo", "d4"),  # a self-loop links nothing
        ]
        await relational.commit(WriteBatch(states=[*documents, *others], edges=edges, hlc=100))
        shape = await relational.graph_shape(["Document"], everything)
        assert (shape.assets, shape.edges) == (4, 5)  # not the tombstone's, the closed one
        assert (shape.bridges, shape.asset_pairs, shape.widest_bridge) == (1, 6, 3)
        assert shape.neighbours_per_asset == 1.5
        people = await relational.graph_shape(["Person"], everything)
        assert (people.assets, people.bridges, people.asset_pairs) == (2, 1, 2)  # d2 links both

    async def test_relational_graph_shape_per_clearance(
        self, relational: RelationalCapable
    ) -> None:
        """Only states the clearance may see, and edges between them, count."""
        states = [
            state("p1", 1, 100),
            state("p2", 1, 100),
            state("secret", 1, 100, sensitivity_rank=2),
            state("scoped", 1, 100, scope="project:x"),
            state("hub", 1, 100, element_type="Person", sensitivity_rank=2),
        ]
        edges = [
            edge("p1", "mentions", "secret"),  # a restricted asset bridges p1 and p2
            edge("p2", "mentions", "secret"),
            edge("p1", "mentions", "hub"),  # a restricted node bridges p1, p2 and scoped
            edge("p2", "mentions", "hub"),
            edge("scoped", "mentions", "hub"),
            edge("scoped", "relatedTo", "p1"),  # a project's asset linked to a public one
        ]
        await relational.commit(WriteBatch(states=states, edges=edges, hlc=100))
        public = await relational.graph_shape(["Document"], ShapeClearance(0))
        assert (public.assets, public.edges, public.bridges, public.asset_pairs) == (2, 0, 0, 0)
        project = await relational.graph_shape(["Document"], ShapeClearance(0, ("project:x",)))
        assert (project.assets, project.edges, project.bridges) == (3, 1, 0)
        restricted = ShapeClearance(2, all_projects=True)
        everything = await relational.graph_shape(["Document"], restricted)
        assert (everything.assets, everything.edges) == (4, 6)
        # secret bridges p1, p2 (2 pairs); hub bridges p1, p2, scoped (6); p1 bridges
        # secret, scoped (2); p2 bridges secret alone; scoped bridges p1 alone.
        assert (everything.bridges, everything.asset_pairs, everything.widest_bridge) == (3, 10, 3)

    async def test_relational_bridges(self, relational: RelationalCapable) -> None:
        """Selective bridges by id, and their assets, as the clearance sees them."""
        states = [
            *(state(x, 1, 100) for x in ("d1", "d2", "d3", "d4")),
            state("secret", 1, 100, sensitivity_rank=2),
            state("e1", 1, 100, element_type="Person"),
            state("e2", 1, 100, element_type="Person"),
            state("hub", 1, 100, element_type="Person"),
        ]
        edges = [
            edge("d1", "mentions", "e1"),  # e1: d1, d2 (and secret, for those cleared)
            edge("e1", "mentions", "d2"),
            edge("secret", "mentions", "e1"),
            edge("d3", "mentions", "e2"),  # e2: one asset, no bridge
            *(edge(x, "partOf", "hub") for x in ("d1", "d2", "d3", "d4")),  # four assets
            edge("d4", "mentions", "e2", 100, 150),  # closed
        ]
        await relational.commit(WriteBatch(states=states, edges=edges, hlc=100))
        public = ShapeClearance(0)
        everything = ShapeClearance(max_sensitivity_rank=9, all_projects=True)
        # d1 and d2 bridge each other through nothing direct; e1 and hub are the bridges.
        assert await relational.bridges(["Document"], public, 3) == ["e1"]
        assert await relational.bridges(["Document"], public, 4) == ["e1", "hub"]
        assert await relational.bridges(["Document"], everything, 3) == ["e1"]
        assert await relational.bridge_assets(
            ["e1", "hub", "e2", "missing"], ["Document"], public
        ) == {
            "e1": ["d1", "d2"],
            "e2": ["d3"],
            "hub": ["d1", "d2", "d3", "d4"],
        }
        seen = await relational.bridge_assets(["e1"], ["Document"], everything)
        assert seen == {"e1": ["d1", "d2", "secret"]}
        assert await relational.bridge_assets([], ["Document"], everything) == {}

    async def test_relational_tuning(self, relational: RelationalCapable) -> None:
        """The tuning document is kept as written; a second replaces the first."""
        assert await relational.tuning() is None
        await relational.record_tuning('{"centrality_weight": 8}')
        assert await relational.tuning() == '{"centrality_weight": 8}'
        await relational.record_tuning('{"centrality_weight": 2, "note": "é"}')
        assert await relational.tuning() == '{"centrality_weight": 2, "note": "é"}'
        await relational.record_tuning(None)
        assert await relational.tuning() is None
        await relational.record_tuning(None)  # forgetting twice is no error
        assert await relational.tuning() is None
