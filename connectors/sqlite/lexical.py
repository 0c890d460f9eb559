"""The SQLite lexical leg as a mixin of the connector: TextCapable over `text_chunks`.

The statements on one connection are in `connectors.sqlite.text`; this class runs them on
the connector's worker threads, with its writer and per-thread readers, and caches the
visible chunks' statistics per thread. The connector (`connectors.sqlite.connector`)
provides the hooks declared here: they are its lifecycle and thread plumbing, which the
system of record shares.

Searches of current chunks by clearance and type take the engine's path
(`connectors.sqlite.lexical_engine`: Tantivy finds candidates, the store scores them
exactly); `as_of` reads, value filters and an engine index that is behind take the
exhaustive path (`connectors.sqlite.lexical_exhaustive`: FTS5 postings, the same packed
terms), which gives the same scores (ADR 50, ADR 60). Every text write updates the engine's
indexes inside its transaction, which SQLite's write lock serialises across processes.
"""

from __future__ import annotations

import sqlite3
import threading
from abc import abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from connectors.analyzer import query_terms
from connectors.base import TextCapable
from connectors.contract.records import OPEN, ChunkHit, ChunkRecord, SearchFilter
from connectors.sql_filters import compile_filter
from connectors.sqlite import lexical_engine, lexical_exhaustive, lexical_stats, postings
from connectors.sqlite import text as sqlite_text
from connectors.sqlite.schema import VISIBLE_STATS_SQL
from connectors.tantivy import Label, LexicalIndexes

T = TypeVar("T")
_CURRENT_LABELS = f"SELECT rowid, sensitivity_rank, scope FROM text_chunks WHERE valid_to = {OPEN}"  # noqa: S608


