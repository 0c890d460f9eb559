"""Saved queries on SQLite, in a file of their own beside the store's.

Every first page of a search saves a row. Written into the store's own file, each of those
commits changed the database every reader connection caches: the next read on each of
them dropped its page cache, and a search at 10k chunks went from 11.5 to 14.7 ms p50. Kept
in a second file (`<name>-queries<suffix>`), a saved query touches nothing a search reads.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from connectors.contract.saved_queries import SavedQueryRow
from connectors.sqlite.connections import SQLiteConnections

SCHEMA = """
CREATE TABLE IF NOT EXISTS saved_queries (
    query_id TEXT PRIMARY KEY,
    owner TEXT,
    created_ms INTEGER NOT NULL,
    body TEXT NOT NULL,
    embedding BLOB
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS saved_queries_created ON saved_queries (created_ms);
"""

_COLUMNS = "query_id, owner, created_ms, body, embedding"


def queries_path(store: Path) -> Path:
    """The file that keeps the saved queries of the store file `store`."""
    return store.with_name(f"{store.stem}-queries{store.suffix}")


def move_from_store(writer: sqlite3.Connection, store: Path) -> None:
    """Move saved queries an older version kept in the store file into their own file.

    Runs on the store's writer while it sets up (nothing else uses the store yet); the rows
    are copied before the old table is dropped, in one transaction, so none is lost.
    """
    found = writer.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'saved_queries'"
    ).fetchone()
    if found is None:
        return
    writer.execute("ATTACH DATABASE ? AS queries", (str(queries_path(store)),))
    try:
        writer.execute("BEGIN IMMEDIATE")
        try:
            for statement in SCHEMA.replace("IF NOT EXISTS ", "IF NOT EXISTS queries.").split(";"):
                if statement.strip():
                    writer.execute(statement)
            writer.execute(
                f"INSERT OR IGNORE INTO queries.saved_queries SELECT {_COLUMNS} "  # noqa: S608 - fixed column list
                "FROM main.saved_queries"
            )
            writer.execute("DROP TABLE main.saved_queries")
        except BaseException:
            writer.execute("ROLLBACK")
            raise
        writer.execute("COMMIT")
    finally:
        writer.execute("DETACH DATABASE queries")


class SavedQueryFile:
    """The saved-query file of one store: batch writes and lookups by id.

    Methods block; the connector runs them on its worker threads.

    Args:
        store: the store's database file.
        not_open: the error to raise when used before `open` or after `close`.
    """

    def __init__(self, store: Path, *, not_open: Callable[[], Exception]) -> None:
        self._db = SQLiteConnections(queries_path(store), not_open=not_open)

    def open(self) -> None:
        """Create the file and its table if missing."""
        self._db.open(lambda writer: writer.executescript(SCHEMA))

    def close(self) -> None:
        """Close its connections."""
        self._db.close()

    def save(self, rows: Sequence[SavedQueryRow], older_than_ms: int) -> None:
        """Keep these queries and forget those created before `older_than_ms`, at once."""
        with self._db.transaction() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO saved_queries VALUES (?, ?, ?, ?, ?)",
                [(r.query_id, r.owner, r.created_ms, r.body, r.embedding) for r in rows],
            )
            if older_than_ms:
                conn.execute("DELETE FROM saved_queries WHERE created_ms < ?", (older_than_ms,))

    def load(self, query_id: str) -> SavedQueryRow | None:
        """The saved query with this id, or None."""
        row = (
            self._db.reader()
            .execute(
                f"SELECT {_COLUMNS} FROM saved_queries WHERE query_id = ?",  # noqa: S608 - fixed column list
                (query_id,),
            )
            .fetchone()
        )
        if row is None:
            return None
        qid, owner, created_ms, body, embedding = row
        return SavedQueryRow(
            query_id=qid, owner=owner, created_ms=created_ms, body=body, embedding=embedding
        )


__all__ = ["SCHEMA", "SavedQueryFile", "move_from_store", "queries_path"]
