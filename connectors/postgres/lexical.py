"""The PostgreSQL lexical leg: terms of the shared analyzer, BM25 over visible chunks."""

from __future__ import annotations

import json
from collections.abc import Sequence

from psycopg.types.json import Jsonb

from connectors.analyzer import query_terms
from connectors.base import TextCapable
from connectors.bm25 import BM25_B, BM25_K1
from connectors.contract.records import ChunkHit, ChunkRecord, SearchFilter
from connectors.contract.system_of_record import derived_chunk_values
from connectors.postgres import text as lexical
from connectors.postgres import values as pv
from connectors.postgres.filter_sql import compile_filter
from connectors.postgres.store import PostgresStore

# Visible statistics kept per filter (callers with distinct clearances and filters).
_STATS_KEPT = 256


class PostgresTextLeg(PostgresStore, TextCapable):
    """TextCapable over `text_chunks` and its term index `chunk_terms`.

    Every write to `text_chunks` bumps the lexical generation in its own transaction, so a
    caller's visible count and average length are computed once per generation and filter.
    """

    async def upsert_text_chunks(self, chunks: Sequence[ChunkRecord]) -> None:
        """Insert or replace chunks; re-index the terms of those whose text is new."""
        if not chunks:
            return
        pv.reject_unstorable_chunks(chunks)
        unique = pv.last_per_id(chunks)
        async with self._connection() as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT chunk_id, name, text FROM text_chunks WHERE chunk_id = ANY(%s::text[])",
                ([c.chunk_id for c in unique],),
            )
            stored = {row[0]: (row[1], row[2]) for row in await cur.fetchall()}
            async with conn.cursor() as many:
                await many.executemany(
                    lexical.UPSERT_TEXT_CHUNK.encode(),
                    [(*derived_chunk_values(c, Jsonb), c.name, c.text) for c in unique],
                )
            # A metadata-only update (a retired state) leaves the term index alone.
            fresh = [c for c in unique if stored.get(c.chunk_id) != (c.name, c.text)]
            await lexical.index_terms(conn, [(c.chunk_id, c.name, c.text) for c in fresh])
            await conn.execute(lexical.BUMP_GENERATION)
        await self._wrote(len(unique) + sum(len(c.text) // 8 for c in fresh))  # ~terms

    async def text_chunk_states(self) -> dict[str, int]:
        """Every chunk id in the text store with its `valid_to`."""
        return dict(await self._select("SELECT chunk_id, valid_to FROM text_chunks"))

    async def delete_text_chunks(self, chunk_ids: Sequence[str]) -> None:
        """Delete chunks by id (their term rows go with them)."""
        ids = pv.storable(chunk_ids)
        if ids:
            async with self._connection() as conn, conn.transaction():
                await conn.execute(
                    "DELETE FROM text_chunks WHERE chunk_id = ANY(%s::text[])", (ids,)
                )
                await conn.execute(lexical.BUMP_GENERATION)

    async def text_index_drift(self) -> int:
        """Chunks whose term rows do not add up to the length indexed with them."""
        return int((await self._select(lexical.TEXT_INDEX_DRIFT))[0][0])

    async def rebuild_text_index(self) -> None:
        """Recompute every chunk's terms and length from its stored text."""
        async with self._connection() as conn, conn.transaction():
            await lexical.rebuild_terms(conn)

    async def text_search(self, query: str, k: int, search_filter: SearchFilter) -> list[ChunkHit]:
        """BM25 over chunk names and text, with the statistics of the visible chunks only."""
        # Terms are word characters: no NUL or lone surrogate reaches the server.
        terms = query_terms(query)
        if k <= 0 or not terms:
            return []
        where, params = compile_filter(search_filter, table="t")
        # The filter's SQL and values name the visible set the statistics belong to.
        key = (where, json.dumps(params, sort_keys=True, default=str))
        generation, n_docs, avg_len = self._visible_stats.get(key, (-1, 0.0, 0.0))
        params.update(terms=terms, k=int(k), k1=BM25_K1, b=BM25_B)
        params.update(gen=generation, n=n_docs, avgdl=avg_len)
        rows = await self._read_select(lexical.bm25_sql(where), params)
        if rows and rows[0][7] != generation:
            if len(self._visible_stats) >= _STATS_KEPT:
                self._visible_stats.clear()
            self._visible_stats[key] = (int(rows[0][7]), float(rows[0][5]), float(rows[0][6]))
        return [
            ChunkHit(chunk_id=r[0], element_id=r[1], version=r[2], text=r[3], score=float(r[4]))
            for r in rows
        ]
