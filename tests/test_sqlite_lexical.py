"""The SQLite lexical leg's exhaustive path: the same hits, scores and tie order as the
reference arithmetic (connectors/bm25.py) over the visible chunks' text, analysed again."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from connectors.analyzer import chunk_length, query_terms, term_frequencies
from connectors.bm25 import bm25_top
from connectors.conformance.data import chunk
from connectors.contract.records import OPEN, ChunkRecord, SearchFilter
from connectors.sql_filters import compile_filter
from connectors.sqlite import lexical_exhaustive
from connectors.sqlite import text as sqlite_text
from connectors.sqlite.connector import SQLiteConnector

PUBLIC = SearchFilter(max_sensitivity_rank=0, all_projects=False)


def _text(cid: str, text: str, *, rank: int = 0, valid_to: int = OPEN) -> ChunkRecord:
    return chunk(
        cid,
        text=text,
        name=cid.title(),
        sensitivity_rank=rank,
        valid_from=1,
        valid_to=valid_to,
        filter_values={"element_type": "Document"},
    )


CORPUS = [
    _text("harbour", "The harbour master logs every ship entering the harbour at dawn."),
    _text("glacier", "Glaciers carve valleys; the glacier retreats a little every summer."),
    _text("ships", "Container ships wait outside the harbour for a berth."),
    _text("keeper", "A lighthouse keeper watches ships and storms from the harbour wall."),
    # Two chunks with the same terms and length tie: the smaller chunk id comes first.
    _text("twin-b", "Harbour ships."),
    _text("twin-a", "Harbour ships."),
    _text("old", "Harbour dues were abolished long ago.", valid_to=50),
    _text("secret", "Harbour harbour harbour: the hidden fleet of ships.", rank=3),
]


def _reference(path: Path, query: str, k: int) -> list[tuple[str, float]]:
    """`bm25_top` over the visible (public, current) chunks, their text read from the file."""
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT rowid, chunk_id, name, text FROM text_chunks "
        "WHERE sensitivity_rank = 0 AND valid_to = ?",
        (OPEN,),
    ).fetchall()
    conn.close()
    wanted = set(query_terms(query))
    occurrences: list[tuple[int, str, int, int, str]] = []
    total = 0
    for rowid, chunk_id, name, text in rows:
        terms = term_frequencies(name, text)
        total += chunk_length(terms)
        occurrences += [
            (rowid, term, tf, chunk_length(terms), chunk_id)
            for term, tf in terms.items()
            if term in wanted
        ]
    n = len(rows)
    return [(cid, score) for _, cid, score in bm25_top(occurrences, n, total / n, k)]


QUERIES = ["Harbour ships!", "glacier summer", "harbour harbour keeper"]


@pytest.mark.parametrize("query", QUERIES)
async def test_scores_and_order_are_the_reference_arithmetic(tmp_path: Path, query: str) -> None:
    store = SQLiteConnector(tmp_path / "uda.sqlite3")
    await store.connect()
    try:
        await store.upsert_text_chunks(CORPUS)
        hits = await store.text_search(query, 10, PUBLIC)
    finally:
        await store.close()
    expected = _reference(tmp_path / "uda.sqlite3", query, 10)
    assert expected, "the reference found nothing: the corpus no longer exercises the query"
    assert [(h.chunk_id, h.score) for h in hits] == [
        (cid, pytest.approx(score, rel=1e-12)) for cid, score in expected
    ]
    assert "secret@1#0" not in [h.chunk_id for h in hits]
    assert "old@1#0" not in [h.chunk_id for h in hits]


@pytest.mark.parametrize("page_rows", [20_000, 2], ids=["one page", "pages of 2"])
@pytest.mark.parametrize("query", QUERIES)
async def test_the_exhaustive_path_is_the_reference_arithmetic_page_by_page(
    tmp_path: Path, query: str, page_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read in one page or in many (hidden and closed chunks among them), the same answer."""
    monkeypatch.setattr(lexical_exhaustive, "_PAGE_ROWS", page_rows)
    store = SQLiteConnector(tmp_path / "uda.sqlite3")
    await store.connect()
    try:
        await store.upsert_text_chunks(CORPUS)
        where, params = compile_filter(PUBLIC, table="t")
        with store._snapshot() as conn:  # pyright: ignore[reportPrivateUsage]
            n_docs, average = store._visible_stats(conn, where, params)  # pyright: ignore[reportPrivateUsage]
            best = lexical_exhaustive.best_chunks(
                conn, query_terms(query), where, params, n_docs, average, 3
            )
    finally:
        await store.close()
    expected = _reference(tmp_path / "uda.sqlite3", query, 3)
    assert [(c, score) for c, _, _, _, score in best] == [
        (cid, pytest.approx(score, rel=1e-12)) for cid, score in expected
    ]
    assert all(text for _, _, _, text, _ in best)


