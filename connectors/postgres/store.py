"""The PostgreSQL connection every role of the connector shares: settings, schema, pool.

`PostgresStore` opens the pool (pgvector's types registered on every connection), creates
the extension, schema and tables under an advisory lock, and turns every psycopg error into
a `ConnectorError` (a `TransientBackendError` when the next try may pass). The roles
(`connectors/postgres/connector.py`, `vector.py`, `lexical.py`) are mixins over it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection, sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from connectors.base import Connector
from connectors.contract.errors import ConfigError, ConnectorError, TransientBackendError
from connectors.postgres import partitions, record_partitions, tables
from connectors.postgres import text as lexical
from connectors.postgres.replicas import PRIMARY_POSITION, ReadRouter, Standby

T = TypeVar("T")

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_SCHEMA_LOCK = 0x0DA5C4E  # pg_advisory_xact_lock key: one schema migration at a time
_HNSW_MAX_DIMENSION = 2000
# How long the pool's own reconnection of a lost connection keeps trying (its delays double
# from 1 s): then it stops, and the next call that wants a connection starts afresh at once.
# Left at psycopg_pool's 300 s, a server back after a 20 s outage waited up to 16 s more for
# the next attempt; a search's deadline is far shorter than that.
_RECONNECT_S = 3.0
# Failures the next try may pass: a serialization failure, a deadlock, and a server that
# ended or refused this connection (shut down, restarting, not yet accepting). Class 08 is
# every connection exception.
_TRANSIENT_STATES = frozenset({"40001", "40P01", "57P01", "57P02", "57P03"})


# Rows written (states, chunks, terms, edges) between two ANALYZE runs: see `_wrote`.
ANALYZE_AFTER_ROWS = 5000


class PostgresStore(Connector):
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
        standbys: hot standbys of this server (DSNs): a search reads there once they have
            replayed what was acknowledged before it began (`connectors.postgres.replicas`).
        partition_by: "scope" to partition the vector store by project scope, so that a
            project-bound search reads its projects' partitions only
            (`connectors.postgres.partitions`), and the record's states and chunks by a
            hash of the element id (`connectors.postgres.record_partitions`); "none" (the
            default) for plain tables. Chosen
            when the schema is made.
    """

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
        standbys: Sequence[str] = (),
        partition_by: str = "none",
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
        # A profile's TOML may hold anything here: a lone string would be read letter by letter.
        if isinstance(standbys, str) or not all(
            isinstance(d, str) and d  # pyright: ignore[reportUnnecessaryIsInstance]
            for d in standbys
        ):
            raise ConfigError(
                "standbys must be a list of connection strings", field="standbys", value=standbys
            )
        self._standby_dsns = tuple(standbys)
        if partition_by not in ("none", "scope"):
            raise ConfigError(
                "partition_by must be 'none' or 'scope'", field="partition_by", value=partition_by
            )
        self._partitioned = partition_by == "scope"
        # Whether `states` and `chunks` are hash-partitioned (read from the schema).
        self._record_partitioned = False
        # Scopes whose vector partition exists (made by this or another connector).
        self._parts: set[str] = set()
        self._pool: AsyncConnectionPool[AsyncConnection[Any]] | None = None
        self._router: ReadRouter | None = None
        self._sweep: asyncio.Task[None] | None = None
        self._rows_since_analyze = 0
        # The lexical leg's visible statistics per filter, with their generation.
        self._visible_stats: dict[tuple[str, str], tuple[int, float, float]] = {}

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
        pool = self._new_pool(self._dsn, f"uda-{self.name}")
        try:
            await pool.open(wait=True, timeout=self._timeout)
        except psycopg.Error as exc:
            await pool.close()
            raise ConnectorError(self.name, f"cannot open the pool: {exc}") from exc
        self._pool = pool
        if self._standby_dsns:
            self._router = await self._open_standbys()

    def _new_pool(self, dsn: str, name: str) -> AsyncConnectionPool[AsyncConnection[Any]]:
        return AsyncConnectionPool(
            dsn,
            kwargs={"autocommit": True},
            min_size=1,
            max_size=self._pool_size,
            open=False,
            configure=self._configure,
            timeout=self._timeout,
            reconnect_timeout=_RECONNECT_S,
            name=name,
        )

    async def _open_standbys(self) -> ReadRouter:
        """A pool per standby, opened without waiting.

        A standby that is down now does not keep the connector from starting: reads pass
        it over until it answers.
        """
        standbys: list[Standby] = []
        for number, dsn in enumerate(self._standby_dsns, start=1):
            pool = self._new_pool(dsn, f"uda-{self.name}-standby-{number}")
            await pool.open(wait=False)
            standbys.append(Standby(label=f"{self.name} standby {number}", pool=pool))
        return ReadRouter(standbys=standbys)

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
            await conn.execute(
                tables.schema(
                    self._dimension,
                    vector_table=not self._partitioned,
                    record_partitions=self._partitioned,
                ).encode()
            )
            if self._partitioned:
                await conn.execute(partitions.vector_schema(self._dimension).encode())
            await self._check_layout(conn)
            cur = await conn.execute(record_partitions.CHUNKS_TABLE_KIND.encode())
            row = await cur.fetchone()
            # A schema made before the record was partitioned keeps its plain tables.
            self._record_partitioned = row is not None and row[0] == "p"
            if self._record_partitioned:
                await conn.execute(record_partitions.record_partitions().encode())
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

    async def _check_layout(self, conn: AsyncConnection[Any]) -> None:
        """The vector table must be as `partition_by` says: a schema keeps its layout."""
        cur = await conn.execute(partitions.VECTOR_TABLE_KIND.encode())
        row = await cur.fetchone()
        partitioned = row is not None and row[0] == "p"
        if partitioned != self._partitioned:
            raise ConnectorError(
                self.name,
                f"schema {self._schema!r} holds a "
                + ("partitioned" if partitioned else "plain")
                + " vector table, and partition_by is "
                + repr("scope" if self._partitioned else "none")
                + ": use the schema's layout, or another schema (uda sync fills it)",
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
        # Our statements are batched lookups that take milliseconds. Starting parallel workers
        # costs more than that: the lexical leg's statistics scan, skipped by a one-time
        # filter when cached, still launched two workers per query (7 ms of a 26 ms statement
        # at 100k chunks).
        await conn.execute("SET max_parallel_workers_per_gather = 0")

    async def close(self) -> None:
        """Close the pools."""
        pool, self._pool = self._pool, None
        router, self._router = self._router, None
        if router is not None:
            await router.close()
        sweep, self._sweep = self._sweep, None
        if sweep is not None and not sweep.done():
            sweep.cancel()
            await asyncio.wait({sweep})
        if pool is not None:
            await pool.close()

    @asynccontextmanager
    async def _connection(self) -> AsyncGenerator[AsyncConnection[Any]]:
        """A pooled connection; every psycopg error inside becomes a `ConnectorError`."""
        if self._pool is None:
            raise ConnectorError(self.name, "not connected: call connect() first")
        used: AsyncConnection[Any] | None = None
        try:
            async with self._pool.connection() as conn:
                used = conn
                yield conn
        except psycopg.Error as exc:
            message = f"{type(exc).__name__}: {exc}"
            if used is not None and used.broken:
                self._sweep_idle()
            if _transient(exc, used):
                raise TransientBackendError(self.name, message) from exc
            raise ConnectorError(self.name, message) from exc

    def _sweep_idle(self) -> None:
        """A connection was lost: test the idle ones in the background for the retry.

        A restarted server dropped every pooled connection, and the pool notices only when
        each is used, one failed call at a time. The check is not awaited here: a caller's
        deadline may cancel it, and a check cancelled half-way loses the connections it
        holds.
        """
        pool = self._pool
        if pool is None or (self._sweep is not None and not self._sweep.done()):
            return
        self._sweep = asyncio.get_running_loop().create_task(pool.check())
        self._sweep.add_done_callback(_quiet)

    async def _select(self, query: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        async with self._connection() as conn:
            cur = await conn.execute(query.encode(), params)
            return await cur.fetchall()

    async def _read(self, work: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """`work` for a search: on a standby that is current enough, if any, else here.

        Only reads that answer searches come here; the write path's reads (the newest
        versions, the outbox) and saved queries stay on the primary.
        """
        router = self._router
        if router is None:
            return await self._on_primary(work)
        try:
            return await router.read(work, primary=self._on_primary, position=self._position)
        except psycopg.Error as exc:  # from a standby: the primary's are mapped already
            message = f"{type(exc).__name__}: {exc}"
            if _transient(exc, None):
                raise TransientBackendError(self.name, message) from exc
            raise ConnectorError(self.name, message) from exc

    async def _read_select(self, query: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """`_select` for a search's read (`_read`)."""

        async def work(conn: AsyncConnection[Any]) -> list[Any]:
            cur = await conn.execute(query.encode(), params)
            return await cur.fetchall()

        return await self._read(work)

    async def _on_primary(self, work: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        async with self._connection() as conn:
            return await work(conn)

    async def _position(self) -> int:
        """The primary's WAL position now (the fence of `connectors.postgres.replicas`)."""
        async with self._connection() as conn:
            cur = await conn.execute(PRIMARY_POSITION)
            row = await cur.fetchone()
        return 0 if row is None else int(row[0])

    def read_counts(self) -> dict[str, int]:
        """Search reads served by each server since connecting (empty without standbys)."""
        return {} if self._router is None else self._router.counts()

    async def _write_many(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        async with self._connection() as conn, conn.transaction(), conn.cursor() as cur:
            await cur.executemany(query.encode(), rows)
        await self._wrote(len(rows))

    async def _wrote(self, rows: int) -> None:
        """Refresh the planner's statistics once bulk writes have changed the tables.

        Autovacuum analyses a table only past its change threshold and after its nap (a
        minute by default). Until then a freshly filled table has no statistics and the
        planner plans for an empty one: right after a 10k-chunk ingest the benchmark measured
        a Phase-1 p50 of 427 ms, against 14 ms a minute later. One ANALYZE per
        `ANALYZE_AFTER_ROWS` written rows costs a fraction of the writes themselves.
        """
        self._rows_since_analyze += rows
        if self._rows_since_analyze < ANALYZE_AFTER_ROWS:
            return
        self._rows_since_analyze = 0
        async with self._connection() as conn:
            await conn.execute(b"ANALYZE")


def _transient(exc: psycopg.Error, conn: AsyncConnection[Any] | None) -> bool:
    """Whether the next try may pass: a lost connection, or a state that says so.

    The pool replaces a lost connection. Not a pool that waited in vain for a connection:
    the server is down, and trying again only spends the deadline.
    """
    if isinstance(exc, PoolTimeout):
        return False
    state = exc.sqlstate
    if state is not None:
        return state in _TRANSIENT_STATES or state.startswith("08")
    return conn is not None and conn.broken


def _quiet(task: asyncio.Task[None]) -> None:
    """A sweep's own failure is the server's: the next call meets it and says so."""
    if not task.cancelled():
        task.exception()
