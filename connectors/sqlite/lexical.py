"""The SQLite lexical leg as a mixin of the connector: TextCapable over `text_chunks`.

The statements on one connection are in `connectors.sqlite.text`; this class runs them on
the connector's worker threads, with its writer and per-thread readers, and caches the
visible chunks' statistics per thread. The connector (`connectors.sqlite.connector`)
provides the hooks declared here: they are its lifecycle and thread plumbing, which the
system of record shares.
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
from connectors.contract.records import ChunkHit, ChunkRecord, SearchFilter
from connectors.sql_filters import compile_filter
from connectors.sqlite import text as sqlite_text
from connectors.sqlite.schema import TEXT_INDEX_DRIFT_SQL, VISIBLE_STATS_SQL

T = TypeVar("T")


class SQLiteTextLeg(TextCapable):
    """BM25 over chunk names and text, in the connector's SQLite file.

    The visible count and average length are cached per reader thread and filter until
    `PRAGMA data_version` says the file changed.
    """

    _local: threading.local  # per-thread caches, made by the connector

    # -- the connector's plumbing ---------------------------------------------------------
    @abstractmethod
    def _reader(self) -> sqlite3.Connection:
        """This worker thread's read connection."""

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """The writer connection inside one transaction."""

    @abstractmethod
    async def _run(self, fn: Callable[[], T]) -> T:
        """`fn` on a worker thread, its SQLite errors as `ConnectorError`."""

    @abstractmethod
    async def _select(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of one read statement."""

    @abstractmethod
    async def _write_many(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """One statement over many rows, in one write transaction."""

    # -- lexical leg ------------------------------------------------------------------------
    async def upsert_text_chunks(self, chunks: Sequence[ChunkRecord]) -> None:
        """Insert or replace chunks and their terms."""

        def write() -> None:
            with self._transaction() as conn:
                sqlite_text.index_chunks(conn, chunks)

        await self._run(write)

    async def text_chunk_states(self) -> dict[str, int]:
        """Every chunk id in the text index with its `valid_to`."""
        return dict(await self._select("SELECT chunk_id, valid_to FROM text_chunks"))

    async def delete_text_chunks(self, chunk_ids: Sequence[str]) -> None:
        """Delete chunks by id (the trigger drops their term rows)."""
        await self._write_many(
            "DELETE FROM text_chunks WHERE chunk_id = ?", [(cid,) for cid in chunk_ids]
        )

    async def text_index_drift(self) -> int:
        """Chunks whose term rows do not add up to their length, plus orphaned term rows."""
        return int((await self._select(TEXT_INDEX_DRIFT_SQL))[0][0])

    async def rebuild_text_index(self) -> None:
        """Recompute every chunk's terms and length from its stored text."""

        def write() -> None:
            with self._transaction() as conn:
                sqlite_text.rebuild_terms(conn)

        await self._run(write)

    async def text_search(self, query: str, k: int, search_filter: SearchFilter) -> list[ChunkHit]:
        """BM25 over chunk names and text, with the statistics of the visible chunks only."""
        terms = query_terms(query)
        if not terms or k <= 0:
            return []
        where, params = compile_filter(search_filter, table="t")

        def query_rows() -> list[ChunkHit]:
            conn = self._reader()
            n_docs, avg_len = self._visible_stats(conn, where, params)
            if not n_docs:
                return []
            best = sqlite_text.best_chunks(conn, terms, where, params, n_docs, avg_len, k)
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
