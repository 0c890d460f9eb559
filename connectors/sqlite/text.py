"""The SQLite lexical leg's statements on one connection: index, rebuild, migrate, score.

Terms come from `connectors.analyzer` (the same on every backend); BM25 is computed by
SQL with `connectors.bm25`'s formula, from the occurrences of the query terms in the visible
chunks only.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from connectors.analyzer import ANALYZER_VERSION, chunk_length, term_frequencies
from connectors.bm25 import BM25_B, BM25_K1
from connectors.contract.records import ChunkRecord
from connectors.contract.system_of_record import (
    DERIVED_CHUNK_COLUMNS,
    derived_chunk_values,
    insert_sql,
)
from connectors.sqlite.json_rows import read_json_rows
from connectors.sqlite.schema import BM25_ROWS, BM25_SQL, LEGACY_FTS

_INSERT_CHUNK = insert_sql("text_chunks", (*DERIVED_CHUNK_COLUMNS, "name", "text", "length"), "?")
_INSERT_TERM = "INSERT INTO chunk_terms (term, doc, tf) VALUES (?,?,?)"
_ANALYZER_KEY = "text_analyzer"


def index_chunks(conn: sqlite3.Connection, chunks: Sequence[ChunkRecord]) -> None:
    """Insert or replace chunks and their terms (inside the caller's transaction)."""
    chunks = list({c.chunk_id: c for c in chunks}.values())  # the last of a repeated id wins
    # Deleting fires the trigger that drops the old term rows.
    conn.executemany("DELETE FROM text_chunks WHERE chunk_id = ?", [(c.chunk_id,) for c in chunks])
    analysed = [term_frequencies(c.name, c.text) for c in chunks]
    conn.executemany(
        _INSERT_CHUNK,
        [
            (*derived_chunk_values(c, json.dumps), c.name, c.text, chunk_length(terms))
            for c, terms in zip(chunks, analysed, strict=True)
        ],
    )
    docs = dict(
        conn.execute(
            "SELECT chunk_id, rowid FROM text_chunks "
            "WHERE chunk_id IN (SELECT value FROM json_each(?))",
            (json.dumps([c.chunk_id for c in chunks]),),
        ).fetchall()
    )
    conn.executemany(
        _INSERT_TERM,
        [
            (term, docs[c.chunk_id], tf)
            for c, terms in zip(chunks, analysed, strict=True)
            for term, tf in terms.items()
        ],
    )


def rebuild_terms(conn: sqlite3.Connection) -> None:
    """Recompute every chunk's terms and length from its stored name and text."""
    rows: Iterable[tuple[int, str, str]] = conn.execute(
        "SELECT rowid, name, text FROM text_chunks"
    ).fetchall()
    conn.execute("DELETE FROM chunk_terms")
    for doc, name, text in rows:
        terms = term_frequencies(name, text)
        conn.executemany(_INSERT_TERM, [(term, doc, tf) for term, tf in terms.items()])
        conn.execute(
            "UPDATE text_chunks SET length = ? WHERE rowid = ?", (chunk_length(terms), doc)
        )
    conn.execute(
        "INSERT INTO meta VALUES (?, ?) ON CONFLICT DO UPDATE SET value = excluded.value",
        (_ANALYZER_KEY, ANALYZER_VERSION),
    )


def upgrade(conn: sqlite3.Connection) -> None:
    """Bring the lexical index to this analyzer (after the schema script ran).

    A store indexed with another analyzer version, or with the FTS5 index of earlier
    releases, is re-indexed once; a new store only records the version.
    """
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_ANALYZER_KEY,)).fetchone()
    if row is not None and row[0] == ANALYZER_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in LEGACY_FTS:  # one by one: executescript would commit first
            conn.execute(statement)
        rebuild_terms(conn)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def best_chunks(
    conn: sqlite3.Connection,
    terms: Sequence[str],
    where: str,
    params: Sequence[Any],
    n_docs: int,
    avg_len: float,
    k: int,
) -> list[tuple[str, str, int, str, float]]:
    """The `k` best visible chunks as `(chunk_id, element_id, version, text, score)`."""
    sql = BM25_SQL.format(where=where, k1=BM25_K1, b=BM25_B, rows=BM25_ROWS)
    rows = read_json_rows(conn, sql, (json.dumps(list(terms)), *params, n_docs, avg_len, k))
    best = [(c, e, v, t, float(score)) for c, e, v, t, score in rows]
    # The statement's order: score descending, then chunk id (code point order is UTF-8's
    # byte order, SQLite's BINARY collation); the scores are the exact doubles SQLite sorted.
    best.sort(key=lambda row: (-row[4], row[0]))
    return best