class SQLiteTextLeg(TextCapable):
    """BM25 over chunk names and text, in the connector's SQLite file.

    The visible count and average length are cached per reader thread and filter until
    `PRAGMA data_version` says the file changed.
    """

    _local: threading.local  # per-thread caches, made by the connector
    _lexical: LexicalIndexes  # the engine's indexes, beside the database file
    _lexical_seen: int = -1  # the text generation the engine's searchers were reloaded at

    # -- the connector's plumbing ---------------------------------------------------------
    @abstractmethod
    def _reader(self) -> sqlite3.Connection:
        """This worker thread's read connection."""

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """The writer connection inside one transaction."""

    @abstractmethod
    def _snapshot(self) -> AbstractContextManager[sqlite3.Connection]:
        """This thread's read connection inside one read transaction."""

    @abstractmethod
    async def _run(self, fn: Callable[[], T]) -> T:
        """`fn` on a worker thread, its SQLite errors as `ConnectorError`."""

    @abstractmethod
    async def _select(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of one read statement."""

    @abstractmethod
    async def _write_many(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """One statement over many rows, in one write transaction."""

    # -- the engine's indexes --------------------------------------------------------------
    def _open_lexical(self) -> None:
        """Open the engine's indexes; build them from the stored terms if they are behind.

        Called on a worker thread by `connect`. The build runs in a write transaction, so a
        second process opening the same store waits for it and then finds them current.
        """
        self._lexical.open()
        self._lexical_seen = -1
        if self._lexical.generation == sqlite_text.generation(self._reader()):
            return
        with self._transaction() as conn:
            current = sqlite_text.generation(conn)
            if self._lexical.generation != current:
                self._apply(conn, sqlite_text.LexicalChange(), current, rebuild=True)

    def _apply(
        self,
        conn: sqlite3.Connection,
        change: sqlite_text.LexicalChange,
        generation: int,
        *,
        rebuild: bool = False,
    ) -> None:
        """Bring the engine's indexes to `generation` (inside the text write's transaction).

        Indexes that missed an earlier write (their marker is not the generation before this
        one) are rebuilt from the stored terms instead: a change applied on top of them would
        mark them current while they lack that write. If the engine fails, its marker goes,
        so no search trusts it until then (the store's transaction rolls back, and the
        outbox keeps the write for a retry).
        """
        rebuild = rebuild or self._lexical.generation != generation - 1
        try:
            if rebuild:
                chunks = sqlite_text.current_chunks(conn)
                self._lexical.write([], chunks, generation, clear=True)
            else:
                self._lexical.write(change.removed, change.added, generation)
        except BaseException:
            self._lexical.invalidate()
            raise

    def _engine_ready(self, conn: sqlite3.Connection) -> bool:
        """Whether the engine's indexes hold every text write the store has committed."""
        return self._engine_generation(conn) is not None

    def _engine_generation(self, conn: sqlite3.Connection) -> int | None:
        """The store's text generation if the engine's indexes hold it, else None."""
        current = sqlite_text.generation(conn)
        if self._lexical.generation != current:
            return None
        if self._lexical_seen != current:
            self._lexical.refresh()  # another process (or thread) wrote: see its commits
            self._lexical_seen = current
        return current

    def _label_rows(self, conn: sqlite3.Connection, current: int) -> list[lexical_stats.LabelRow]:
        """The per-label statistics rows at generation `current`, cached per thread."""
        cached: tuple[int, list[lexical_stats.LabelRow]] | None
        cached = getattr(self._local, "label_rows", None)
        if cached is None or cached[0] != current:
            cached = (current, lexical_stats.label_rows(conn))
            self._local.label_rows = cached
        return cached[1]

    async def _engine_drift(self) -> int:
        """Current chunks the engine lacks or files under another label, plus its extras."""

        def count() -> int:
            conn = self._reader()
            if self._lexical.generation != sqlite_text.generation(conn):
                return 1  # behind: a rebuild is due
            self._lexical.refresh()
            indexed = self._lexical.entries()
            stored = {
                int(rid): Label(rank=int(rank), scope=scope)
                for rid, rank, scope in conn.execute(_CURRENT_LABELS)
            }
            wrong = sum(1 for rid, label in stored.items() if indexed.get(rid) != label)
            return wrong + sum(1 for rid in indexed if rid not in stored)

        return await self._run(count)

    # -- lexical leg ------------------------------------------------------------------------
    async def upsert_text_chunks(self, chunks: Sequence[ChunkRecord]) -> None:
        """Insert or replace chunks, their terms and postings, and the engine's documents."""

        def write() -> None:
            analysed = sqlite_text.analyse(self._reader(), chunks)
            with self._transaction() as conn:
                change = sqlite_text.index_chunks(conn, analysed)
                self._apply(conn, change, sqlite_text.bump_generation(conn))

        await self._run(write)

    async def text_chunk_states(self) -> dict[str, int]:
        """Every chunk id in the text index with its `valid_to`."""
        return dict(await self._select("SELECT chunk_id, valid_to FROM text_chunks"))

    async def delete_text_chunks(self, chunk_ids: Sequence[str]) -> None:
        """Delete chunks by id, their postings and statistics, and the engine's documents."""
        if not chunk_ids:
            return

        def write() -> None:
            with self._transaction() as conn:
                change = sqlite_text.delete_chunks(conn, chunk_ids)
                self._apply(conn, change, sqlite_text.bump_generation(conn))

        await self._run(write)

    async def text_index_drift(self) -> int:
        """Entries of the term index, the statistics or the engine that disagree with chunks.

        Postings: chunks whose postings are not their packed terms, and orphaned ones;
        statistics: label rows that a recount contradicts; engine: see `_engine_drift`.
        """
        terms = int((await self._select(postings.DRIFT_SQL))[0][0])
        stats = int((await self._select(lexical_stats.STATS_DRIFT_SQL))[0][0])
        return terms + stats + await self._engine_drift()

    async def rebuild_text_index(self) -> None:
        """Recompute every chunk's terms, length and postings, the statistics and the engine."""

        def write() -> None:
            with self._transaction() as conn:
                sqlite_text.rebuild_terms(conn)
                generation = sqlite_text.bump_generation(conn)
                self._apply(conn, sqlite_text.LexicalChange(), generation, rebuild=True)

        await self._run(write)

    async def text_search(self, query: str, k: int, search_filter: SearchFilter) -> list[ChunkHit]:
        """BM25 over chunk names and text, with the statistics of the visible chunks only."""
        terms = query_terms(query)
        if not terms or k <= 0:
            return []
        where, params = compile_filter(search_filter, table="t")

        def query_rows() -> list[ChunkHit]:
            # One snapshot: the statistics, the generation and the scores agree.
            with self._snapshot() as conn:
                current = (
                    self._engine_generation(conn)
                    if lexical_stats.engine_can_serve(search_filter)
                    else None
                )
                if current is not None:
                    found = lexical_engine.engine_search(
                        conn,
                        self._lexical,
                        terms,
                        k,
                        search_filter,
                        where,
                        params,
                        self._label_rows(conn, current),
                    )
                    return [
                        ChunkHit(chunk_id=c, element_id=e, version=v, score=score)
                        for c, e, v, score in found
                    ]
                n_docs, avg_len = self._visible_stats(conn, where, params)
                if not n_docs:
                    return []
                best = lexical_exhaustive.best_chunks(
                    conn, terms, where, params, n_docs, avg_len, k
                )
            return [
                ChunkHit(chunk_id=c, element_id=e, version=v, text=t, score=score)
                for c, e, v, t, score in best
            ]

        return await self._run(query_rows)

    def _visible_stats(
        self, conn: sqlite3.Connection, where: str, params: Sequence[Any]
    ) -> tuple[int, float]:
        """Count and average length of the visible chunks, cached until the file changes.

        `PRAGMA data_version` changes whenever another connection (this process's writer, or
        another process) commits, so a cached value is never served stale.
        """
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        cache: dict[tuple[str, tuple[Any, ...]], tuple[int, int, float]]
        cache = getattr(self._local, "stats", None) or {}
        self._local.stats = cache
        key = (where, tuple(params))
        hit = cache.get(key)
        if hit is not None and hit[0] == version:
            return hit[1], hit[2]
        n_docs, avg_len = conn.execute(
            VISIBLE_STATS_SQL.format(where=where), tuple(params)
        ).fetchone()
        if len(cache) > 256:
            cache.clear()
        cache[key] = (version, int(n_docs), float(avg_len or 0.0))
        return int(n_docs), float(avg_len or 0.0)
