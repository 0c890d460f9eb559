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
import secrets
from collections.abc import Mapping, Sequence
from typing import Literal

from psycopg.types.json import Jsonb

from connectors.base import RelationalCapable
from connectors.contract.aggregation import StateAggregates, StateAggregation
from connectors.contract.errors import ConnectorError, UserError
from connectors.contract.graph_shape import GraphShape, ShapeClearance, assets_by_node
from connectors.contract.records import ChunkRecord, GraphEdge
from connectors.contract.saved_queries import SavedQueryRow
from connectors.contract.selection import StateSelection
from connectors.contract.system_of_record import (
    OutboxItem,
    StateHead,
    StoredState,
    WriteBatch,
    chunk_record_from_row,
    chunk_values,
    head_from_row,
    state_from_row,
    state_values,
)
from connectors.postgres import aggregation as postgres_aggregation
from connectors.postgres import record_partitions
from connectors.postgres import record_sql as q
from connectors.postgres import values as pv
from connectors.postgres.aggregation import Select
from connectors.postgres.filter_sql import storable
from connectors.postgres.graph_reads import BRIDGE_ASSETS, BRIDGES, GRAPH_SHAPE, view_parameters
from connectors.postgres.lexical import PostgresTextLeg
from connectors.postgres.selection import select_sql
from connectors.postgres.vector import PostgresVectorLeg


