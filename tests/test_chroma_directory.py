"""The embedded Chroma store's chunk directory: its only copy of the chunks' filter fields.

Built for stores from before it; lost, it fails closed until the chunks are rewritten;
searched in three ways.

Searches ask Chroma (or, for a small store, the exact index the directory's vectors make) for
ids and distances only and filter on the directory; every test runs both ways. These tests
use a real `PersistentClient` and random vectors; the conformance suite covers the contract.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

import connectors.chroma.connector as chroma_module
from connectors.chroma import directory_search
from connectors.chroma.connector import ChromaConnector
from connectors.conformance.data import chunk, exact_top, random_vectors
from connectors.contract.records import ChunkRecord, SearchFilter

DIMENSION = 16
PUBLIC = SearchFilter(max_sensitivity_rank=0)


@pytest.fixture(autouse=True, params=["exact", "hnsw"])
def nearest_from(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test twice: the small store searched exactly (ADR 62), and by Chroma's HNSW."""
    if request.param == "hnsw":
        monkeypatch.setattr(chroma_module, "FLAT_LIMIT", 0)
    return str(request.param)


def _corpus(n: int, *, public_every: int) -> list[ChunkRecord]:
    """n chunks; one in `public_every` is public, the others restricted."""
    return [
        chunk(
            f"doc-{i}",
            text=f"text of {i}",
            embedding=vector,
            sensitivity_rank=0 if i % public_every == 0 else 3,
        )
        for i, vector in enumerate(random_vectors(n, DIMENSION, seed=11))
    ]


async def _search(
    folder: Path, query: Sequence[float], k: int, search_filter: SearchFilter
) -> list[tuple[str, str]]:
    store = ChromaConnector(path=folder)
    await store.connect()
    try:
        hits = await store.vector_search(query, k, search_filter)
    finally:
        await store.close()
    return [(h.chunk_id, h.text) for h in hits]


async def _write(folder: Path, chunks: Sequence[ChunkRecord]) -> dict[str, int]:
    store = ChromaConnector(path=folder)
    await store.connect()
    try:
        await store.upsert_chunks(chunks)
        return await store.chunk_states()
    finally:
        await store.close()


def _write_as_before_directories(folder: Path, chunks: Sequence[ChunkRecord]) -> None:
    """A collection as the connector wrote it before ADR 16: metadata and documents in Chroma."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(
        path=str(folder), settings=Settings(anonymized_telemetry=False)
    )
    collection = client.get_or_create_collection(
        "uda_chunks", embedding_function=None, metadata={"hnsw:space": "cosine"}
    )
    collection.add(
        ids=[c.chunk_id for c in chunks],
        embeddings=[list(c.embedding or ()) for c in chunks],
        metadatas=[chroma_module._metadata(c) for c in chunks],  # pyright: ignore[reportPrivateUsage]
        documents=[c.text for c in chunks],
    )


def _directory_rows(folder: Path) -> dict[str, int]:
    db = sqlite3.connect(folder / "uda_chunks.directory.sqlite3")
    try:
        return dict(db.execute("SELECT chunk_id, sensitivity_rank FROM chunks"))
    finally:
        db.close()


def test_a_store_from_before_the_directory_gets_one_on_connect(tmp_path: Path) -> None:
    corpus = _corpus(120, public_every=2)
    query = random_vectors(1, DIMENSION, seed=12)[0]
    _write_as_before_directories(tmp_path, corpus)

    found = asyncio.run(_search(tmp_path, query, 10, PUBLIC))
    assert [cid for cid, _ in found] == exact_top(query, corpus, 10, PUBLIC)
    assert all(text is None for _, text in found)  # the planner reads what it shows (ADR 53)
    assert _directory_rows(tmp_path) == {c.chunk_id: c.sensitivity_rank for c in corpus}


def test_chroma_holds_vectors_only_and_a_lost_directory_fails_closed_until_rewritten(
    tmp_path: Path,
) -> None:
    corpus = _corpus(120, public_every=2)
    query = random_vectors(1, DIMENSION, seed=12)[0]
    states = asyncio.run(_write(tmp_path, corpus))
    before = asyncio.run(_search(tmp_path, query, 10, PUBLIC))
    assert [cid for cid, _ in before] == exact_top(query, corpus, 10, PUBLIC)

    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(
        path=str(tmp_path), settings=Settings(anonymized_telemetry=False)
    )
    stored = client.get_collection("uda_chunks").get(include=["metadatas", "documents"])
    assert len(stored["ids"]) == len(corpus)
    assert not any(stored["metadatas"])  # ADR 52
    assert not any(stored["documents"])

    # The directory is the only copy of the filter fields: without it no vector may
    # pass a filter, and each is reported unusable, so that a check names it.
    (tmp_path / "uda_chunks.directory.sqlite3").unlink()
    assert asyncio.run(_search(tmp_path, query, 10, PUBLIC)) == []
    assert set(asyncio.run(_write(tmp_path, [])).values()) == {chroma_module.UNUSABLE}

    # What a repair does: the chunks again, from the system of record.
    assert asyncio.run(_write(tmp_path, corpus)) == states
    assert asyncio.run(_search(tmp_path, query, 10, PUBLIC)) == before


@pytest.mark.parametrize(
    ("public_every", "path"),
    [(1, "over-fetch"), (3, "widened"), (60, "within the ids that pass")],
)
def test_each_search_path_returns_the_nearest_passing_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, public_every: int, path: str
) -> None:
    """All pass: the first query suffices; a third pass: one wider query; 1 in 60: the ids."""
    corpus = _corpus(600, public_every=public_every)
    asyncio.run(_write(tmp_path, corpus))
    queries: list[dict[str, object]] = []
    real_query = directory_search.passing_hits

    def spy(result: object, *args: object) -> object:
        queries.append({"ids": len(result["ids"][0])})  # type: ignore[index]
        return real_query(result, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(directory_search, "passing_hits", spy)
    query = random_vectors(1, DIMENSION, seed=13)[0]
    k = 8
    hits = asyncio.run(_search(tmp_path, query, k, PUBLIC))
    expected = exact_top(query, corpus, k, PUBLIC)
    assert len(hits) == k
    assert len({cid for cid, _ in hits} & set(expected)) >= 0.9 * k
    assert all(text is None for _, text in hits)
    rounds = {"over-fetch": 1, "widened": 2, "within the ids that pass": None}[path]
    if rounds is not None:
        assert len(queries) == rounds
    else:
        assert queries[-1]["ids"] == k  # the last query ran within the passing ids


def _ef_search(folder: Path) -> int:
    import chromadb

    client = chromadb.PersistentClient(path=str(folder))
    collection = client.get_collection("uda_chunks")
    return collection.configuration_json["hnsw"]["ef_search"]


@pytest.mark.parametrize(("made_with", "opened_with"), [(None, 400), (100, 400), (800, 800)])
def test_the_search_is_at_least_as_wide_as_ef_search(
    tmp_path: Path, made_with: int | None, opened_with: int
) -> None:
    """New stores and stores made with Chroma's default (100) search 400 wide; wider stays."""
    assert chroma_module.EF_SEARCH == 400
    if made_with is not None:  # a store as an older version (or a user) made it
        import chromadb

        client = chromadb.PersistentClient(path=str(tmp_path))
        client.create_collection(
            "uda_chunks",
            embedding_function=None,
            configuration={"hnsw": {"space": "cosine", "ef_search": made_with}},
        )
        del client
    asyncio.run(_write(tmp_path, _corpus(20, public_every=1)))
    assert _ef_search(tmp_path) == opened_with


