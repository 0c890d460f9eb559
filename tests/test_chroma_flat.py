"""The embedded Chroma store's exact index (ADR 62): small stores are searched exactly.

The index is the directory's vectors in one matrix, loaded by the first search and kept up to
date by this process's writes; past its limit, or over a directory whose rows lack vectors
(written before it kept them), Chroma's HNSW index answers as before. A real `PersistentClient`
throughout; the conformance suite holds both ways to the contract.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest

from connectors.chroma.connector import ChromaConnector
from connectors.chroma.flat import FlatIndex
from connectors.conformance.data import chunk, exact_top, random_vectors
from connectors.contract.records import ChunkRecord, SearchFilter

DIMENSION = 16
PUBLIC = SearchFilter(max_sensitivity_rank=0)
T = TypeVar("T")


def _corpus(n: int, *, first: int = 0, seed: int = 21) -> list[ChunkRecord]:
    return [
        chunk(f"doc-{first + i}", embedding=vector, sensitivity_rank=0 if i % 3 else 2)
        for i, vector in enumerate(random_vectors(n, DIMENSION, seed=seed))
    ]


def _with_store(
    folder: Path, work: Callable[[ChromaConnector], Awaitable[T]], flat_limit: int | None = None
) -> T:
    async def run() -> T:
        store = ChromaConnector(path=folder, flat_limit=flat_limit)
        await store.connect()
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(run())


async def _ids(store: ChromaConnector, query: Sequence[float], k: int) -> list[str]:
    return [hit.chunk_id for hit in await store.vector_search(query, k, PUBLIC)]


# -- the index alone ----------------------------------------------------------------------
def test_nearest_is_the_exact_cosine_order_ties_in_written_order() -> None:
    vectors = np.asarray(random_vectors(50, DIMENSION, seed=3), dtype=np.float32)
    vectors[7] = vectors[3] * 2.0  # the same direction: a tie, at any length
    ids = [f"c{i}" for i in range(50)]
    index = FlatIndex.of(ids, [v.tobytes() for v in vectors])
    query = vectors[3] + 0.01
    found, distances = index.nearest(query.tolist(), 10)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosines = unit @ (query / np.linalg.norm(query))
    expected = sorted(range(50), key=lambda i: (-round(float(cosines[i]), 5), i))[:10]
    assert found == [ids[i] for i in expected]
    assert found.index("c3") < found.index("c7")  # the tie: the one written first
    assert distances == pytest.approx([1 - float(cosines[i]) for i in expected], abs=1e-5)
    assert index.nearest(query.tolist(), 500)[0][:10] == found  # n beyond the rows: all
    assert index.nearest(query.tolist(), 0) == ([], [])


def test_writes_make_new_indexes_and_leave_the_old_one_as_it_was() -> None:
    vectors = random_vectors(6, DIMENSION, seed=4)
    index = FlatIndex.of(["a", "b"], [np.asarray(v, np.float32).tobytes() for v in vectors[:2]])
    grown = index.with_chunks(["b", "c", "d"], vectors[1:4])
    assert grown.ids == ("a", "b", "c", "d")
    assert index.ids == ("a", "b")
    assert grown.with_chunks(["a"], [vectors[5]]) is grown  # held ids are left as they are
    assert grown.without(["b", "zzz"]).ids == ("a", "c", "d")
    assert grown.only(["d", "a"]).ids == ("a", "d")
    with pytest.raises(ValueError, match="dimensions"):
        index.nearest([0.1, 0.2], 1)


# -- the connector ------------------------------------------------------------------------
def test_a_small_store_is_searched_exactly_and_sees_its_own_writes(tmp_path: Path) -> None:
    corpus = _corpus(120)
    query = random_vectors(1, DIMENSION, seed=22)[0]
    newcomer = chunk("doc-new", embedding=query)  # the nearest there can be

    async def work(store: ChromaConnector) -> None:
        await store.upsert_chunks(corpus)
        assert store.searches_exactly is None  # read by the first search
        assert await _ids(store, query, 10) == exact_top(query, corpus, 10, PUBLIC)
        assert store.searches_exactly is True
        await store.upsert_chunks([newcomer])
        assert (await _ids(store, query, 10))[0] == newcomer.chunk_id
        await store.delete_chunks(["doc-new"])
        assert await _ids(store, query, 10) == exact_top(query, corpus, 10, PUBLIC)
        await store.delete_chunk_ids([corpus[1].chunk_id])
        rest = [c for c in corpus if c is not corpus[1]]
        assert await _ids(store, query, 10) == exact_top(query, rest, 10, PUBLIC)

    _with_store(tmp_path, work)
    # Opened again: the index comes from the directory's vectors, with the same answer.
    remaining = [c for c in corpus if c is not corpus[1]]
    assert _with_store(tmp_path, lambda store: _ids(store, query, 10)) == exact_top(
        query, remaining, 10, PUBLIC
    )


def test_past_the_limit_chroma_answers(tmp_path: Path) -> None:
    """A store that grows past the limit drops the exact index; answers stay the nearest."""
    corpus = _corpus(40) + _corpus(40, first=40, seed=23)
    query = random_vectors(1, DIMENSION, seed=24)[0]

    async def work(store: ChromaConnector) -> list[bool | None]:
        modes: list[bool | None] = []
        await store.upsert_chunks(corpus[:40])
        await _ids(store, query, 5)
        modes.append(store.searches_exactly)
        await store.upsert_chunks(corpus[40:])
        found = await _ids(store, query, 5)
        modes.append(store.searches_exactly)
        assert len(set(found) & set(exact_top(query, corpus, 5, PUBLIC))) >= 4
        return modes

    assert _with_store(tmp_path, work, flat_limit=60) == [True, False]
    assert _with_store(tmp_path, lambda s: _ids(s, query, 5), flat_limit=60)
    opened: list[bool | None] = []

    async def reopened(store: ChromaConnector) -> None:
        await _ids(store, query, 5)
        opened.append(store.searches_exactly)

    _with_store(tmp_path, reopened, flat_limit=60)
    assert opened == [False]


def _drop_vectors(folder: Path, *, table: bool) -> None:
    """The directory as a release before ADR 62 left it: rows without vectors."""
    db = sqlite3.connect(folder / "uda_chunks.directory.sqlite3")
    with db:
        db.execute("DROP TABLE chunk_vectors" if table else "DELETE FROM chunk_vectors")
    db.close()


@pytest.mark.parametrize("table", [True, False])
def test_a_directory_of_an_earlier_release_gets_its_vectors_from_chroma(
    tmp_path: Path, table: bool
) -> None:
    """Opened, a small store's rows get Chroma's vectors once, and it is searched exactly."""
    corpus = _corpus(60)
    query = random_vectors(1, DIMENSION, seed=25)[0]
    _with_store(tmp_path, lambda store: store.upsert_chunks(corpus))
    _drop_vectors(tmp_path, table=table)

    async def work(store: ChromaConnector) -> tuple[list[str], bool | None]:
        return await _ids(store, query, 5), store.searches_exactly

    assert _with_store(tmp_path, work) == (exact_top(query, corpus, 5, PUBLIC), True)


def test_a_large_store_without_vectors_in_its_directory_is_searched_by_chroma(
    tmp_path: Path,
) -> None:
    """Past the limit no vector is kept or filled in: Chroma's index answers."""
    corpus = _corpus(60)
    query = random_vectors(1, DIMENSION, seed=27)[0]
    _with_store(tmp_path, lambda store: store.upsert_chunks(corpus))
    _drop_vectors(tmp_path, table=False)

    async def work(store: ChromaConnector) -> tuple[list[str], bool | None]:
        return await _ids(store, query, 5), store.searches_exactly

    found, exact = _with_store(tmp_path, work, flat_limit=50)
    assert exact is False
    assert len(set(found) & set(exact_top(query, corpus, 5, PUBLIC))) >= 4
    db = sqlite3.connect(tmp_path / "uda_chunks.directory.sqlite3")
    try:
        assert db.execute("SELECT count(*) FROM chunk_vectors").fetchone() == (0,)
    finally:
        db.close()