class PostgresConnector(PostgresVectorLeg, PostgresTextLeg, RelationalCapable):
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

    @property
    def shared_across_processes(self) -> bool:
        """A server: every process sees every committed write."""
        return True

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
                    q.INSERT_STATE.encode(), [state_values(s, Jsonb) for s in batch.states]
                )
            if batch.chunks:
                upsert = (
                    record_partitions.UPSERT_CHUNK if self._record_partitioned else q.UPSERT_CHUNK
                )
                await cur.executemany(
                    upsert.encode(), [chunk_values(c, pv.vector) for c in batch.chunks]
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
        await self._wrote(len(batch.states) + len(batch.chunks) + len(batch.edges))

    async def latest_states(self, element_ids: Sequence[str]) -> dict[str, StoredState]:
        """The newest state of each id (tombstones included).

        From the primary, never a standby: the write path numbers the next versions after
        them.
        """
        return await self._states(element_ids, None, self._select)

    async def fetch(self, element_ids: Sequence[str], as_of: int | None) -> dict[str, StoredState]:
        """Each id's state as of `as_of`, with the newest state's clearance, in one query."""
        return await self._states(element_ids, as_of, self._read_select)

    async def fetch_heads(
        self, element_ids: Sequence[str], as_of: int | None, *, filter_values: bool = True
    ) -> dict[str, StateHead]:
        """Each id's head as of `as_of` and its newest clearance, without the payload."""
        ids = pv.storable(element_ids)
        if not ids:
            return {}
        sql = q.heads_sql(as_of, filter_values)
        rows = await self._read_select(sql, {"ids": ids, "as_of": as_of})
        return {row[0]: head_from_row(row) for row in rows}

    async def fetch_versions(self, heads: Sequence[StateHead]) -> dict[str, StoredState]:
        """Whole states of exactly the heads' versions, with the newest clearance, one query."""
        if not heads:
            return {}
        params = {"eids": [h.element_id for h in heads], "vers": [h.version for h in heads]}
        rows = await self._read_select(q.VERSIONS, params)
        return {row[0]: state_from_row(row) for row in rows}

    async def _states(
        self, element_ids: Sequence[str], as_of: int | None, select: Select
    ) -> dict[str, StoredState]:
        ids = pv.storable(element_ids)
        if not ids:
            return {}
        rows = await select(q.states_sql(as_of), {"ids": ids, "as_of": as_of})
        return {row[0]: state_from_row(row) for row in rows}

    async def select_states(self, selection: StateSelection) -> list[StoredState]:
        """One keyset page of a structured retrieval (`connectors.postgres.selection`)."""
        sql, params = select_sql(selection)
        rows = await self._read_select(sql, params)
        return [state_from_row(row) for row in rows]

    async def save_queries(self, rows: Sequence[SavedQueryRow], older_than_ms: int) -> None:
        """Keep these queries and forget those created before `older_than_ms`, at once."""
        kept = [r for r in rows if storable(r.query_id) and storable(r.body)]
        async with self._connection() as conn, conn.transaction(), conn.cursor() as cur:
            if kept:
                await cur.executemany(
                    "INSERT INTO saved_queries (query_id, owner, created_ms, body, embedding) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    [
                        (
                            r.query_id,
                            r.owner if r.owner is None or storable(r.owner) else None,
                            r.created_ms,
                            r.body,
                            r.embedding,
                        )
                        for r in kept
                    ],
                )
            if older_than_ms:
                await cur.execute(
                    "DELETE FROM saved_queries WHERE created_ms < %s", (older_than_ms,)
                )

    async def load_query(self, query_id: str) -> SavedQueryRow | None:
        """The saved query with this id, or None."""
        if not storable(query_id):
            return None
        rows = await self._select(
            "SELECT query_id, owner, created_ms, body, embedding FROM saved_queries "
            "WHERE query_id = %(id)s",
            {"id": query_id},
        )
        if not rows:
            return None
        qid, owner, created_ms, body, embedding = rows[0]
        return SavedQueryRow(
            query_id=qid,
            owner=owner,
            created_ms=created_ms,
            body=body,
            embedding=None if embedding is None else bytes(embedding),
        )

    async def instance_secret(self) -> bytes:
        """The store's random secret, made by the first caller and kept in `secrets`."""
        async with self._connection() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO secrets (key, value) VALUES ('cursor', %s) ON CONFLICT DO NOTHING",
                (secrets.token_bytes(32),),
            )
            cur = await conn.execute("SELECT value FROM secrets WHERE key = 'cursor'")
            row = await cur.fetchone()
        if row is None:  # pragma: no cover - inserted just above
            raise ConnectorError(self.name, "the store's secret could not be made")
        return bytes(row[0])

    async def embedding_model(self) -> str | None:
        """The recorded model fingerprint (`settings`' `embedding_model`), if any."""
        rows = await self._select("SELECT value FROM settings WHERE key = 'embedding_model'")
        return str(rows[0][0]) if rows else None

    async def claim_embedding_model(self, fingerprint: str) -> str:
        """Record `fingerprint` unless a model is recorded; the recorded one."""
        async with self._connection() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO settings (key, value) VALUES ('embedding_model', %s) "
                "ON CONFLICT DO NOTHING",
                (fingerprint,),
            )
            cur = await conn.execute("SELECT value FROM settings WHERE key = 'embedding_model'")
            row = await cur.fetchone()
        if row is None:  # pragma: no cover - inserted just above
            raise ConnectorError(self.name, "the store's embedding model could not be recorded")
        return str(row[0])

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
        if not storable(store):
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
        if not items or not storable(store):
            return
        async with self._connection() as conn:
            await conn.execute(
                "DELETE FROM outbox WHERE store = %s AND seq = ANY(%s::bigint[])",
                (store, [i.seq for i in items]),
            )

    async def load_chunks(
        self, state_keys: Sequence[tuple[str, int]], *, embeddings: bool = True
    ) -> list[ChunkRecord]:
        """Chunks of the given states, with metadata from their state rows."""
        keys = [(eid, int(v)) for eid, v in state_keys if storable(eid)]
        if not keys:
            return []
        rows = await self._select(
            q.LOAD_CHUNKS if embeddings else q.LOAD_CHUNKS_WITHOUT_EMBEDDING,
            {"eids": [k[0] for k in keys], "vers": [k[1] for k in keys]},
        )
        # pgvector reads a vector as its `Vector`; psycopg reads JSONB as a dict.
        return [
            chunk_record_from_row(
                r, embedding=lambda stored: stored.to_list(), filter_values=lambda stored: stored
            )
            for r in rows
        ]

    async def chunk_texts(self, chunks: Sequence[tuple[str, int, str]]) -> dict[str, str]:
        """The text of each chunk, by chunk id, looked up by (element, version) and id."""
        keys = [(e, int(v), c) for e, v, c in chunks if storable(e) and storable(c)]
        if not keys:
            return {}
        rows = await self._read_select(
            q.CHUNK_TEXTS,
            {
                "eids": [k[0] for k in keys],
                "vers": [k[1] for k in keys],
                "cids": [k[2] for k in keys],
            },
        )
        return {row[0]: row[1] for row in rows}

    async def load_edges(self, keys: Sequence[tuple[str, str, str]]) -> list[GraphEdge]:
        """Edges by key, with their current validity."""
        wanted = [k for k in keys if all(storable(part) for part in k)]
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

    async def graph_shape(
        self, asset_types: Sequence[str], clearance: ShapeClearance
    ) -> GraphShape:
        """The current graph's shape as `clearance` sees it, in one statement."""
        rows = await self._select(GRAPH_SHAPE, view_parameters(asset_types, clearance))
        return GraphShape.of_row(tuple(rows[0]))

    async def bridges(
        self, asset_types: Sequence[str], clearance: ShapeClearance, widest: int
    ) -> list[str]:
        """Nodes adjacent to two to `widest` assets `clearance` sees, sorted; one statement."""
        params = {**view_parameters(asset_types, clearance), "widest": widest}
        return [str(row[0]) for row in await self._select(BRIDGES, params)]

    async def bridge_assets(
        self, nodes: Sequence[str], asset_types: Sequence[str], clearance: ShapeClearance
    ) -> dict[str, list[str]]:
        """The assets adjacent to each of `nodes` that `clearance` sees; one statement."""
        params = {**view_parameters(asset_types, clearance), "nodes": pv.storable(nodes)}
        return assets_by_node(await self._select(BRIDGE_ASSETS, params))

    async def tuning(self) -> str | None:
        """The document `uda tune` recorded last (`settings`' `tuning`), if any."""
        rows = await self._select("SELECT value FROM settings WHERE key = 'tuning'")
        return str(rows[0][0]) if rows else None

    async def record_tuning(self, document: str | None) -> None:
        """Keep `document` as `settings`' `tuning`, replacing the one before (None: forget)."""
        async with self._connection() as conn, conn.transaction():
            if document is None:
                await conn.execute("DELETE FROM settings WHERE key = 'tuning'")
                return
            await conn.execute(
                "INSERT INTO settings (key, value) VALUES ('tuning', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (document,),
            )

    async def expected_chunks(self) -> dict[str, int]:
        """Every chunk id with its state's `valid_to`."""
        return dict(await self._select(q.EXPECTED_CHUNKS))

    async def expected_edges(self) -> dict[tuple[str, str, str], tuple[int, int]]:
        """Every edge key with its `(valid_from, valid_to)`."""
        rows = await self._select(q.EXPECTED_EDGES)
        return {(s, r, t): (vf, vt) for s, r, t, vf, vt in rows}

    async def live_element_ids(self, prefix: str) -> list[str]:
        """Current, non-tombstoned ids starting with `prefix`, sorted by code point."""
        if not storable(prefix):
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
        if not storable(store):
            raise UserError("PostgreSQL cannot store this store name", field="store", value=store)
        await self._write_many(q.INSERT_OUTBOX, [(store, kind, json.dumps(list(k))) for k in keys])

    async def aggregate_states(self, aggregation: StateAggregation) -> StateAggregates | None:
        """Counts by group in one statement, or None (`connectors.postgres.aggregation`)."""
        return await postgres_aggregation.aggregate_states(self._read_select, aggregation)
