"""The SQLite lexical leg scores inside SQLite: the same hits, scores and tie order as the
reference arithmetic (connectors/bm25.py) over the visible chunks' stored terms."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from connectors.analyzer import query_terms
from connectors.bm25 import bm25_top
from connectors.conformance.data import chunk
from connectors.contract.records import OPEN, ChunkRecord, SearchFilter
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
    """`bm25_top` over the visible (public, current) chunks' rows, read straight from the file."""
    conn = sqlite3.connect(path)
    visible = "t.sensitivity_rank = 0 AND t.valid_to = ?"
    rows = conn.execute(
        "SELECT c.doc, c.term, c.tf, t.length, t.chunk_id FROM chunk_terms c "
        f"JOIN text_chunks t ON t.rowid = c.doc WHERE {visible}",
        (OPEN,),
    ).fetchall()
    n, total = conn.execute(
        f"SELECT count(*), sum(length) FROM text_chunks t WHERE {visible}",
        (OPEN,),
    ).fetchone()
    conn.close()
    terms = set(query_terms(query))
    occurrences = [r for r in rows if r[1] in terms]
    return [(cid, score) for _, cid, score in bm25_top(occurrences, n, total / n, k)]


@pytest.mark.parametrize("query", ["Harbour ships!", "glacier summer", "harbour harbour keeper"])
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
