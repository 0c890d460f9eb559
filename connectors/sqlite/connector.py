"""SQLite: the embedded system of record (RelationalCapable) and a BM25 lexical leg.

One database file. Writes go through one connection under a lock (SQLite has one writer);
reads use a connection per worker thread, which WAL mode lets run beside the writer. The
lexical leg's methods come from the mixin `connectors.sqlite.lexical.SQLiteTextLeg`.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from connectors.base import Connector, RelationalCapable
from connectors.contract.aggregation import StateAggregates, StateAggregation
from connectors.contract.errors import ConnectorError
from connectors.contract.graph_shape import GraphShape, ShapeClearance, assets_by_node
from connectors.contract.records import OPEN, ChunkRecord, GraphEdge
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
from connectors.sqlite import aggregation as sqlite_aggregation
from connectors.sqlite import text as sqlite_text
from connectors.sqlite.connections import SQLiteConnections
from connectors.sqlite.consistency import SQLiteConsistency
from connectors.sqlite.current_heads import CurrentHeads, NotHeld, log_changes
from connectors.sqlite.graph_reads import BRIDGE_ASSETS, BRIDGES, GRAPH_SHAPE, view_parameters
from connectors.sqlite.json_rows import read_json_rows
from connectors.sqlite.lexical import SQLiteTextLeg
from connectors.sqlite.saved_queries import SavedQueryFile, move_from_store
from connectors.sqlite.schema import (
    CHUNK_TEXTS_SQL,
    HEAD_SELECT,
    HEAD_SELECT_WITHOUT_VALUES,
    INSERT_CHUNK_SQL,
    INSERT_STATE_SQL,
    LIVE_EDGES_SQL,
    LOAD_CHUNKS_SQL,
    LOAD_CHUNKS_WITHOUT_EMBEDDING_SQL,
    SCHEMA,
    STATE_SELECT,
    VERSIONS_SQL,
    state_rows_sql,
)
from connectors.sqlite.selection import select_sql
from connectors.tantivy import LexicalIndexes

T = TypeVar("T")
_WORKERS = 4  # reader threads (each with its own connection) beside the one writer


class SQLiteConnector(Connector, SQLiteConsistency, RelationalCapable, SQLiteTextLeg):
    """System of record and lexical leg in one SQLite file.

    Args:
        path: the database file (its folder is created).
    """

    name = "sqlite"

    @property
    def shared_across_processes(self) -> bool:
        """A SQLite file is.

        SQLite locks the file across processes (WAL: readers never wait for the writer), and
        this connector's caches are keyed by `PRAGMA data_version`, which other processes'
        commits change.
        """
        return True

    def __init__(self, path: str | Path) -> None:
        self._path = Path(path)
        self._db = SQLiteConnections(
            self._path,
            not_open=lambda: ConnectorError(self.name, "not connected: call connect() first"),
        )
        self._queries = SavedQueryFile(
            self._path,
            not_open=lambda: ConnectorError(self.name, "not connected: call connect() first"),
        )
        self._local = threading.local()  # per-thread caches (visible statistics)
        self._current = CurrentHeads()  # what most searches read of states (current_heads.py)
        # The lexical engine's indexes live beside the file (connectors/sqlite/lexical.py).
        self._lexical = LexicalIndexes(self._path.with_name(self._path.name + ".lexical"))
        # Our own worker threads, so that close() can wait for the calls still running: a
        # caller whose task was cancelled leaves its thread using a connection.
        self._executor: ThreadPoolExecutor | None = None
        # Set while close() waits for the running calls: a call that starts then would open
        # a new worker on connections about to be closed under it.
        self._closing = False

    # -- lifecycle ------------------------------------------------------------------------
    async def connect(self) -> None:
        """Create the file and the schema if missing."""
        if self._db.is_open:
            return
        self._closing = False
        await self._run(lambda: self._db.open(lambda writer: _set_up(writer, self._path)))
        await self._run(self._queries.open)
        await self._run(self._open_lexical)

    async def close(self) -> None:
        """Close every connection, once the calls still running in worker threads are done."""
        self._closing = True
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=True)
        self._db.close()
        self._queries.close()
        self._lexical.close()
        self._local = threading.local()
        self._current = CurrentHeads()

    def _reader(self) -> sqlite3.Connection:
        return self._db.reader()

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._db.transaction()

    def _snapshot(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._db.snapshot()

    async def _run(self, fn: Callable[[], T]) -> T:
        if self._closing:
            raise ConnectorError(self.name, "closed: call connect() first")
        if self._executor is None:
            self._executor = ThreadPoolExecutor(_WORKERS, thread_name_prefix="uda-sqlite")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn)
        except sqlite3.Error as exc:
            raise ConnectorError(self.name, f"{type(exc).__name__}: {exc}") from exc

    # -- system of record -----------------------------------------------------------------
    async def commit(self, batch: WriteBatch) -> None:
        """Write states, chunks, retirements, edges and outbox entries in one transaction."""
        await self._run(lambda: self._commit(batch))

    def _commit(self, batch: WriteBatch) -> None:
        with self._transaction() as conn:
            conn.executemany(
                "UPDATE states SET valid_to = ? WHERE element_id = ? AND version = ?",
                [(valid_to, eid, version) for eid, version, valid_to in batch.retire],
            )
            # Plain INSERT: a concurrent writer that took the same version fails loudly.
            conn.executemany(INSERT_STATE_SQL, [state_values(s, json.dumps) for s in batch.states])
            conn.executemany(
                INSERT_CHUNK_SQL, [chunk_values(c, _embedding_blob) for c in batch.chunks]
            )
            conn.executemany(
                "INSERT INTO edges VALUES (?,?,?,?,?) ON CONFLICT DO UPDATE SET "
                "valid_from = excluded.valid_from, valid_to = excluded.valid_to",
                [
                    (e.source_id, e.relation, e.target_id, e.valid_from, e.valid_to)
                    for e in batch.edges
                ],
            )
            state_keys = {(s.element_id, s.version) for s in batch.states}
            state_keys |= {(eid, version) for eid, version, _ in batch.retire}
            log_changes(conn, [eid for eid, _ in state_keys])
            outbox: list[tuple[str, str, str]] = []
            for store in batch.stores:
                outbox += [(store, "state", json.dumps(k)) for k in sorted(state_keys)]
                outbox += [(store, "edge", json.dumps(e.key)) for e in batch.edges]
            conn.executemany("INSERT INTO outbox (store, kind, key) VALUES (?,?,?)", outbox)
            if batch.hlc:
                conn.execute(
                    "INSERT INTO meta VALUES ('hlc', ?) ON CONFLICT DO UPDATE SET "
                    "value = max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
                    (str(batch.hlc),),
                )

    async def latest_states(self, element_ids: Sequence[str]) -> dict[str, StoredState]:
        """The newest state of each id (tombstones included)."""
        return await self._run(lambda: self._states(element_ids, None))

    async def fetch(self, element_ids: Sequence[str], as_of: int | None) -> dict[str, StoredState]:
        """Each id's state as of `as_of`, with the newest state's clearance, in one query."""
        return await self._run(lambda: self._states(element_ids, as_of))

    async def fetch_heads(
        self, element_ids: Sequence[str], as_of: int | None, *, filter_values: bool = True
    ) -> dict[str, StateHead]:
        """Each id's head as of `as_of` and its newest clearance, from the covering index only.

        Current heads without filter values, what most searches read, come from memory
        (`connectors.sqlite.current_heads`, ADR 56) once they are loaded.
        """
        if as_of is None and not filter_values and element_ids:
            return await self._run(lambda: self._current_heads(element_ids))
        columns = HEAD_SELECT if filter_values else HEAD_SELECT_WITHOUT_VALUES
        return await self._run(lambda: self._heads(element_ids, as_of, columns))

    async def fetch_versions(self, heads: Sequence[StateHead]) -> dict[str, StoredState]:
        """Whole states of exactly the heads' versions, with the newest clearance, one query."""
        if not heads:
            return {}
        keys = json.dumps([[h.element_id, h.version] for h in heads])

        def read() -> dict[str, StoredState]:
            rows = read_json_rows(self._reader(), VERSIONS_SQL, (keys,))
            return {row[0]: state_from_row(row) for row in rows}

        return await self._run(read)

    def _heads(
        self, element_ids: Sequence[str], as_of: int | None, columns: str
    ) -> dict[str, StateHead]:
        rows = self._state_rows(columns, element_ids, as_of)
        return {row[0]: head_from_row(row) for row in rows}

    def _current_heads(self, element_ids: Sequence[str]) -> dict[str, StateHead]:
        """From memory; until the heads are held, from the index while they load."""
        try:
            with self._snapshot() as conn:
                return self._current.heads(conn, element_ids)
        except NotHeld:
            executor = self._executor  # the load runs on ours: close() waits for it
            if executor is not None and not self._closing:
                self._current.load_in_background(executor, self._snapshot)
        return self._heads(element_ids, None, HEAD_SELECT_WITHOUT_VALUES)

    def _states(self, element_ids: Sequence[str], as_of: int | None) -> dict[str, StoredState]:
        rows = self._state_rows(STATE_SELECT, element_ids, as_of)
        return {row[0]: state_from_row(row) for row in rows}

    def _state_rows(
        self, columns: str, element_ids: Sequence[str], as_of: int | None
    ) -> list[list[Any]]:
        if not element_ids:
            return []
        return read_json_rows(
            self._reader(),
            state_rows_sql(columns, as_of),
            (json.dumps(list(element_ids)), OPEN if as_of is None else as_of),
        )

    async def select_states(self, selection: StateSelection) -> list[StoredState]:
        """One keyset page of a structured retrieval (`connectors.sqlite.selection`)."""
        sql, params = select_sql(selection)
        rows = await self._select(sql, params)
        return [state_from_row(row) for row in rows]

    async def save_queries(self, rows: Sequence[SavedQueryRow], older_than_ms: int) -> None:
        """Keep these queries and forget those created before `older_than_ms`, at once."""
        await self._run(lambda: self._queries.save(rows, older_than_ms))

    async def load_query(self, query_id: str) -> SavedQueryRow | None:
        """The saved query with this id, or None (`connectors.sqlite.saved_queries`)."""
        return await self._run(lambda: self._queries.load(query_id))

    async def instance_secret(self) -> bytes:
        """The store's random secret, made by the first caller and kept in `meta`."""

        def read_or_make() -> bytes:
            with self._transaction() as conn:
                conn.execute(
                    "INSERT INTO meta VALUES ('secret', ?) ON CONFLICT DO NOTHING",
                    (secrets.token_hex(32),),
                )
                row = conn.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone()
            return bytes.fromhex(row[0])

        return await self._run(read_or_make)

    async def embedding_model(self) -> str | None:
        """The recorded model fingerprint (`meta`'s `embedding_model`), if any."""
        rows = await self._select("SELECT value FROM meta WHERE key = 'embedding_model'")
        return str(rows[0][0]) if rows else None

    async def claim_embedding_model(self, fingerprint: str) -> str:
        """Record `fingerprint` unless a model is recorded; the recorded one."""

        def claim() -> str:
            with self._transaction() as conn:
                conn.execute(
                    "INSERT INTO meta VALUES ('embedding_model', ?) ON CONFLICT DO NOTHING",
                    (fingerprint,),
                )
                row = conn.execute(
                    "SELECT value FROM meta WHERE key = 'embedding_model'"
                ).fetchone()
            return str(row[0])

        return await self._run(claim)

    async def live_edges(self, element_ids: Sequence[str]) -> list[GraphEdge]:
        """Current edges touching any of the ids."""
        rows = await self._select(LIVE_EDGES_SQL, (json.dumps(list(element_ids)), OPEN))
        return [_edge(r) for r in rows]

    async def last_hlc(self) -> int:
        """The highest HLC committed."""
        rows = await self._select("SELECT value FROM meta WHERE key = 'hlc'")
        return int(rows[0][0]) if rows else 0

    async def pending(self, store: str, limit: int) -> list[OutboxItem]:
        """Outbox entries for `store`, oldest first."""
        rows = await self._select(
            "SELECT seq, kind, key FROM outbox WHERE store = ? ORDER BY seq LIMIT ?", (store, limit)
        )
        return [
            OutboxItem(seq=seq, store=store, kind=kind, key=tuple(json.loads(key)))
            for seq, kind, key in rows
        ]

    async def acknowledge(self, store: str, items: Sequence[OutboxItem]) -> None:
        """Delete applied outbox entries."""
        await self._write_many(
            "DELETE FROM outbox WHERE store = ? AND seq = ?", [(store, i.seq) for i in items]
        )

    async def load_chunks(
        self, state_keys: Sequence[tuple[str, int]], *, embeddings: bool = True
    ) -> list[ChunkRecord]:
        """Chunks of the given states, with metadata from their state rows."""
        sql = LOAD_CHUNKS_SQL if embeddings else LOAD_CHUNKS_WITHOUT_EMBEDDING_SQL

        def query() -> list[ChunkRecord]:
            rows = self._reader().execute(sql, (json.dumps([list(k) for k in state_keys]),))
            return [
                chunk_record_from_row(r, embedding=_embedding_list, filter_values=json.loads)
                for r in rows
            ]

        return await self._run(query)

    async def chunk_texts(self, chunks: Sequence[tuple[str, int, str]]) -> dict[str, str]:
        """The text of each chunk, by chunk id, in one lookup of the chunks' primary key."""
        if not chunks:
            return {}
        ids = json.dumps(list(dict.fromkeys(cid for _, _, cid in chunks)))
        return await self._run(
            lambda: dict(read_json_rows(self._reader(), CHUNK_TEXTS_SQL, (ids,)))
        )

    async def load_edges(self, keys: Sequence[tuple[str, str, str]]) -> list[GraphEdge]:
        """Edges by key, with their current validity."""

        def query() -> list[GraphEdge]:
            rows = self._reader().execute(
                """WITH keys(s, r, t) AS (
                       SELECT DISTINCT json_extract(value, '$[0]'), json_extract(value, '$[1]'),
                              json_extract(value, '$[2]') FROM json_each(?))
                   SELECT e.source_id, e.relation, e.target_id, e.valid_from, e.valid_to
                   FROM keys JOIN edges e
                     ON e.source_id = keys.s AND e.relation = keys.r AND e.target_id = keys.t""",
                (json.dumps([list(k) for k in keys]),),
            )
            return [_edge(r) for r in rows]

        return await self._run(query)

    async def counts(self) -> Mapping[str, int]:
        """Row counts for `stats`."""

        def query() -> dict[str, int]:
            conn = self._reader()
            one: Callable[[str], int] = lambda sql: int(conn.execute(sql).fetchone()[0])  # noqa: E731
            return {
                "states": one("SELECT count(*) FROM states"),
                "elements": one(
                    f"SELECT count(*) FROM states WHERE valid_to = {OPEN} AND NOT tombstone"  # noqa: S608
                ),
                "chunks": one("SELECT count(*) FROM chunks"),
                "edges": one(f"SELECT count(*) FROM edges WHERE valid_to = {OPEN}"),  # noqa: S608
                "pending": one("SELECT count(*) FROM outbox"),
            }

        return await self._run(query)

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
        rows = await self._select(BRIDGES, (*view_parameters(asset_types, clearance), widest))
        return [str(row[0]) for row in rows]

    async def bridge_assets(
        self, nodes: Sequence[str], asset_types: Sequence[str], clearance: ShapeClearance
    ) -> dict[str, list[str]]:
        """The assets adjacent to each of `nodes` that `clearance` sees; one statement."""
        view = view_parameters(asset_types, clearance)
        return assets_by_node(await self._select(BRIDGE_ASSETS, (*view, json.dumps(list(nodes)))))

    async def tuning(self) -> str | None:
        """The document `uda tune` recorded last (`meta`'s `tuning`), if any."""
        rows = await self._select("SELECT value FROM meta WHERE key = 'tuning'")
        return str(rows[0][0]) if rows else None

    async def record_tuning(self, document: str | None) -> None:
        """Keep `document` as `meta`'s `tuning`, replacing the one before (None: forget it)."""

        def record() -> None:
            with self._transaction() as conn:
                if document is None:
                    conn.execute("DELETE FROM meta WHERE key = 'tuning'")
                    return
                conn.execute(
                    "INSERT INTO meta VALUES ('tuning', ?) "
                    "ON CONFLICT DO UPDATE SET value = excluded.value",
                    (document,),
                )

        await self._run(record)

    async def _select(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return await self._run(lambda: self._reader().execute(sql, params).fetchall())

    async def _write_many(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
        def write() -> None:
            with self._transaction() as conn:
                conn.executemany(sql, rows)

        await self._run(write)

    # -- aggregates -------------------------------------------------------------------------
    async def aggregate_states(self, aggregation: StateAggregation) -> StateAggregates | None:
        """Counts by group in one statement, or None (`connectors.sqlite.aggregation`)."""
        return await sqlite_aggregation.aggregate_states(self._select, aggregation)


def _embedding_blob(embedding: Sequence[float]) -> bytes:
    return np.asarray(embedding, dtype=np.float32).tobytes()


def _embedding_list(blob: bytes) -> list[float]:
    return np.frombuffer(blob, dtype=np.float32).tolist()


def _edge(row: Any) -> GraphEdge:
    return GraphEdge(
        source_id=row[0], relation=row[1], target_id=row[2], valid_from=row[3], valid_to=row[4]
    )


def _set_up(writer: sqlite3.Connection, path: Path) -> None:
    writer.executescript(SCHEMA)
    sqlite_text.upgrade(writer)
    move_from_store(writer, path)
