"""Connections to one SQLite file: one writer under a lock, one reader per thread, WAL.

Shared by the SQLite connector and the embedded Chroma store's chunk directory. WAL lets
readers run beside the writer; SQLite has one writer, so writes take one lock.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Callable, Generator
from contextlib import contextmanager
from pathlib import Path

_MMAP_BYTES = 1 << 30
_CACHE_KIB = 64 * 1024  # per connection


class SQLiteConnections:
    """The connections of one database file.

    Args:
        path: the database file (its folder is created on `open`).
        not_open: the error to raise when used before `open` or after `close`.
    """

    def __init__(self, path: Path, *, not_open: Callable[[], Exception]) -> None:
        self._path = path
        self._not_open = not_open
        self._write_lock = threading.Lock()
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self._writer: sqlite3.Connection | None = None

    @property
    def is_open(self) -> bool:
        """Whether `open` ran and `close` has not."""
        return self._writer is not None

    def open(self, setup: Callable[[sqlite3.Connection], object]) -> None:
        """Create the file, run `setup` (schema, migrations) on the writer, then serve."""
        if self._writer is not None:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        writer = self._connect()
        setup(writer)
        self._writer = writer

    def close(self) -> None:
        """Close every connection (callers first wait for the threads still using them)."""
        with self._all_lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._writer = None
        self._local = threading.local()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=10000")
        # Searches read states, postings and chunk rows from random pages: mapping the file
        # saves a read() per page, and a larger page cache keeps the hot ones (at 100k chunks,
        # 600 state lookups took 8.7 ms with the defaults, 5.9 ms mapped, 4.7 ms with both).
        conn.execute(f"PRAGMA mmap_size={_MMAP_BYTES}")
        conn.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
        _ensure_ln(conn)
        with self._all_lock:
            self._all.append(conn)
        return conn

    def reader(self) -> sqlite3.Connection:
        """This thread's read connection."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._writer is None:
                raise self._not_open()
            conn = self._connect()
            self._local.conn = conn
        return conn

    @contextmanager
    def snapshot(self) -> Generator[sqlite3.Connection]:
        """This thread's read connection inside one read transaction.

        Every statement in the block sees the same committed state, whatever the writer
        commits meanwhile.
        """
        conn = self.reader()
        conn.execute("BEGIN DEFERRED")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")  # a read transaction: nothing to undo

    @contextmanager
    def transaction(self) -> Generator[sqlite3.Connection]:
        """The writer inside BEGIN IMMEDIATE ... COMMIT (ROLLBACK on any error)."""
        if self._writer is None:
            raise self._not_open()
        with self._write_lock:
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")


def _ensure_ln(conn: sqlite3.Connection) -> None:
    """Give the connection `ln` where SQLite was built without its math functions.

    The lexical query calls it once per query term (connectors/sqlite/schema.py, BM25_SQL).
    """
    try:
        conn.execute("SELECT ln(1)")
    except sqlite3.OperationalError:
        conn.create_function("ln", 1, math.log, deterministic=True)
