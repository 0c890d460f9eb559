"""The SQLite text leg's engine path (Tantivy candidates, exact scores; ADR 50).

- It answers as the exhaustive path does: same chunks, order and scores, whenever every
  matching chunk fits the candidate pool (property over generated corpora and filters).
- Non-interference beyond the pool: with far more matching chunks than the pool holds,
  adding chunks above a caller's clearance changes neither its hits nor a bit of its scores.
- An index that is behind is never trusted (the exhaustive path answers), `uda check`'s
  drift sees it, a rebuild repairs it; a failed engine write leaves the store unchanged; a
  store made before the engine gets its statistics and indexes when opened.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.analyzer import query_terms, term_frequencies
from connectors.conformance.data import chunk
from connectors.contract.predicates import Op, Predicate
from connectors.contract.records import ChunkHit, ChunkRecord, SearchFilter
from connectors.sql_filters import compile_filter
from connectors.sqlite import lexical_engine, lexical_exhaustive, lexical_stats, packed_terms
from connectors.sqlite import text as sqlite_text
from connectors.sqlite.connector import SQLiteConnector

WORDS = ("glacier", "harbour", "lantern", "meadow", "copper", "orchard", "falcon", "quartz")
SCOPES = (None, "project:a", "project:b")
TYPES = ("Document", "Evidence")


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteConnector]:
    """A fresh SQLite store with its engine indexes."""
    connector = SQLiteConnector(tmp_path / "uda.sqlite3")
    await connector.connect()
    yield connector
    await connector.close()


def _corpus(seed: int, n: int, *, start: int = 0, rank: int | None = None) -> list[ChunkRecord]:
    rng = random.Random(seed)
    return [
        chunk(
            f"e{start + i}",
            text=" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 25))),
            sensitivity_rank=rng.randint(0, 3) if rank is None else rank,
            scope=rng.choice(SCOPES) if rank is None else None,
            element_type=rng.choice(TYPES),
            valid_to=rng.choice((2**63 - 1, 2**63 - 1, 2**63 - 1, 500)),
        )
        for i in range(n)
    ]


def _both_paths(
    store: SQLiteConnector, query: str, k: int, search_filter: SearchFilter
) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """The engine's answer and the exhaustive path's, from one snapshot."""
    terms = query_terms(query)
    where, params = compile_filter(search_filter, table="t")
    with store._snapshot() as conn:
        assert store._engine_ready(conn)
        engine = lexical_engine.engine_search(
            conn,
            store._lexical,
            terms,
            k,
            search_filter,
            where,
            params,
            lexical_stats.label_rows(conn),
        )
        n_docs, average = store._visible_stats(conn, where, params)
        exhaustive = (
            lexical_exhaustive.best_chunks(conn, terms, where, params, n_docs, average, k)
            if n_docs
            else []
        )
    return [(c, s) for c, _, _, s in engine], [(c, s) for c, _, _, _, s in exhaustive]


filters = st.builds(
    SearchFilter,
    max_sensitivity_rank=st.integers(0, 3),
    projects=st.sets(st.sampled_from(SCOPES[1:])).map(lambda s: tuple(sorted(s))),
    all_projects=st.booleans(),
    element_types=st.one_of(
        st.none(), st.sets(st.sampled_from(TYPES)).map(lambda s: tuple(sorted(s)))
    ),
)
queries = st.lists(st.sampled_from((*WORDS, "zebra")), min_size=1, max_size=4).map(" ".join)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 10_000),
    size=st.integers(0, 120),
    cases=st.lists(st.tuples(filters, queries, st.integers(1, 60)), min_size=1, max_size=6),
)
async def test_engine_answers_as_the_exhaustive_path(
    store: SQLiteConnector,
    seed: int,
    size: int,
    cases: Sequence[tuple[SearchFilter, str, int]],
) -> None:
    """Same chunks, same order, scores equal to 1e-12, when the pool holds every match."""
    await store.rebuild_text_index()  # the store is shared by examples: start empty
    await store.delete_text_chunks(list(await store.text_chunk_states()))
    corpus = _corpus(seed, size)
    await store.upsert_text_chunks(corpus)
    # Replace a few: the old documents leave the engine, the statistics move with them.
    await store.upsert_text_chunks(_corpus(seed + 1, size // 4))
    for search_filter, query, k in cases:
        engine, exhaustive = _both_paths(store, query, k, search_filter)
        _assert_same(engine, exhaustive)
    assert await store.text_index_drift() == 0


def _view(hits: Sequence[ChunkHit]) -> list[tuple[str, float]]:
    return [(h.chunk_id, h.score) for h in hits]


def _assert_same(got: Sequence[tuple[str, float]], want: Sequence[tuple[str, float]]) -> None:
    """Same scores (to 1e-12) in the same order; chunks that tie may come in either order.

    Two chunks with the same statistics score the same, but each path sums a chunk's terms
    in its own order, so one may put them one unit in the last place apart, and then they
    no longer tie on the chunk id. A tie cut at `k` may keep either of them.
    """
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-12)
    got_groups, want_groups = _ties(got), _ties(want)
    assert got_groups[:-1] == want_groups[:-1]
    assert [len(g) for g in got_groups] == [len(g) for g in want_groups]


def _ties(hits: Sequence[tuple[str, float]]) -> list[set[str]]:
    """The chunk ids in runs of scores equal to 1e-12, in order."""
    runs: list[tuple[float, set[str]]] = []
    for chunk_id, score in hits:
        if runs and score == pytest.approx(runs[-1][0], rel=1e-12):
            runs[-1][1].add(chunk_id)
        else:
            runs.append((score, {chunk_id}))
    return [ids for _, ids in runs]


@pytest.mark.parametrize(
    "caller",
    [
        SearchFilter(max_sensitivity_rank=0),
        SearchFilter(max_sensitivity_rank=1, projects=("project:a",)),
        SearchFilter(max_sensitivity_rank=2, element_types=("Document",)),
    ],
)
async def test_hidden_chunks_change_nothing_beyond_the_pool(
    store: SQLiteConnector, caller: SearchFilter
) -> None:
    """Far more matches than the pool: hidden chunks leave hits and scores bit-identical."""
    visible = [
        chunk(
            f"v{i}",
            text=" ".join(random.Random(i).choice(WORDS[:4]) for _ in range(3 + i % 17)),
            sensitivity_rank=min(i % 2, caller.max_sensitivity_rank),
            scope="project:a" if caller.projects and i % 3 == 0 else None,
            element_type="Document",
        )
        for i in range(900)
    ]
    await store.upsert_text_chunks(visible)
    assert lexical_engine.pool_size(100) < len(visible) // 2
    queries_ = ("glacier", "harbour lantern", "meadow glacier harbour", "lantern")
    before = [_view(await store.text_search(q, 100, caller)) for q in queries_]
    assert all(len(hits) == 100 for hits in before)
    hidden_text = "glacier harbour lantern meadow " * 10
    hidden = [chunk(f"h-rank{i}", text=hidden_text, sensitivity_rank=3) for i in range(300)] + [
        chunk(f"h-scope{i}", text="glacier " * (1 + i % 5), scope="project:b") for i in range(300)
    ]
    await store.upsert_text_chunks(hidden)
    after = [_view(await store.text_search(q, 100, caller)) for q in queries_]
    assert after == before  # exact: the same floats, not approximately


async def test_an_index_behind_is_not_trusted_and_a_rebuild_repairs_it(
    store: SQLiteConnector,
) -> None:
    """No marker: the exhaustive path answers the same; drift says so; rebuild restores it."""
    await store.upsert_text_chunks(_corpus(3, 80))
    caller = SearchFilter(max_sensitivity_rank=3, all_projects=True)
    engine = _view(await store.text_search("glacier harbour", 20, caller))
    store._lexical.invalidate()
    with store._snapshot() as conn:
        assert not store._engine_ready(conn)
    _assert_same(_view(await store.text_search("glacier harbour", 20, caller)), engine)
    assert await store.text_index_drift() >= 1
    await store.rebuild_text_index()
    assert await store.text_index_drift() == 0
    with store._snapshot() as conn:
        assert store._engine_ready(conn)
    _assert_same(_view(await store.text_search("glacier harbour", 20, caller)), engine)


async def test_drift_counts_an_engine_document_that_went_missing(store: SQLiteConnector) -> None:
    """A document removed behind the store's back is drift, until a rebuild."""
    corpus = _corpus(4, 30, rank=0)
    await store.upsert_text_chunks(corpus)
    with store._snapshot() as conn:
        rid, generation = (
            conn.execute("SELECT min(rowid) FROM text_chunks WHERE valid_to > 600").fetchone()[0],
            sqlite_text.generation(conn),
        )
    label = next(iter(store._lexical.labels))
    store._lexical.write([(label, rid)], [], generation)
    assert await store.text_index_drift() == 1
    await store.rebuild_text_index()
    assert await store.text_index_drift() == 0


