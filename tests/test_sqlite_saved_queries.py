"""Saved queries on SQLite live in a file of their own: saving one changes nothing a search
reads, and a store whose queries an older version kept in its own file finds them moved."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from connectors.contract.saved_queries import SavedQueryRow
from connectors.sqlite import SQLiteConnector
from connectors.sqlite.saved_queries import queries_path

ROW = SavedQueryRow(query_id="q_1", owner="alice", created_ms=1, body="{}", embedding=b"\0\0\0\0")


async def test_saving_a_query_leaves_the_store_file_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "uda.sqlite3"
    connector = SQLiteConnector(path)
    await connector.connect()
    try:
        watcher = sqlite3.connect(path)
        before = watcher.execute("PRAGMA data_version").fetchone()[0]
        await connector.save_queries([ROW], 0)
        # data_version moves when another connection commits to this file: every reader's
        # page cache would be dropped.
        assert watcher.execute("PRAGMA data_version").fetchone()[0] == before
        assert await connector.load_query("q_1") == ROW
        assert queries_path(path).exists()
        watcher.close()
    finally:
        await connector.close()


async def test_queries_kept_in_the_store_file_are_moved_not_lost(tmp_path: Path) -> None:
    path = tmp_path / "uda.sqlite3"
    connector = SQLiteConnector(path)
    await connector.connect()
    await connector.close()
    # The layout of the version that kept them in the store file.
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE saved_queries (query_id TEXT PRIMARY KEY, owner TEXT, "
        "created_ms INTEGER NOT NULL, body TEXT NOT NULL, embedding BLOB) WITHOUT ROWID;"
    )
    old.execute("INSERT INTO saved_queries VALUES (?, ?, ?, ?, ?)", ("q_old", None, 5, "{}", None))
    old.commit()
    old.close()
    connector = SQLiteConnector(path)
    await connector.connect()
    try:
        assert await connector.load_query("q_old") == SavedQueryRow(
            query_id="q_old", owner=None, created_ms=5, body="{}"
        )
        store = sqlite3.connect(path)
        tables = {r[0] for r in store.execute("SELECT name FROM sqlite_master")}
        store.close()
        assert "saved_queries" not in tables
    finally:
        await connector.close()
