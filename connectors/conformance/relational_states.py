"""Conformance of `RelationalCapable`'s states: what a commit writes, and the reads of it.

States round-trip field for field; a new version retires the old one and `fetch` reads the
state valid at `as_of` (with the newest clearance); `fetch_heads` agrees with `fetch`,
and `fetch_versions` reads exactly the versions asked for;
tombstones; chunks loaded back with their state's metadata; live ids by prefix, taken
literally; and a commit that reuses a version fails whole, writing nothing.
"""

from __future__ import annotations

import dataclasses

import pytest
import pytest_asyncio

from connectors.base import Connector, RelationalCapable
from connectors.conformance.data import HOSTILE_IDS, edge, rows, state
from connectors.conformance.fixtures import ConformanceBase, Harness, claim
from connectors.contract.errors import ConnectorError
from connectors.contract.records import OPEN, ChunkRecord
from connectors.contract.system_of_record import UNREAD, StateHead, WriteBatch


class RelationalStatesConformance(ConformanceBase):
    """States, versions, clearances and chunks of connectors that claim `RelationalCapable`."""

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

    async def test_relational_heads_are_those_of_fetch(
        self, relational: RelationalCapable, harness: Harness
    ) -> None:
        """`fetch_heads` gives `fetch`'s states without their payloads, now and as of any time.

        Covers a reclassified element (the newest clearance rides on an old state), a
        tombstone, a scoped element, hostile and unknown ids, and an empty request.
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
            expected = {eid: StateHead.of(s) for eid, s in whole.items()}
            assert await relational.fetch_heads(ids, as_of) == expected, f"as_of={as_of}"
            # Without filter values: the same heads, their values unread (or read anyway).
            bare = await relational.fetch_heads(ids, as_of, filter_values=False)
            assert set(bare) == set(expected)
            for eid, head in bare.items():
                values = head.filter_values
                if values is not UNREAD:
                    assert values == expected[eid].filter_values
                full = dataclasses.replace(head, filter_values=expected[eid].filter_values)
                assert full == expected[eid], f"as_of={as_of}"
        assert (await relational.fetch_heads(["e"], 150))["e"].latest_sensitivity_rank == 3
        assert (await relational.fetch_heads(["t"], None))["t"].tombstone is True
        assert await relational.fetch_heads([], None) == {}

    async def test_relational_versions_are_exact(self, relational: RelationalCapable) -> None:
        """`fetch_versions` reads each head's own version, whole, with the newest clearance.

        A head read before a new version was written still gets its own (older) state; the
        newest clearance is the one now (so a reclassified element can be hidden again); a
        version that does not exist is left out; hostile ids are data.
        """
        await relational.commit(
            WriteBatch(
                states=[state("e", 1, 100), *(state(i, 1, 100) for i in HOSTILE_IDS)], hlc=100
            )
        )
        before = await relational.fetch_heads(["e", *HOSTILE_IDS], None)
        reclassified = state("e", 2, 200, sensitivity_rank=3, scope="project:b")
        await relational.commit(WriteBatch(states=[reclassified], retire=[("e", 1, 200)], hlc=200))
        got = await relational.fetch_versions(list(before.values()))
        assert set(got) == {"e", *HOSTILE_IDS}
        assert got["e"] == (await relational.fetch(["e"], 150))["e"]
        assert got["e"].version == 1
        assert got["e"].payload == state("e", 1, 100).payload
        assert (got["e"].latest_sensitivity_rank, got["e"].latest_scope) == (3, "project:b")
        for hostile in HOSTILE_IDS:
            assert got[hostile] == (await relational.fetch([hostile], None))[hostile]
        missing = dataclasses.replace(before["e"], version=9)
        assert await relational.fetch_versions([missing]) == {}
        assert await relational.fetch_versions([]) == {}

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
        """Chunks come back once each, with text, their state's metadata and embeddings.

        Asked without embeddings, the same records with none.
        """
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
        without = await relational.load_chunks([("e", 1), ("missing", 1)], embeddings=False)
        assert [dataclasses.replace(c, filter_values=dict(c.filter_values)) for c in without] == [
            dataclasses.replace(c, embedding=None, filter_values=dict(c.filter_values))
            for c in sorted(loaded, key=lambda c: c.index)
        ]
        assert await relational.load_chunks([]) == []

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
