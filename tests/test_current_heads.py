"""The SQLite store's current heads in memory (connectors/sqlite/current_heads.py, ADR 56).

Every read must answer what the index answers in the same snapshot: after a reclassification
(the clearance rule depends on it), after another process's commit, after the log was pruned
past what a reader applied, and when the store is too large to be held. Each case compares
the cached read with the index read of the same ids, on a real store.
"""

from __future__ import annotations

import asyncio
import gc
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from connectors.conformance.data import state
from connectors.contract.system_of_record import WriteBatch
from connectors.sqlite import current_heads
from connectors.sqlite.connector import SQLiteConnector


async def _loaded(sor: SQLiteConnector) -> None:
    """Read once (which starts the load in the background) and wait until it is done."""
    await sor.fetch_heads(["any"], None, filter_values=False)
    current = sor._current  # pyright: ignore[reportPrivateUsage]
    for _ in range(500):
        if current.held or current.too_large:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the current heads were not loaded within 5 s")


@asynccontextmanager
async def _two_processes(path: Path) -> AsyncIterator[tuple[SQLiteConnector, SQLiteConnector]]:
    """A reader and a writer on one file: each its own cache, as two processes have."""
    reader, writer = SQLiteConnector(path), SQLiteConnector(path)
    await reader.connect()
    await writer.connect()
    try:
        yield reader, writer
    finally:
        await reader.close()
        await writer.close()


async def test_a_reclassified_element_is_read_with_its_new_clearance(tmp_path: Path) -> None:
    sor = SQLiteConnector(tmp_path / "sor.sqlite3")
    await sor.connect()
    try:
        await sor.commit(WriteBatch(states=[state(e, 1, 100) for e in ("a", "b")], hlc=100))
        await _loaded(sor)
        first = await sor.fetch_heads(["a", "b", "missing"], None, filter_values=False)
        assert set(first) == {"a", "b"}
        await sor.commit(
            WriteBatch(
                states=[state("a", 2, 200, sensitivity_rank=3, scope="project:x")],
                retire=[("a", 1, 200)],
                hlc=200,
            )
        )
        after = await sor.fetch_heads(["a", "b"], None, filter_values=False)
        assert (after["a"].version, after["a"].sensitivity_rank, after["a"].scope) == (
            2,
            3,
            "project:x",
        )
        assert (after["a"].latest_sensitivity_rank, after["a"].latest_scope) == (3, "project:x")
        assert after["b"] == first["b"]
        # A tombstone is the current state too: read, and flagged.
        await sor.commit(
            WriteBatch(states=[state("b", 2, 300, tombstone=True)], retire=[("b", 1, 300)], hlc=300)
        )
        assert (await sor.fetch_heads(["b"], None, filter_values=False))["b"].tombstone
    finally:
        await sor.close()


async def _a_at_version_1_seen_by(reader: SQLiteConnector, writer: SQLiteConnector) -> None:
    """`a` committed at version 1 by one process and read by the other, its heads loaded."""
    await writer.commit(WriteBatch(states=[state("a", 1, 100)], hlc=100))
    await _loaded(reader)
    assert (await reader.fetch_heads(["a"], None, filter_values=False))["a"].version == 1


async def test_another_process_commits_are_seen_at_the_next_read(tmp_path: Path) -> None:
    async with _two_processes(tmp_path / "sor.sqlite3") as (reader, writer):
        await _a_at_version_1_seen_by(reader, writer)
        await writer.commit(
            WriteBatch(
                states=[state("a", 2, 200, sensitivity_rank=2), state("c", 1, 200)],
                retire=[("a", 1, 200)],
                hlc=200,
            )
        )
        heads = await reader.fetch_heads(["a", "c"], None, filter_values=False)
        assert {eid: (h.version, h.sensitivity_rank) for eid, h in heads.items()} == {
            "a": (2, 2),
            "c": (1, 0),
        }


async def test_a_reader_behind_a_pruned_log_reloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(current_heads, "_KEPT", 2)
    async with _two_processes(tmp_path / "sor.sqlite3") as (reader, writer):
        await _a_at_version_1_seen_by(reader, writer)
        await writer.commit(
            WriteBatch(
                states=[state("a", 2, 200, sensitivity_rank=2)], retire=[("a", 1, 200)], hlc=200
            )
        )
        for n in range(4):  # the log keeps the last two entries: a's is pruned
            await writer.commit(WriteBatch(states=[state(f"x{n}", 1, 300 + n)], hlc=300 + n))
        head = (await reader.fetch_heads(["a"], None, filter_values=False))["a"]
        assert (head.version, head.sensitivity_rank) == (2, 2)


