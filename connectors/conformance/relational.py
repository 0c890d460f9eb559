"""Conformance of `RelationalCapable`, the system of record: states, versions, edges, outbox."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

import pytest
import pytest_asyncio

from connectors.base import Connector, RelationalCapable
from connectors.conformance.data import HOSTILE_IDS, edge, rows, state
from connectors.conformance.fixtures import ConformanceBase, Harness, claim
from connectors.contract.errors import ConnectorError
from connectors.contract.graph_shape import ShapeClearance
from connectors.contract.records import OPEN, ChunkRecord, GraphEdge
from connectors.contract.system_of_record import OutboxItem, StateClearance, WriteBatch, chunk_id

STORES = ("vector:v", "graph:g")
COUNT_KEYS = ("states", "elements", "chunks", "edges", "pending")


def outbox_view(items: Sequence[OutboxItem]) -> list[tuple[str, tuple[str | int, ...]]]:
    """Kind and key of outbox items, keys normalised (`(id, version)` or an edge key)."""
    out: list[tuple[str, tuple[str | int, ...]]] = []
    for item in items:
        if item.kind == "state":
            out.append(("state", (str(item.key[0]), int(item.key[1]))))
        else:
            out.append(("edge", tuple(str(part) for part in item.key)))
    return out


def edge_set(edges: Sequence[GraphEdge]) -> set[tuple[str, str, str, int, int]]:
    """Edges as comparable tuples, validity included."""
    return {(e.source_id, e.relation, e.target_id, e.valid_from, e.valid_to) for e in edges}


class RelationalConformance(ConformanceBase):
    """Tests for connectors that claim `RelationalCapable` (skipped for the others)."""

    @pytest_asyncio.fixture
    async def relational(self, harness: Harness) -> RelationalCapable:
        """A fresh connector as RelationalCapable, or a skip naming the capability."""
        return claim(await harness.new(), RelationalCapable)

    async def test_relational_commit_then_latest_states(
        self, relational: RelationalCapable, harness: Harness
    ) -> None:
        """Committed states come back field for field; payloads and values round-trip."""
        payload = {
            "element_id": "e1",
            "text": 'naïve 東京 "quoted" \\ back',
            "tags": ["a", "b"],
            "nested": {"n": 1, "f": 0.5, "ok": True, "none": None},
            "big": 2**53,
        }
        values = {"element_type": "Document", "status": "accepted", "year": 2021, "score": 0.25}
        s1 = state("e1", 1, 100, payload=payload, filter_values={**values, "draft": False})
        s2 = state("e2", 1, 101, element_type="Person", sensitivity_rank=2, scope="project:a")
        chunks = rows("e1", 1, ["alpha", "beta"], harness.dimension)
        await relational.commit(WriteBatch(states=[s1, s2], chunks=chunks, hlc=101))
        assert await relational.latest_states(["e1", "e2", "missing", "e1"]) == {
            "e1": s1,
            "e2": s2,
        }
        assert await relational.fetch(["e2", "missing"], None) == {"e2": s2}
        assert await relational.latest_states([]) == {}
        assert await relational.fetch([], None) == {}

    async def test_relational_versions_and_as_of(
        self, relational: RelationalCapable, harness: Harness
    ) -> None:
        """A new version retires the old one; `fetch` reads the state valid at `as_of`."""
        d = harness.dimension
        v1 = state("e", 1, 100)
        await relational.commit(WriteBatch(states=[v1], chunks=rows("e", 1, ["one"], d), hlc=100))
        v2 = state("e", 2, 200, sensitivity_rank=2, scope="project:a")
        await relational.commit(
            WriteBatch(
                states=[v2], chunks=rows("e", 2, ["two"], d), retire=[("e", 1, 200)], hlc=200
            )
        )
        assert await relational.latest_states(["e"]) == {"e": v2}
        assert await relational.fetch(["e"], None) == {"e": v2}
        old = dataclasses.replace(
            v1, valid_to=200, latest_sensitivity_rank=2, latest_scope="project:a"
        )
        assert await relational.fetch(["e"], 150) == {"e": old}, "old state, newest clearance"
        assert await relational.fetch(["e"], 199) == {"e": old}
        assert await relational.fetch(["e"], 200) == {"e": v2}
        assert await relational.fetch(["e"], 99) == {}
        [first] = await relational.load_chunks([("e", 1)])
        assert (first.chunk_id, first.valid_from, first.valid_to) == ("e@1#0", 100, 200)
        assert (first.sensitivity_rank, first.scope) == (0, None)
        [second] = await relational.load_chunks([("e", 2)])
        assert (second.chunk_id, second.valid_from, second.valid_to) == ("e@2#0", 200, OPEN)
        assert (second.sensitivity_rank, second.scope) == (2, "project:a")
        assert await relational.expected_chunks() == {"e@1#0": 200, "e@2#0": OPEN}
        assert await relational.latest_versions() == {"e": 2}

    async def test_relational_clearances_are_those_of_fetch(
        self, relational: RelationalCapable, harness: Harness
    ) -> None:
        """`fetch_clearances` gives `fetch`'s clearance fields, now and as of any time.

        `fetch_with_clearances` gives both reads at once. Covers a reclassified element (the
        newest clearance rides on an old state), a tombstone, a scoped element, hostile and
        unknown ids, and an empty request.
        """
        d = harness.dimension
        states = [
            state("e", 1, 100),
            state("t", 1, 100, scope="project:a"),
            *(state(i, 1, 100, sensitivity_rank=1) for i in HOSTILE_IDS),
        ]
        await relational.commit(WriteBatch(states=states, chunks=rows("e", 1, ["one"], d), hlc=100))
        reclassified = state("e", 2, 200, sensitivity_rank=3, scope="project:b")
        tomb = state("t", 2, 250, tombstone=True)
        await relational.commit(
            WriteBatch(states=[reclassified, tomb], retire=[("e", 1, 200), ("t", 1, 250)], hlc=250)
        )
        ids = ["e", "t", *HOSTILE_IDS, "missing"]
        for as_of in (None, 99, 100, 150, 200, 249, 250, 10_000):
            whole = await relational.fetch(ids, as_of)
            expected = {eid: StateClearance.of(s) for eid, s in whole.items()}
            assert await relational.fetch_clearances(ids, as_of) == expected, f"as_of={as_of}"
            # Both reads in one call give what each gives alone, either side empty or not.
            whole_ids, clearance_ids = ids[::2], ids[1::2]
            assert await relational.fetch_with_clearances(whole_ids, clearance_ids, as_of) == (
                await relational.fetch(whole_ids, as_of),
                await relational.fetch_clearances(clearance_ids, as_of),
            ), f"as_of={as_of}"
            assert await relational.fetch_with_clearances([], ids, as_of) == ({}, expected)
            assert await relational.fetch_with_clearances(ids, [], as_of) == (whole, {})
        assert (await relational.fetch_clearances(["e"], 150))["e"].latest_sensitivity_rank == 3
        assert (await relational.fetch_clearances(["t"], None))["t"].tombstone is True
        assert await relational.fetch_clearances([], None) == {}

    async def test_relational_tombstones(self, relational: RelationalCapable) -> None:
        """A tombstone is the newest state: listed, fetched, but no longer a live element."""
        await relational.commit(WriteBatch(states=[state("e", 1, 100), state("f", 1, 100)]))
        tomb = state("e", 2, 300, tombstone=True)
        await relational.commit(WriteBatch(states=[tomb], retire=[("e", 1, 300)], hlc=300))
        assert await relational.latest_states(["e"]) == {"e": tomb}
        assert await relational.fetch(["e"], None) == {"e": tomb}
        assert (await relational.fetch(["e"], 250))["e"].version == 1
        assert await relational.live_element_ids("") == ["f"]
        assert await relational.latest_versions() == {"e": 2, "f": 1}
        counts = await relational.counts()
        assert (counts["states"], counts["elements"]) == (3, 1)

    async def test_relational_load_chunks_round_trip(
        self, relational: RelationalCapable, harness: Harness
    ) -> None:
        """Chunks come back once each, with embeddings, text and their state's metadata."""
        texts = ["naïve 東京 'quoted'", "second", ""]
        chunk_rows = rows("e", 1, texts, harness.dimension)
        s = state("e", 1, 100, sensitivity_rank=1, scope="project:a", filter_values={"year": 2020})
        await relational.commit(WriteBatch(states=[s], chunks=chunk_rows, hlc=100))
        loaded = await relational.load_chunks([("e", 1), ("e", 1), ("missing", 1)])
        assert sorted(c.chunk_id for c in loaded) == [r.chunk_id for r in chunk_rows]
        for row in chunk_rows:
            [got] = [c for c in loaded if c.chunk_id == row.chunk_id]
            want = ChunkRecord(
                chunk_id=row.chunk_id,
                element_id="e",
                version=1,
                index=row.index,
                text=row.text,
                embedding=got.embedding,
                element_type="Document",
                name=s.name,
                sensitivity_rank=1,
                scope="project:a",
                valid_from=100,
                valid_to=OPEN,
                filter_values={"year": 2020},
            )
            assert dataclasses.replace(got, filter_values=dict(got.filter_values)) == want
            assert got.embedding is not None
            assert row.embedding is not None
            assert list(got.embedding) == pytest.approx(list(row.embedding), abs=1e-6)
        assert await relational.load_chunks([]) == []

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

    async def test_relational_outbox(self, relational: RelationalCapable) -> None:
        """One entry per store for every state and edge a commit touches; ack; enqueue."""
        await relational.commit(
            WriteBatch(
                states=[state("a", 1, 100), state("b", 1, 100)],
                edges=[edge("a", "partOf", "b")],
                stores=STORES,
                hlc=100,
            )
        )
        first = {("state", ("a", 1)), ("state", ("b", 1)), ("edge", ("a", "partOf", "b"))}
        for store in STORES:
            items = await relational.pending(store, 100)
            assert set(outbox_view(items)) == first
            assert len(items) == 3
            assert all(i.store == store for i in items)
        assert await relational.pending("text:none", 10) == []
        everything = await relational.pending("vector:v", 100)
        assert [i.seq for i in everything] == sorted({i.seq for i in everything}), "oldest first"
        assert await relational.pending("vector:v", 2) == everything[:2]
        # A retired state is touched too: its chunks' validity changed.
        await relational.commit(
            WriteBatch(states=[state("a", 2, 200)], retire=[("a", 1, 200)], stores=STORES, hlc=200)
        )
        later = await relational.pending("vector:v", 100)
        assert later[:3] == everything
        assert set(outbox_view(later[3:])) == {("state", ("a", 1)), ("state", ("a", 2))}
        assert await relational.pending_counts() == {"vector:v": 5, "graph:g": 5}
        await relational.acknowledge("vector:v", later[:2])
        await relational.acknowledge("vector:v", [])
        assert await relational.pending("vector:v", 100) == later[2:]
        assert len(await relational.pending("graph:g", 100)) == 5
        assert await relational.pending_counts() == {"vector:v": 3, "graph:g": 5}
        await relational.enqueue("vector:v", "state", [("a", 1)])
        await relational.enqueue("vector:v", "edge", [("a", "partOf", "b")])
        await relational.enqueue("vector:v", "state", [])
        again = await relational.pending("vector:v", 100)
        assert again[:3] == later[2:]
        assert outbox_view(again[3:]) == [("state", ("a", 1)), ("edge", ("a", "partOf", "b"))]
        assert min(i.seq for i in again[3:]) > max(i.seq for i in later)
        assert (await relational.counts())["pending"] == 10
        await relational.acknowledge("vector:v", again)
        await relational.acknowledge("graph:g", await relational.pending("graph:g", 100))
        assert await relational.pending_counts() == {}

    async def test_relational_last_hlc(self, relational: RelationalCapable) -> None:
        """`last_hlc` is the highest batch HLC committed; it never goes back; 0 when empty."""
        assert await relational.last_hlc() == 0
        await relational.commit(WriteBatch(states=[state("a", 1, 500)], hlc=500))
        assert await relational.last_hlc() == 500
        await relational.commit(WriteBatch(states=[state("b", 1, 300)], hlc=300))
        assert await relational.last_hlc() == 500
        await relational.commit(WriteBatch(states=[state("c", 1, 400)]))
        assert await relational.last_hlc() == 500
        await relational.commit(WriteBatch(edges=[edge("a", "relatedTo", "b", 900)], hlc=900))
        assert await relational.last_hlc() == 900

    async def test_relational_counts(self, relational: RelationalCapable, harness: Harness) -> None:
        """Counts: every state, live elements, every chunk, current edges, pending entries."""
        d = harness.dimension
        await relational.commit(
            WriteBatch(
                states=[state("a", 1, 100), state("b", 1, 100), state("c", 1, 100)],
                chunks=[*rows("a", 1, ["x", "y"], d), *rows("b", 1, ["z"], d)],
                edges=[edge("a", "partOf", "b"), edge("b", "partOf", "c", 100, 150)],
                stores=["vector:v"],
                hlc=100,
            )
        )
        await relational.commit(
            WriteBatch(
                states=[state("c", 2, 200, tombstone=True)],
                retire=[("c", 1, 200)],
                stores=["vector:v"],
                hlc=200,
            )
        )
        counts = dict(await relational.counts())
        assert {k: counts.get(k) for k in COUNT_KEYS} == {
            "states": 4,
            "elements": 2,
            "chunks": 3,
            "edges": 1,
            "pending": 7,  # 3 states + 2 edges, then c@2 and the retired c@1
        }

    async def test_relational_live_element_ids_by_prefix(
        self, relational: RelationalCapable
    ) -> None:
        """Live ids starting with the prefix, exactly: no LIKE wildcards, case-sensitive."""
        ids = [
            "repo:a.md",
            "repo:b.md",
            "repo:gone.md",
            "repo:sub/g.md",
            "repox:c.md",
            "REPO:d.md",
            "rep%:e",
            "rep_:f",
            "repo\\:h",
        ]
        await relational.commit(WriteBatch(states=[state(i, 1, 100) for i in ids]))
        await relational.commit(
            WriteBatch(
                states=[state("repo:gone.md", 2, 200, tombstone=True)],
                retire=[("repo:gone.md", 1, 200)],
            )
        )
        live = [i for i in ids if i != "repo:gone.md"]
        for prefix in ("repo:", "rep%", "rep_", "repo", "REPO:", "", "nothing", "repo\\"):
            got = await relational.live_element_ids(prefix)
            assert len(got) == len(set(got)), prefix
            assert sorted(got) == sorted(i for i in live if i.startswith(prefix)), prefix

    async def test_relational_duplicate_version_fails_atomically(
        self, relational: RelationalCapable, harness: Harness
    ) -> None:
        """Committing an existing `(element_id, version)` raises ConnectorError; nothing lands."""
        d = harness.dimension
        await relational.commit(
            WriteBatch(
                states=[state("a", 1, 100)],
                chunks=rows("a", 1, ["x"], d),
                stores=["vector:v"],
                hlc=100,
            )
        )

        async def snapshot() -> tuple[object, ...]:
            return (
                await relational.latest_versions(),
                await relational.expected_chunks(),
                await relational.expected_edges(),
                await relational.pending_counts(),
                await relational.last_hlc(),
                dict(await relational.counts()),
                await relational.fetch(["a"], None),
            )

        before = await snapshot()
        with pytest.raises(ConnectorError) as raised:
            await relational.commit(
                WriteBatch(
                    states=[state("b", 1, 999), state("a", 1, 999)],
                    chunks=rows("b", 1, ["y"], d),
                    retire=[("a", 1, 999)],
                    edges=[edge("b", "partOf", "a", 999)],
                    stores=["vector:v"],
                    hlc=999,
                )
            )
        assert isinstance(relational, Connector)
        assert raised.value.connector == relational.name, "the error names the connector"
        assert await snapshot() == before
        assert await relational.latest_states(["b"]) == {}

    async def test_relational_hostile_ids_round_trip(
        self, relational: RelationalCapable, harness: Harness
    ) -> None:
        """Quotes, SQL, unicode, `@`/`#`, LIKE wildcards in ids are data, everywhere."""
        d = harness.dimension
        states = [state(i, 1, 100, scope="project:it's") for i in HOSTILE_IDS]
        chunk_rows = [r for i in HOSTILE_IDS for r in rows(i, 1, [f"text of {i}"], d)]
        chain = [edge(a, "relatedTo", b) for a, b in itertools.pairwise(HOSTILE_IDS)]
        await relational.commit(
            WriteBatch(states=states, chunks=chunk_rows, edges=chain, stores=["vector:v"], hlc=100)
        )
        by_id = {s.element_id: s for s in states}
        assert await relational.latest_states(HOSTILE_IDS) == by_id
        assert await relational.fetch(HOSTILE_IDS, 100) == by_id
        loaded = await relational.load_chunks([(i, 1) for i in HOSTILE_IDS])
        assert {(c.chunk_id, c.element_id, c.text) for c in loaded} == {
            (chunk_id(i, 1, 0), i, f"text of {i}") for i in HOSTILE_IDS
        }
        assert await relational.expected_chunks() == {chunk_id(i, 1, 0): OPEN for i in HOSTILE_IDS}
        assert edge_set(await relational.load_edges([e.key for e in chain])) == edge_set(chain)
        assert edge_set(await relational.live_edges(HOSTILE_IDS[:1])) == edge_set(chain[:1])
        assert await relational.expected_edges() == {e.key: (100, OPEN) for e in chain}
        assert await relational.latest_versions() == dict.fromkeys(HOSTILE_IDS, 1)
        pending = outbox_view(await relational.pending("vector:v", 1000))
        assert set(pending) == {("state", (i, 1)) for i in HOSTILE_IDS} | {
            ("edge", e.key) for e in chain
        }
        for prefix in HOSTILE_IDS:
            got = await relational.live_element_ids(prefix)
            assert sorted(got) == sorted(i for i in HOSTILE_IDS if i.startswith(prefix)), prefix

    async def test_relational_empty_store(self, relational: RelationalCapable) -> None:
        """A fresh store: zero counts, empty listings, HLC 0; empty inputs are fine."""
        counts = dict(await relational.counts())
        assert {k: counts.get(k) for k in COUNT_KEYS} == dict.fromkeys(COUNT_KEYS, 0)
        assert await relational.expected_chunks() == {}
        assert await relational.expected_edges() == {}
        assert await relational.latest_versions() == {}
        assert await relational.pending_counts() == {}
        assert await relational.last_hlc() == 0
        assert await relational.live_element_ids("") == []
        assert await relational.pending("vector:v", 10) == []
        await relational.acknowledge("vector:v", [])
        await relational.enqueue("vector:v", "state", [])
        assert await relational.pending_counts() == {}
