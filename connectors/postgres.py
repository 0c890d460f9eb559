"""PostgreSQL with pgvector: system of record, vector store and BM25 lexical leg in one server.

psycopg 3 (async) over a connection pool; pgvector's types are registered on every pooled
connection. One schema (default `uda`) holds the system of record (`states`, `chunks`,
`edges`, `outbox`, `meta`), the vector store (`vector_chunks`, HNSW over cosine distance) and
the lexical store (`text_chunks` and its term index `chunk_terms`). The three roles are fed
separately through the outbox, exactly as if they were three servers.

Filtered vector search uses pgvector's iterative index scans, so a selective filter (a
caller who may see 5 % of the chunks) still yields `k` visible chunks; if the scan stops
short, an exact search under the same filter answers. BM25 is computed in SQL from
per-chunk term frequencies (the terms of connectors/analyzer.py, as on SQLite) with the
statistics of the visible chunks only (ADR 5).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection, sql
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from connectors import postgres_sql as q
from connectors import postgres_text as lexical
from connectors import postgres_values as pv
from connectors.analyzer import query_terms
from connectors.base import Connector, RelationalCapable, TextCapable, VectorCapable
from connectors.bm25 import BM25_B, BM25_K1
from connectors.records import ChunkHit, ChunkRecord, GraphEdge, SearchFilter
from connectors.system_of_record import OutboxItem, StoredState, WriteBatch, chunk_id
from uda.errors import ConfigError, ConnectorError, UserError

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_SCHEMA_LOCK = 0x0DA5C4E  # pg_advisory_xact_lock key: one schema migration at a time
_HNSW_MAX_DIMENSION = 2000


class PostgresConnector(Connector, RelationalCapable, VectorCapable, TextCapable):
    """System of record, vector store and lexical leg on one PostgreSQL server.

    Args:
        dsn: a libpq connection string or `postgresql://` URL.
        dimension: the embeddings' dimension (the `vector(n)` column; at most 2000).
        exact: never use the HNSW index (exact nearest neighbours, for comparisons).
        schema: the PostgreSQL schema that holds the tables (created if missing).
        ef_search: HNSW candidate list size per scan step.
        max_scan_tuples: how far an iterative HNSW scan may go before the exact fallback.
        pool_size: the most connections the pool opens.
        timeout: seconds to wait for a connection.
    """

    name = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        dimension: int = 384,
        exact: bool = False,
        schema: str = "uda",
        ef_search: int = 100,
        max_scan_tuples: int = 20_000,
        pool_size: int = 8,
        timeout: float = 30.0,
    ) -> None:
        if isinstance(dimension, bool) or not 1 <= int(dimension) <= _HNSW_MAX_DIMENSION:
            raise ConfigError(
                f"dimension must be 1..{_HNSW_MAX_DIMENSION} (pgvector's HNSW limit)",
                field="dimension",
                value=dimension,
            )
        if not _SCHEMA_NAME.match(schema):
            raise ConfigError(
                "schema must be a lower-case SQL identifier", field="schema", value=schema
            )
        self._dsn = dsn
        self._dimension = int(dimension)
        self._exact = exact
        self._schema = schema
        self._ef_search = max(1, min(int(ef_search), 1000))
        self._max_scan_tuples = max(1, int(max_scan_tuples))
        self._pool_size = max(2, int(pool_size))
        self._timeout = timeout
        self._pool: AsyncConnectionPool[AsyncConnection[Any]] | None = None

    # -- lifecycle ------------------------------------------------------------------------
    async def connect(self) -> None:
        """Create the extension, schema and tables if missing, then open the pool."""
        if self._pool is not None:
            return
        try:
            conn = await AsyncConnection.connect(
                self._dsn, autocommit=True, connect_timeout=int(self._timeout)
            )
        except psycopg.Error as exc:
            raise ConnectorError(self.name, f"cannot connect: {exc}") from exc
        try:
            async with conn:
                await self._migrate(conn)
        except psycopg.Error as exc:
            raise ConnectorError(self.name, f"{type(exc).__name__}: {exc}") from exc
        pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            self._dsn,
            kwargs={"autocommit": True},
            min_size=1,
            max_size=self._pool_size,
            open=False,
            configure=self._configure,
            timeout=self._timeout,
            name=f"uda-{self.name}",
        )
        try:
            await pool.open(wait=True, timeout=self._timeout)
        except psycopg.Error as exc:
            await pool.close()
            raise ConnectorError(self.name, f"cannot open the pool: {exc}") from exc
        self._pool = pool

    async def _migrate(self, conn: AsyncConnection[Any]) -> None:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            # `vector` is not a trusted extension: only a superuser can create it, so a
            # server prepared by an administrator (or `uda services up`) already has it.
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            await conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self._schema))
            )
            await self._set_search_path(conn, local=True)
            await conn.execute(q.schema(self._dimension).encode())
            await lexical.upgrade(conn)
            cur = await conn.execute(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = 'vector_chunks'::regclass AND attname = 'embedding'"
            )
            row = await cur.fetchone()
        wanted = f"vector({self._dimension})"
        if row is None or row[0] != wanted:
            raise ConnectorError(
                self.name,
                f"schema {self._schema!r} stores {row[0] if row else 'no'} embeddings, "
                f"not {wanted}: use another schema or the same dimension",
            )

    async def _set_search_path(self, conn: AsyncConnection[Any], *, local: bool) -> None:
        # Our schema first; `public` for the extension's types and operators.
        await conn.execute(
            "SELECT set_config('search_path', %s, %s)", (f'"{self._schema}", public', local)
        )

    async def _configure(self, conn: AsyncConnection[Any]) -> None:
        await self._set_search_path(conn, local=False)
        await register_vector_async(conn)
        # Load pgvector's library now, so that its settings (hnsw.*) exist for set_config.
        await conn.execute("SELECT '[1]'::vector")

    async def close(self) -> None:
        """Close the pool."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A pooled connection; every psycopg error inside becomes a `ConnectorError`."""
        if self._pool is None:
            raise ConnectorError(self.name, "not connected: call connect() first")
        try:
            async with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise ConnectorError(self.name, f"{type(exc).__name__}: {exc}") from exc

    async def _select(self, query: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        async with self._connection() as conn:
            cur = await conn.execute(query.encode(), params)
            return await cur.fetchall()

    async def _write_many(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        async with self._connection() as conn, conn.transaction(), conn.cursor() as cur:
            await cur.executemany(query.encode(), rows)

    # -- system of record -----------------------------------------------------------------
    async def commit(self, batch: WriteBatch) -> None:
        """Write states, chunks, retirements, edges and outbox entries in one transaction."""
        pv.reject_unstorable(batch)
        state_keys = {(s.element_id, s.version) for s in batch.states}
        state_keys |= {(eid, version) for eid, version, _ in batch.retire}
        outbox: list[tuple[str, str, str]] = []
        for store in batch.stores:
            outbox += [(store, "state", json.dumps(list(k))) for k in sorted(state_keys)]
            outbox += [(store, "edge", json.dumps(list(e.key))) for e in batch.edges]
        async with self._connection() as conn, conn.transaction(), conn.cursor() as cur:
            if batch.retire:
                await cur.executemany(
                    q.RETIRE_STATE, [(vt, eid, version) for eid, version, vt in batch.retire]
                )
            if batch.states:
                # Plain INSERT: a concurrent writer that took the same version fails loudly.
                await cur.executemany(
                    q.INSERT_STATE,
                    [
                        (
                            s.element_id,
                            s.version,
                            s.hlc,
                            s.valid_to,
                            s.element_type,
                            s.name,
                            s.sensitivity_rank,
                            s.scope,
                            s.timestamp_ms,
                            s.tombstone,
                            s.content_hash,
                            Jsonb(dict(s.payload)),
                            Jsonb(dict(s.filter_values)),
                        )
                        for s in batch.states
                    ],
                )
            if batch.chunks:
                await cur.executemany(
                    q.UPSERT_CHUNK,
                    [
                        (
                            c.chunk_id,
                            c.element_id,
                            c.version,
                            c.index,
                            c.text,
                            None if c.embedding is None else pv.vector(c.embedding),
                        )
                        for c in batch.chunks
                    ],
                )
            if batch.edges:
                await cur.executemany(
                    q.UPSERT_EDGE,
                    [
                        (e.source_id, e.relation, e.target_id, e.valid_from, e.valid_to)
                        for e in batch.edges
                    ],
                )
            if outbox:
                await cur.executemany(q.INSERT_OUTBOX, outbox)
            if batch.hlc:
                await cur.execute(q.RAISE_HLC, (batch.hlc,))

    async def latest_states(self, element_ids: Sequence[str]) -> dict[str, StoredState]:
        """The newest state of each id (tombstones included)."""
        return await self._states(element_ids, None)

    async def fetch(self, element_ids: Sequence[str], as_of: int | None) -> dict[str, StoredState]:
        """Each id's state as of `as_of`, with the newest state's clearance, in one query."""
        return await self._states(element_ids, as_of)

    async def _states(
        self, element_ids: Sequence[str], as_of: int | None
    ) -> dict[str, StoredState]:
        ids = pv.storable(element_ids)
        if not ids:
            return {}
        rows = await self._select(q.states_sql(as_of), {"ids": ids, "as_of": as_of})
        return {
            row[0]: StoredState(
                element_id=row[0],
                version=row[1],
                hlc=row[2],
                valid_to=row[3],
                element_type=row[4],
                name=row[5],
                sensitivity_rank=row[6],
                scope=row[7],
                timestamp_ms=row[8],
                tombstone=row[9],
                content_hash=row[10],
                payload=row[11],
                filter_values=row[12],
                latest_sensitivity_rank=row[13],
                latest_scope=row[14],
            )
            for row in rows
        }

    async def live_edges(self, element_ids: Sequence[str]) -> list[GraphEdge]:
        """Current edges touching any of the ids."""
        ids = pv.storable(element_ids)
        if not ids:
            return []
        return [pv.edge(r) for r in await self._select(q.LIVE_EDGES, {"ids": ids})]

    async def last_hlc(self) -> int:
        """The highest HLC committed."""
        rows = await self._select("SELECT value FROM meta WHERE key = 'hlc'")
        return int(rows[0][0]) if rows else 0

    async def pending(self, store: str, limit: int) -> list[OutboxItem]:
        """Outbox entries for `store`, oldest first."""
        if not q.storable(store):
            return []
        rows = await self._select(
            "SELECT seq, kind, key FROM outbox WHERE store = %(store)s ORDER BY seq "
            "LIMIT %(limit)s",
            {"store": store, "limit": limit},
        )
        return [
            OutboxItem(seq=seq, store=store, kind=kind, key=tuple(json.loads(key)))
            for seq, kind, key in rows
        ]

    async def acknowledge(self, store: str, items: Sequence[OutboxItem]) -> None:
        """Delete applied outbox entries."""
        if not items or not q.storable(store):
            return
        async with self._connection() as conn:
            await conn.execute(
                "DELETE FROM outbox WHERE store = %s AND seq = ANY(%s::bigint[])",
                (store, [i.seq for i in items]),
            )

    async def load_chunks(self, state_keys: Sequence[tuple[str, int]]) -> list[ChunkRecord]:
        """Chunks of the given states, with metadata from their state rows."""
        keys = [(eid, int(v)) for eid, v in state_keys if q.storable(eid)]
        if not keys:
            return []
        rows = await self._select(
            q.LOAD_CHUNKS, {"eids": [k[0] for k in keys], "vers": [k[1] for k in keys]}
        )
        return [
            ChunkRecord(
                chunk_id=chunk_id(r[0], r[1], r[2]),
                element_id=r[0],
                version=r[1],
                index=r[2],
                text=r[3],
                embedding=None if r[4] is None else r[4].to_list(),
                element_type=r[5],
                name=r[6],
                sensitivity_rank=r[7],
                scope=r[8],
                valid_from=r[9],
                valid_to=r[10],
                filter_values=r[11],
            )
            for r in rows
        ]

    async def load_edges(self, keys: Sequence[tuple[str, str, str]]) -> list[GraphEdge]:
        """Edges by key, with their current validity."""
        wanted = [k for k in keys if all(q.storable(part) for part in k)]
        if not wanted:
            return []
        rows = await self._select(
            q.LOAD_EDGES,
            {
                "s": [k[0] for k in wanted],
                "r": [k[1] for k in wanted],
                "t": [k[2] for k in wanted],
            },
        )
        return [pv.edge(r) for r in rows]

    async def counts(self) -> Mapping[str, int]:
        """Row counts for `stats`."""
        states, elements, chunks, edges, pending = (await self._select(q.COUNTS))[0]
        return {
            "states": states,
            "elements": elements,
            "chunks": chunks,
            "edges": edges,
            "pending": pending,
        }

    async def expected_chunks(self) -> dict[str, int]:
        """Every chunk id with its state's `valid_to`."""
        return dict(await self._select(q.EXPECTED_CHUNKS))

    async def expected_edges(self) -> dict[tuple[str, str, str], tuple[int, int]]:
        """Every edge key with its `(valid_from, valid_to)`."""
        rows = await self._select(q.EXPECTED_EDGES)
        return {(s, r, t): (vf, vt) for s, r, t, vf, vt in rows}

    async def live_element_ids(self, prefix: str) -> list[str]:
        """Current, non-tombstoned ids starting with `prefix`, sorted by code point."""
        if not q.storable(prefix):
            return []
        return [row[0] for row in await self._select(q.LIVE_ELEMENT_IDS, {"prefix": prefix})]

    async def latest_versions(self) -> dict[str, int]:
        """Every element id with its newest version (tombstones included)."""
        return dict(await self._select(q.LATEST_VERSIONS))

    async def pending_counts(self) -> dict[str, int]:
        """Outbox entries per store."""
        return dict(await self._select(q.PENDING_COUNTS))

    async def enqueue(
        self, store: str, kind: Literal["state", "edge"], keys: Sequence[tuple[str | int, ...]]
    ) -> None:
        """Add outbox entries for `store`, as a commit would have."""
        if not q.storable(store):
            raise UserError("PostgreSQL cannot store this store name", field="store", value=store)
        await self._write_many(q.INSERT_OUTBOX, [(store, kind, json.dumps(list(k))) for k in keys])

    # -- vector store ---------------------------------------------------------------------
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
        await self._write_many(
            q.UPSERT_VECTOR_CHUNK,
            [
                (
                    c.chunk_id,
                    c.element_id,
                    c.version,
                    c.element_type,
                    c.sensitivity_rank,
                    c.scope,
                    c.valid_from,
                    c.valid_to,
                    Jsonb(dict(c.filter_values)),
                    c.text,
                    pv.vector(c.embedding or ()),
                )
                for c in pv.last_per_id(chunks)
            ],
        )

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
        """
        if len(embedding) != self._dimension:
            raise ConnectorError(
                self.name, f"query embedding has {len(embedding)} dimensions, not {self._dimension}"
            )
        if k <= 0:
            return []
        where, params = q.compile_filter(search_filter, table="v")
        params.update(q=pv.vector(embedding), k=int(k))
        async with self._connection() as conn, conn.transaction():
            rows: list[Any] = []
            if not self._exact:
                await conn.execute(
                    "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                    "set_config('hnsw.ef_search', %s, true), "
                    "set_config('hnsw.max_scan_tuples', %s, true)",
                    (str(max(self._ef_search, min(int(k), 1000))), str(self._max_scan_tuples)),
                )
                cur = await conn.execute(q.nearest_sql(where, exact=False).encode(), params)
                rows = await cur.fetchall()
            if len(rows) < k:
                await conn.execute("SELECT set_config('enable_indexscan', 'off', true)")
                cur = await conn.execute(q.nearest_sql(where, exact=True).encode(), params)
                rows = await cur.fetchall()
        return [
            ChunkHit(chunk_id=r[0], element_id=r[1], version=r[2], text=r[3], score=float(r[4]))
            for r in rows
        ]

    # -- lexical leg ----------------------------------------------------------------------
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
                    lexical.UPSERT_TEXT_CHUNK,
                    [
                        (
                            c.chunk_id,
                            c.element_id,
                            c.version,
                            c.element_type,
                            c.sensitivity_rank,
                            c.scope,
                            c.valid_from,
                            c.valid_to,
                            Jsonb(dict(c.filter_values)),
                            c.name,
                            c.text,
                        )
                        for c in unique
                    ],
                )
            # A metadata-only update (a retired state) leaves the term index alone.
            fresh = [c for c in unique if stored.get(c.chunk_id) != (c.name, c.text)]
            await lexical.index_terms(conn, [(c.chunk_id, c.name, c.text) for c in fresh])

    async def text_chunk_states(self) -> dict[str, int]:
        """Every chunk id in the text store with its `valid_to`."""
        return dict(await self._select("SELECT chunk_id, valid_to FROM text_chunks"))

    async def delete_text_chunks(self, chunk_ids: Sequence[str]) -> None:
        """Delete chunks by id (their term rows go with them)."""
        ids = pv.storable(chunk_ids)
        if ids:
            async with self._connection() as conn:
                await conn.execute(
                    "DELETE FROM text_chunks WHERE chunk_id = ANY(%s::text[])", (ids,)
                )

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
        where, params = q.compile_filter(search_filter, table="t")
        params.update(terms=terms, k=int(k), k1=BM25_K1, b=BM25_B)
        rows = await self._select(lexical.bm25_sql(where), params)
        return [
            ChunkHit(chunk_id=r[0], element_id=r[1], version=r[2], text=r[3], score=float(r[4]))
            for r in rows
        ]


# -- helpers ---------------------------------------------------------------------------
