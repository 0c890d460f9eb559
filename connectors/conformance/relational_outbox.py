"""Conformance of `RelationalCapable`'s bookkeeping for the derived stores.

The outbox (one entry per store for every state and edge a commit touches; pending,
acknowledge, enqueue), the last HLC, the counts, and the listings that check and sync compare
the stores with (expected chunks and edges, latest versions): on a fresh store, and with
hostile ids, which must be data everywhere.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest_asyncio

from connectors.base import RelationalCapable
from connectors.conformance.data import HOSTILE_IDS, edge, rows, state
from connectors.conformance.fixtures import ConformanceBase, Harness, claim
from connectors.conformance.relational_edges import edge_set
from connectors.contract.records import OPEN
from connectors.contract.system_of_record import OutboxItem, WriteBatch, chunk_id

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


class RelationalOutboxConformance(ConformanceBase):
    """Outbox, HLC, counts and listings of connectors that claim `RelationalCapable`."""

    @pytest_asyncio.fixture
    async def relational(self, harness: Harness) -> RelationalCapable:
        """A fresh connector as RelationalCapable, or a skip naming the capability."""
        return claim(await harness.new(), RelationalCapable)

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
        gone = (HOSTILE_IDS[0], 2, chunk_id(HOSTILE_IDS[0], 2, 0))  # no such version
        texts = await relational.chunk_texts(
            [(i, 1, chunk_id(i, 1, 0)) for i in HOSTILE_IDS] + [gone]
        )
        assert texts == {chunk_id(i, 1, 0): f"text of {i}" for i in HOSTILE_IDS}
        assert await relational.chunk_texts([]) == {}
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