def test_a_directory_of_an_earlier_release_loses_its_text(tmp_path: Path) -> None:
    """Hits carry no text since ADR 53: the text table of earlier directories is dropped."""
    corpus = _corpus(20, public_every=1)
    asyncio.run(_write(tmp_path, corpus))
    path = tmp_path / "uda_chunks.directory.sqlite3"
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE chunk_text (chunk_id TEXT PRIMARY KEY, text TEXT NOT NULL)")
        db.execute("INSERT INTO chunk_text VALUES ('doc-1@1#0', 'text of 1')")
    db.close()

    query = random_vectors(1, DIMENSION, seed=12)[0]
    found = asyncio.run(_search(tmp_path, query, 5, PUBLIC))
    assert [cid for cid, _ in found] == exact_top(query, corpus, 5, PUBLIC)
    db = sqlite3.connect(path)
    try:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    finally:
        db.close()
    assert "chunk_text" not in tables
    assert "chunks" in tables


@pytest.mark.parametrize("public_every", [1, 2])
def test_a_filter_seen_before_asks_chroma_as_wide_as_its_pass_rate_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, public_every: int
) -> None:
    """Everything passes: the second search asks ~k ids, not 2k; half passes: 2k again."""
    corpus = _corpus(400, public_every=public_every)
    asyncio.run(_write(tmp_path, corpus))
    asked: list[int] = []
    real = directory_search.passing_hits

    def spy(result: object, *args: object) -> object:
        asked.append(len(result["ids"][0]))  # type: ignore[index]
        return real(result, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(directory_search, "passing_hits", spy)
    queries = random_vectors(3, DIMENSION, seed=14)
    k = 40

    async def three_searches() -> list[list[str]]:
        store = ChromaConnector(path=tmp_path)
        await store.connect()
        try:
            return [[h.chunk_id for h in await store.vector_search(q, k, PUBLIC)] for q in queries]
        finally:
            await store.close()

    found = asyncio.run(three_searches())
    for q, ids in zip(queries, found, strict=True):
        expected = exact_top(q, corpus, k, PUBLIC)
        assert len(set(ids) & set(expected)) >= 0.9 * k
    if public_every == 1:
        assert asked == [2 * k, 48, 48]  # 1.1 k + 4 once the pass rate is known
    else:
        assert asked[0] == 2 * k
        assert all(n >= 2 * k for n in asked[1:])