async def test_k_cuts_after_the_tie_order(tmp_path: Path) -> None:
    store = SQLiteConnector(tmp_path / "uda.sqlite3")
    await store.connect()
    try:
        await store.upsert_text_chunks(CORPUS)
        every = await store.text_search("harbour ships", 10, PUBLIC)
        first = await store.text_search("harbour ships", 2, PUBLIC)
    finally:
        await store.close()
    assert [h.chunk_id for h in first] == [h.chunk_id for h in every[:2]]
    ids = [h.chunk_id for h in every]
    assert ids.index("twin-a@1#0") + 1 == ids.index("twin-b@1#0")


# -- a superseded state's chunks: closed, not indexed again --------------------------------
def _as_of(hlc: int) -> SearchFilter:
    return SearchFilter(max_sensitivity_rank=0, as_of=hlc)


def _row_and_terms(path: Path, chunk_id: str) -> tuple[int, bytes, list[str]]:
    """A chunk's row id, its packed terms and its postings (term ids), as stored."""
    conn = sqlite3.connect(path)
    rowid, packed = conn.execute(
        "SELECT rowid, term_freqs FROM text_chunks WHERE chunk_id = ?", (chunk_id,)
    ).fetchone()
    posted = [
        term
        for (term,) in conn.execute(
            "SELECT term FROM text_postings_rows WHERE doc = ? ORDER BY term", (rowid,)
        )
    ]
    conn.close()
    return rowid, packed, posted


KEEPER = CORPUS[3]


async def test_a_superseded_chunk_keeps_its_row_and_terms_and_reads_as_before(
    tmp_path: Path,
) -> None:
    path = tmp_path / "uda.sqlite3"
    store = SQLiteConnector(path)
    await store.connect()
    try:
        await store.upsert_text_chunks(CORPUS)
        past_before = await store.text_search("harbour ships keeper", 10, _as_of(10))
        row_before = _row_and_terms(path, KEEPER.chunk_id)
        await store.upsert_text_chunks([replace(KEEPER, valid_to=20)])
        past_after = await store.text_search("harbour ships keeper", 10, _as_of(10))
        current = await store.text_search("harbour ships keeper", 10, PUBLIC)
        drift = await store.text_index_drift()
    finally:
        await store.close()
    assert KEEPER.chunk_id in [h.chunk_id for h in past_before]
    assert [(h.chunk_id, h.score) for h in past_after] == [
        (h.chunk_id, pytest.approx(h.score, rel=1e-12)) for h in past_before
    ]
    # Closed in place: the same row, terms and postings (nothing analysed or written again).
    assert _row_and_terms(path, KEEPER.chunk_id) == row_before
    # The current statistics and the engine lost it exactly: the reference arithmetic again.
    expected = _reference(path, "harbour ships keeper", 10)
    assert KEEPER.chunk_id not in [cid for cid, _ in expected]
    assert [(h.chunk_id, h.score) for h in current] == [
        (cid, pytest.approx(score, rel=1e-12)) for cid, score in expected
    ]
    assert drift == 0


async def test_a_chunk_closed_with_other_text_is_indexed_again(tmp_path: Path) -> None:
    store = SQLiteConnector(tmp_path / "uda.sqlite3")
    await store.connect()
    try:
        await store.upsert_text_chunks(CORPUS)
        await store.upsert_text_chunks([replace(KEEPER, valid_to=20, text="Only gulls now.")])
        gulls = await store.text_search("gulls", 10, _as_of(10))
        lighthouse = await store.text_search("lighthouse", 10, _as_of(10))
        drift = await store.text_index_drift()
    finally:
        await store.close()
    assert [h.chunk_id for h in gulls] == [KEEPER.chunk_id]
    assert lighthouse == []
    assert drift == 0


async def test_a_chunk_changed_between_analysis_and_write_is_analysed_in_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "uda.sqlite3"
    store = SQLiteConnector(path)
    await store.connect()
    analyse = sqlite_text.analyse

    def analyse_then_another_writer(
        conn: sqlite3.Connection, chunks: Sequence[ChunkRecord]
    ) -> sqlite_text.AnalysedChunks:
        found = analyse(conn, chunks)
        # Another connection changes the stored text after the analysis found it unchanged.
        other = sqlite3.connect(path)
        other.execute(
            "UPDATE text_chunks SET text = 'Only gulls now.' WHERE chunk_id = ?",
            (KEEPER.chunk_id,),
        )
        other.commit()
        other.close()
        return found

    try:
        await store.upsert_text_chunks(CORPUS)
        monkeypatch.setattr(sqlite_text, "analyse", analyse_then_another_writer)
        await store.upsert_text_chunks([replace(KEEPER, valid_to=20)])
        lighthouse = await store.text_search("lighthouse", 10, _as_of(10))
        drift = await store.text_index_drift()
    finally:
        await store.close()
    # The write compared again, found the row changed, and wrote the chunk it was given.
    assert [h.chunk_id for h in lighthouse] == [KEEPER.chunk_id]
    assert lighthouse[0].text == KEEPER.text
    assert drift == 0