async def test_a_failed_engine_write_changes_nothing(
    store: SQLiteConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's transaction rolls back; the engine is not trusted until the next write."""
    await store.upsert_text_chunks(_corpus(5, 40))
    states = await store.text_chunk_states()

    def broken(*_: object, **__: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(store._lexical, "write", broken)
    with pytest.raises(Exception, match="disk full"):
        await store.upsert_text_chunks([chunk("new", text="glacier")])
    monkeypatch.undo()
    assert await store.text_chunk_states() == states
    with store._snapshot() as conn:
        assert not store._engine_ready(conn)
    # The next write finds the indexes behind and rebuilds them instead of patching them.
    await store.upsert_text_chunks([chunk("new", text="glacier")])
    with store._snapshot() as conn:
        assert store._engine_ready(conn)
    assert await store.text_index_drift() == 0
    public = SearchFilter(max_sensitivity_rank=0)
    assert "new" in {h.element_id for h in await store.text_search("glacier", 200, public)}


async def test_value_filters_and_as_of_take_the_exhaustive_path(store: SQLiteConnector) -> None:
    """The engine serves clearance and types only; the rest is exact by the other path."""
    await store.upsert_text_chunks(
        [
            chunk("a", text="glacier", filter_values={"status": "open"}),
            chunk("b", text="glacier glacier", filter_values={"status": "closed"}),
            chunk("c", text="glacier harbour", valid_to=300),
        ]
    )
    status = SearchFilter(
        max_sensitivity_rank=0, predicates=(Predicate(field="status", op=Op.EQ, value="open"),)
    )
    assert [h.element_id for h in await store.text_search("glacier", 5, status)] == ["a"]
    past = SearchFilter(max_sensitivity_rank=0, as_of=200)
    assert {h.element_id for h in await store.text_search("glacier", 5, past)} == {"a", "b", "c"}


async def test_a_store_made_before_the_engine_is_brought_up_when_opened(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No statistics, no postings, no indexes: opening builds them, says so, answers the same."""
    path = tmp_path / "old.sqlite3"
    store = SQLiteConnector(path)
    await store.connect()
    await store.upsert_text_chunks(_corpus(6, 60))
    caller = SearchFilter(max_sensitivity_rank=3, all_projects=True)
    past = replace(caller, as_of=100)
    before = _view(await store.text_search("quartz falcon", 30, caller))
    before_past = _view(await store.text_search("quartz falcon", 30, past))
    await store.close()
    # What a store of the release before the engine holds: one row per (term, chunk), the
    # statistics table of that time empty, no packed terms, no postings, no engine folder.
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE chunk_terms (term TEXT NOT NULL, doc INTEGER NOT NULL, "
            "tf INTEGER NOT NULL, PRIMARY KEY (term, doc)) WITHOUT ROWID"
        )
        conn.executemany(
            "INSERT INTO chunk_terms VALUES (?, ?, ?)",
            [
                (term, rowid, tf)
                for rowid, name, text in conn.execute("SELECT rowid, name, text FROM text_chunks")
                for term, tf in term_frequencies(name, text).items()
            ],
        )
        conn.execute("CREATE TABLE lexical_df (term TEXT, chunks INTEGER)")
        conn.execute("DROP TABLE text_postings_rows")
        conn.execute("DROP TABLE text_postings")
        conn.execute("DROP TABLE lexical_term_df")
        conn.execute("DELETE FROM lexical_labels")
        conn.execute(
            "DELETE FROM meta WHERE key IN "
            "('lexical_stats', 'lexical_generation', 'lexical_postings')"
        )
        conn.execute("ALTER TABLE text_chunks DROP COLUMN term_freqs")
        conn.execute("DROP TABLE lexicon")
    store._lexical.destroy()
    reopened = SQLiteConnector(path)
    with caplog.at_level("WARNING", logger="connectors.sqlite.text"):
        await reopened.connect()
    assert [r.getMessage() for r in caplog.records if r.name == "connectors.sqlite.text"] == [
        "re-indexing the text of 60 chunks once (an older format)"
    ]
    try:
        assert await reopened.text_index_drift() == 0
        with reopened._snapshot() as conn:
            assert reopened._engine_ready(conn)
            tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        assert not tables & {"chunk_terms", "lexical_df"}
        assert _view(await reopened.text_search("quartz falcon", 30, caller)) == before
        assert _view(await reopened.text_search("quartz falcon", 30, past)) == before_past
    finally:
        await reopened.close()


async def test_indexes_of_an_earlier_schema_are_rebuilt_when_opened(tmp_path: Path) -> None:
    """Pre-tokenized terms (the first schema) cannot be opened now: rebuilt from the terms."""
    import shutil

    import tantivy

    path = tmp_path / "uda.sqlite3"
    store = SQLiteConnector(path)
    await store.connect()
    await store.upsert_text_chunks(_corpus(7, 60))
    caller = SearchFilter(max_sensitivity_rank=3, all_projects=True)
    before = _view(await store.text_search("quartz falcon", 30, caller))
    folders = [store._lexical.root / label.folder for label in store._lexical.labels]
    await store.close()
    # Each label's index as the first release wrote it; its generation marker stays current.
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("terms", tokenizer_name="raw", index_option="freq")
    builder.add_integer_field("rid", indexed=True, fast=True)
    builder.add_text_field("element_type", tokenizer_name="raw", index_option="basic")
    first_schema = builder.build()
    for folder in folders:
        for entry in folder.iterdir():
            if entry.name != "label.json":
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        tantivy.Index(first_schema, path=str(folder))
    reopened = SQLiteConnector(path)
    await reopened.connect()
    try:
        with reopened._snapshot() as conn:
            assert reopened._engine_ready(conn)
        assert await reopened.text_index_drift() == 0
        assert _view(await reopened.text_search("quartz falcon", 30, caller)) == before
    finally:
        await reopened.close()


def test_packed_scores_read_each_chunk_from_its_own_bytes() -> None:
    """Candidates' packed frequencies arrive as one BLOB and their sizes: each chunk's score
    is its own, an empty chunk (no terms) scores 0, and sizes that disagree are refused."""
    chunks = [[(3, 2), (7, 1)], [], [(1, 4), (3, 1), (9, 2)], [(7, 5)]]
    blobs = [
        packed_terms.pack({str(t): tf for t, tf in pairs}, {str(t): t for t, _ in pairs})
        for pairs in chunks
    ]
    lengths = np.asarray([12.0, 3.0, 30.0, 8.0])
    weights = {3: 1.5, 7: 0.25, 9: 2.0}
    together = packed_terms.scores(
        b"".join(blobs), [len(b) for b in blobs], lengths, weights, 1.2, 0.75, 10.0
    )
    alone = [
        packed_terms.scores(blob, [len(blob)], lengths[i : i + 1], weights, 1.2, 0.75, 10.0)[0]
        for i, blob in enumerate(blobs)
    ]
    assert together.tolist() == alone
    assert together[1] == 0.0
    assert all(together[i] > 0 for i in (0, 2, 3))
    with pytest.raises(ValueError, match="packed term frequencies"):
        packed_terms.scores(b"".join(blobs), [8, 0, 24, 8], lengths, weights, 1.2, 0.75, 10.0)