async def test_random_writes_read_the_same_as_the_index(tmp_path: Path) -> None:
    """Versions, reclassifications and tombstones in random order; every read compared."""
    rng = random.Random(7)
    sor = SQLiteConnector(tmp_path / "sor.sqlite3")
    await sor.connect()
    versions: dict[str, int] = {}
    try:
        await _loaded(sor)
        hlc = 100
        for _ in range(40):
            hlc += 10
            touched = rng.sample([f"e{i}" for i in range(30)], rng.randint(1, 6))
            states, retire = [], []
            for eid in touched:
                version = versions.get(eid, 0) + 1
                states.append(
                    state(
                        eid,
                        version,
                        hlc,
                        sensitivity_rank=rng.randint(0, 3),
                        scope=rng.choice([None, "project:a", "project:b"]),
                        tombstone=rng.random() < 0.1,
                    )
                )
                if version > 1:
                    retire.append((eid, version - 1, hlc))
                versions[eid] = version
            await sor.commit(WriteBatch(states=states, retire=retire, hlc=hlc))
            ids = rng.sample([f"e{i}" for i in range(35)], 12)
            cached = await sor.fetch_heads(ids, None, filter_values=False)
            indexed = await sor.fetch_heads(ids, None, filter_values=True)
            assert cached.keys() == indexed.keys()
            for eid, head in cached.items():
                assert {**vars(head), "filter_values": None} == {
                    **vars(indexed[eid]),
                    "filter_values": None,
                }
    finally:
        await sor.close()


async def test_a_store_too_large_to_hold_reads_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(current_heads, "MAX_ELEMENTS", 2)
    sor = SQLiteConnector(tmp_path / "sor.sqlite3")
    await sor.connect()
    try:
        await sor.commit(WriteBatch(states=[state(e, 1, 100) for e in "abc"], hlc=100))
        await _loaded(sor)
        heads = await sor.fetch_heads(["a", "b", "c"], None, filter_values=False)
        assert set(heads) == {"a", "b", "c"}
        assert sor._current.too_large  # pyright: ignore[reportPrivateUsage]
        await sor.commit(
            WriteBatch(
                states=[state("a", 2, 200, sensitivity_rank=3)], retire=[("a", 1, 200)], hlc=200
            )
        )
        assert (await sor.fetch_heads(["a"], None, filter_values=False))["a"].version == 2
    finally:
        await sor.close()


async def test_closing_while_the_heads_load_waits_for_the_load(tmp_path: Path) -> None:
    """The load runs on the connector's own worker threads: close() waits, nothing is left."""
    path = tmp_path / "sor.sqlite3"
    sor = SQLiteConnector(path)
    await sor.connect()
    await sor.commit(WriteBatch(states=[state(f"e{i}", 1, 100) for i in range(500)], hlc=100))
    heads = await sor.fetch_heads(["e1", "e2"], None, filter_values=False)  # starts the load
    await sor.close()
    assert set(heads) == {"e1", "e2"}
    again = SQLiteConnector(path)
    await again.connect()
    try:
        await _loaded(again)
        assert set(await again.fetch_heads(["e3", "nope"], None, filter_values=False)) == {"e3"}
    finally:
        await again.close()


async def test_the_held_heads_cost_the_garbage_collector_nothing(tmp_path: Path) -> None:
    """Held as rows of plain values, which a collection stops tracking: a service holding
    every head of a large store pays no longer pauses for them (ADR 56)."""
    sor = SQLiteConnector(tmp_path / "sor.sqlite3")
    await sor.connect()
    try:
        await sor.commit(WriteBatch(states=[state(f"e{i}", 1, 100) for i in range(200)], hlc=100))
        await _loaded(sor)
        await sor.commit(
            WriteBatch(
                states=[state("e1", 2, 200, sensitivity_rank=2)], retire=[("e1", 1, 200)], hlc=200
            )
        )
        heads = await sor.fetch_heads(["e1", "e2"], None, filter_values=False)  # catches up
        assert heads["e1"].version == 2
        held = sor._current._heads  # pyright: ignore[reportPrivateUsage]
        assert held is not None
        assert len(held) == 200
        gc.collect()
        assert not gc.is_tracked(held)
        assert not any(gc.is_tracked(row) for row in held.values())
    finally:
        await sor.close()
