"""The PostgreSQL vector store: pgvector HNSW with iterative scans and an exact fallback."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.types.json import Jsonb

from connectors.base import VectorCapable
from connectors.contract.errors import ConnectorError
from connectors.contract.records import ChunkHit, ChunkRecord, SearchFilter
from connectors.contract.system_of_record import derived_chunk_values
from connectors.postgres import partitions
from connectors.postgres import values as pv
from connectors.postgres import vector_sql as vsql
from connectors.postgres.filter_sql import compile_filter
from connectors.postgres.store import PostgresStore


class PostgresVectorLeg(PostgresStore, VectorCapable):
    """VectorCapable over the `vector_chunks` table."""

    async def upsert_chunks(self, chunks: Sequence[ChunkRecord]) -> None:
        """Insert or replace chunks (embedding and metadata) by chunk id."""
        missing = [c.chunk_id for c in chunks if c.embedding is None]
        if missing:
            raise ConnectorError(self.name, f"chunks without embeddings: {missing[:3]}")
        wrong = [c.chunk_id for c in chunks if len(c.embedding or ()) != self._dimension]
        if wrong:
            raise ConnectorError(
                self.name, f"embeddings not of dimension {self._dimension}: {wrong[:3]}"
            )
        pv.reject_unstorable_chunks(chunks)
        latest = pv.last_per_id(chunks)
        rows = [
            (*derived_chunk_values(c, Jsonb), c.text, pv.vector(c.embedding or ())) for c in latest
        ]
        if not self._partitioned:
            await self._write_many(vsql.UPSERT_VECTOR_CHUNK, rows)
            return
        if not rows:
            return
        parts = [partitions.part_of(c.scope) for c in latest]
        await self._make_partitions(set(parts))
        async with self._connection() as conn, conn.transaction(), conn.cursor() as cur:
            await cur.execute(partitions.LEAVE_OTHER_PARTS, ([row[0] for row in rows], parts))
            await cur.executemany(
                partitions.UPSERT.encode(),
                [(*row, part) for row, part in zip(rows, parts, strict=True)],
            )
        await self._wrote(len(rows))

    def _vector_filter(self, search_filter: SearchFilter) -> tuple[str, dict[str, Any]]:
        """The pushdown filter on `vector_chunks v`, on the partition key too if partitioned."""
        where, params = compile_filter(search_filter, table="v")
        if self._partitioned:
            where, params = partitions.prune(where, params, search_filter, table="v")
        return where, params

    async def _make_partitions(self, parts: set[str]) -> None:
        """Create the partitions of these scopes that do not exist yet (once per process)."""
        new = parts - self._parts
        if not new:
            return
        async with self._connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (partitions.PARTITION_LOCK,))
            for part in sorted(new):
                # A partition bound is DDL, which takes no parameters: the scope goes in as a
                # quoted literal, the table's name is a digest of it.
                await conn.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} PARTITION OF vector_chunks "
                        "FOR VALUES IN ({})"
                    ).format(sql.Identifier(partitions.partition_name(part)), sql.Literal(part))
                )
        self._parts |= new

    async def delete_chunks(self, element_ids: Sequence[str]) -> None:
        """Delete every chunk of the elements."""
        ids = pv.storable(element_ids)
        if ids:
            async with self._connection() as conn:
                await conn.execute(
                    "DELETE FROM vector_chunks WHERE element_id = ANY(%s::text[])", (ids,)
                )

    async def delete_chunk_ids(self, chunk_ids: Sequence[str]) -> None:
        """Delete chunks by id."""
        ids = pv.storable(chunk_ids)
        if ids:
            async with self._connection() as conn:
                await conn.execute(
                    "DELETE FROM vector_chunks WHERE chunk_id = ANY(%s::text[])", (ids,)
                )

    async def chunk_states(self) -> dict[str, int]:
        """Every stored chunk id with its `valid_to`."""
        return dict(await self._select("SELECT chunk_id, valid_to FROM vector_chunks"))

    async def vector_search(
        self, embedding: Sequence[float], k: int, search_filter: SearchFilter
    ) -> list[ChunkHit]:
        """The `k` nearest chunks that pass the filter; score = 1 - cosine distance.

        The HNSW index is scanned iteratively with the filter applied inside the scan
        (`hnsw.iterative_scan = relaxed_order`), and the rows found are put back in exact
        order. When the scan stops short of `k` (its `max_scan_tuples` budget spent on
        invisible chunks, or fewer than `k` visible chunks exist), an exact search under
        the same filter gives the answer; with `exact=True` only the exact search runs.

        The HNSW query runs with sequential and bitmap scans off (`APPROXIMATE_SETTINGS`
        says why), so a small table is searched through the index too.
        """
        if len(embedding) != self._dimension:
            raise ConnectorError(
                self.name, f"query embedding has {len(embedding)} dimensions, not {self._dimension}"
            )
        if k <= 0:
            return []
        where, params = self._vector_filter(search_filter)
        params.update(q=pv.vector(embedding), k=int(k))

        async def nearest(conn: AsyncConnection[Any]) -> list[Any]:
            async with conn.transaction():
                rows: list[Any] = []
                if not self._exact:
                    await conn.execute(
                        vsql.APPROXIMATE_SETTINGS,
                        (str(max(self._ef_search, min(int(k), 1000))), str(self._max_scan_tuples)),
                    )
                    cur = await conn.execute(vsql.nearest_sql(where, exact=False).encode(), params)
                    rows = await cur.fetchall()
                if len(rows) < k:
                    await conn.execute(vsql.EXACT_SETTINGS)
                    cur = await conn.execute(vsql.nearest_sql(where, exact=True).encode(), params)
                    rows = await cur.fetchall()
                return rows

        rows = await self._read(nearest)
        return [
            ChunkHit(chunk_id=r[0], element_id=r[1], version=r[2], text=r[3], score=float(r[4]))
            for r in rows
        ]

    async def vector_scores(
        self, embedding: Sequence[float], element_ids: Sequence[str], search_filter: SearchFilter
    ) -> list[ChunkHit]:
        """The passing chunks of these elements, by exact cosine similarity, best first."""
        if len(embedding) != self._dimension:
            raise ConnectorError(
                self.name, f"query embedding has {len(embedding)} dimensions, not {self._dimension}"
            )
        ids = pv.storable(element_ids)
        if not ids:
            return []
        where, params = self._vector_filter(search_filter)
        params.update(q=pv.vector(embedding), ids=ids)
        rows = await self._read_select(vsql.scores_sql(where), params)
        return [
            ChunkHit(chunk_id=r[0], element_id=r[1], version=r[2], text=r[3], score=float(r[4]))
            for r in rows
        ]
