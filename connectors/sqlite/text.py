"""The SQLite lexical leg's statements on one connection: index, rebuild, migrate, score.

Terms come from `connectors.analyzer` (the same on every backend); BM25 is computed by
SQL with `connectors.bm25`'s formula, from the occurrences of the query terms in the visible
chunks only. The writes here also keep the per-label statistics (`lexical_stats`) and say
what the engine's indexes must take and drop (`LexicalChange`), and count text writes
(`lexical_generation`), so that an index that missed one is known to be behind.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from connectors.analyzer import ANALYZER_VERSION, chunk_length, term_frequencies
from connectors.bm25 import BM25_B, BM25_K1
from connectors.contract.records import OPEN, ChunkRecord
from connectors.contract.system_of_record import (
    DERIVED_CHUNK_COLUMNS,
    derived_chunk_values,
    insert_sql,
)
from connectors.sqlite import lexical_stats, packed_terms
from connectors.sqlite.json_rows import read_json_rows
from connectors.sqlite.schema import BM25_ROWS, BM25_SQL, LEGACY_FTS
from connectors.tantivy import Label
from connectors.tantivy.index import IndexedChunk

_INSERT_CHUNK = insert_sql("text_chunks", (*DERIVED_CHUNK_COLUMNS, "name", "text", "length"), "?")
_INSERT_TERM = "INSERT INTO chunk_terms (term, doc, tf) VALUES (?,?,?)"
_STORED_TEXT = (
    "SELECT chunk_id, name, text FROM text_chunks "
    "WHERE chunk_id IN (SELECT value FROM json_each(?))"
)
# Every derived column again (the same values for the id's own), packed frequencies gone.
_SET_DERIVED = ", ".join(f"{column} = ?" for column in DERIVED_CHUNK_COLUMNS)
_CLOSE_KEPT = f"UPDATE text_chunks SET {_SET_DERIVED}, term_freqs = NULL WHERE chunk_id = ?"  # noqa: S608
_ANALYZER_KEY = "text_analyzer"
_STATS_KEY = "lexical_stats"
_STATS_VERSION = "2"  # 2: packed term frequencies
_GENERATION_KEY = "lexical_generation"
_OLD_ROWS = f"""
SELECT rowid, sensitivity_rank, scope FROM text_chunks
WHERE chunk_id IN (SELECT value FROM json_each(?)) AND valid_to = {OPEN}
"""  # noqa: S608 - a constant


@dataclass(frozen=True, kw_only=True)
class LexicalChange:
    """What a text write asks of the engine's indexes: documents to drop and to add."""

    removed: list[tuple[Label, int]] = field(default_factory=list[tuple[Label, int]])
    added: list[IndexedChunk] = field(default_factory=list[IndexedChunk])


def _retiring(conn: sqlite3.Connection, chunk_ids: Sequence[str]) -> list[tuple[Label, int]]:
    """The current rows of these chunks, about to be replaced or deleted, and their stats."""
    ids = json.dumps(list(chunk_ids))
    removed = [
        (Label(rank=int(rank), scope=scope), int(rid))
        for rid, rank, scope in conn.execute(_OLD_ROWS, (ids,))
    ]
    lexical_stats.change(conn, chunk_ids, -1)
    return removed


def bump_generation(conn: sqlite3.Connection) -> int:
    """Count one more text write (inside its transaction); the new count."""
    conn.execute(
        "INSERT INTO meta VALUES (?, '1') ON CONFLICT DO UPDATE "
        "SET value = CAST(value AS INTEGER) + 1",
        (_GENERATION_KEY,),
    )
    return generation(conn)


def generation(conn: sqlite3.Connection) -> int:
    """How many text writes the store has had (0 for none)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_GENERATION_KEY,)).fetchone()
    return int(row[0]) if row is not None else 0


def delete_chunks(conn: sqlite3.Connection, chunk_ids: Sequence[str]) -> LexicalChange:
    """Delete chunks by id (the trigger drops their term rows) and their statistics."""
    removed = _retiring(conn, chunk_ids)
    conn.executemany("DELETE FROM text_chunks WHERE chunk_id = ?", [(c,) for c in chunk_ids])
    return LexicalChange(removed=removed)


@dataclass(frozen=True)
class AnalysedChunks:
    """Chunks to write, each once (the last of a repeated id wins), and the new terms.

    A chunk closed with its name and text unchanged (the state it belongs to was
    superseded) keeps its row and its terms, so it has none here.
    """

    chunks: list[ChunkRecord]
    terms: dict[str, Counter[str]]


def analyse(conn: sqlite3.Connection, chunks: Sequence[ChunkRecord]) -> AnalysedChunks:
    """The terms of the chunks that need them, to take before the write transaction.

    Analysis is most of a text write's CPU, and the store's other writers (the outbox's
    acknowledgements, other stores' drains) wait for the write lock while it is held.
    `conn` reads which chunks are closing unchanged (`index_chunks` checks it again).
    """
    unique = list({c.chunk_id: c for c in chunks}.values())
    unchanged = _closing_unchanged(conn, unique)
    return AnalysedChunks(
        unique,
        {
            c.chunk_id: term_frequencies(c.name, c.text)
            for c in unique
            if c.chunk_id not in unchanged
        },
    )


def _closing_unchanged(conn: sqlite3.Connection, chunks: Sequence[ChunkRecord]) -> set[str]:
    """Ids of the chunks being closed whose stored row has the same name and text.

    Their terms are what the row holds already. A superseded state sends every chunk of
    its version again with `valid_to` set, as many chunks as the new version writes; reading
    their terms back from the text would double the cost of every revision.
    """
    closing = {c.chunk_id: c for c in chunks if c.valid_to != OPEN}
    if not closing:
        return set()
    return {
        chunk_id
        for chunk_id, name, text in conn.execute(_STORED_TEXT, (json.dumps(list(closing)),))
        if closing[chunk_id].name == name and closing[chunk_id].text == text
    }


def index_chunks(conn: sqlite3.Connection, analysed_chunks: AnalysedChunks) -> LexicalChange:
    """Insert or replace chunks and their terms (inside the caller's transaction).

    A chunk closing with its name and text unchanged keeps its row, its terms and its length;
    only its columns change (a closed chunk has no packed frequencies: the engine's path
    reads current chunks only). Others are written whole, analysed here if `analyse` found
    them unchanged and another writer changed them since.
    """
    chunks = analysed_chunks.chunks
    ids = [c.chunk_id for c in chunks]
    kept = _closing_unchanged(conn, chunks)
    removed = _retiring(conn, ids)
    conn.executemany(
        _CLOSE_KEPT,
        [(*derived_chunk_values(c, json.dumps), c.chunk_id) for c in chunks if c.chunk_id in kept],
    )
    fresh = [c for c in chunks if c.chunk_id not in kept]
    analysed: list[Counter[str]] = []
    for c in fresh:
        terms = analysed_chunks.terms.get(c.chunk_id)
        analysed.append(term_frequencies(c.name, c.text) if terms is None else terms)
    fresh_ids = [c.chunk_id for c in fresh]
    # Deleting fires the trigger that drops the old term rows.
    conn.executemany("DELETE FROM text_chunks WHERE chunk_id = ?", [(c,) for c in fresh_ids])
    conn.executemany(
        _INSERT_CHUNK,
        [
            (*derived_chunk_values(c, json.dumps), c.name, c.text, chunk_length(terms))
            for c, terms in zip(fresh, analysed, strict=True)
        ],
    )
    docs = dict(
        conn.execute(
            "SELECT chunk_id, rowid FROM text_chunks "
            "WHERE chunk_id IN (SELECT value FROM json_each(?))",
            (json.dumps(fresh_ids),),
        ).fetchall()
    )
    conn.executemany(
        _INSERT_TERM,
        [
            (term, docs[c.chunk_id], tf)
            for c, terms in zip(fresh, analysed, strict=True)
            for term, tf in terms.items()
        ],
    )
    packed_terms.store(
        conn,
        {
            docs[c.chunk_id]: terms
            for c, terms in zip(fresh, analysed, strict=True)
            if c.valid_to == OPEN
        },
    )
    lexical_stats.change(conn, fresh_ids, 1)
    added = [
        IndexedChunk(
            rid=docs[c.chunk_id],
            label=Label(rank=c.sensitivity_rank, scope=c.scope),
            element_type=c.element_type,
            terms=terms,
        )
        for c, terms in zip(fresh, analysed, strict=True)
        if c.valid_to == OPEN
    ]
    return LexicalChange(removed=removed, added=added)


_CURRENT_TERMS = f"""
SELECT t.rowid, t.sensitivity_rank, t.scope, t.element_type, c.term, c.tf
FROM text_chunks t JOIN chunk_terms c ON c.doc = t.rowid
WHERE t.valid_to = {OPEN} ORDER BY t.rowid
"""  # noqa: S608 - fixed fragments only


def current_chunks(conn: sqlite3.Connection) -> Iterator[IndexedChunk]:
    """Every current chunk as the engine indexes it, from the stored terms (a rebuild).

    Streamed from one cursor: a store's terms do not fit in memory as objects.
    """
    last = -1
    pending: IndexedChunk | None = None
    terms: dict[str, int] = {}
    for rid, rank, scope, element_type, term, tf in conn.execute(_CURRENT_TERMS):
        if rid != last:
            if pending is not None:
                yield pending
            terms = {}
            pending = IndexedChunk(
                rid=rid, label=Label(rank=rank, scope=scope), element_type=element_type, terms=terms
            )
            last = rid
        terms[term] = tf
    if pending is not None:
        yield pending


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
    rebuild_statistics(conn)


def rebuild_statistics(conn: sqlite3.Connection) -> None:
    """Recompute the per-label statistics and packed frequencies, and record them kept."""
    lexical_stats.rebuild(conn)
    packed_terms.store_all(conn)
    conn.execute(
        "INSERT INTO meta VALUES (?, ?) ON CONFLICT DO UPDATE SET value = excluded.value",
        (_STATS_KEY, _STATS_VERSION),
    )


def upgrade(conn: sqlite3.Connection) -> None:
    """Bring the lexical index to this analyzer (after the schema script ran).

    A store indexed with another analyzer version, or with the FTS5 index of earlier
    releases, is re-indexed once; a new store only records the version.
    """
    packed_terms.ensure_column(conn)  # a store made before the column (its rows are packed below)
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_ANALYZER_KEY,)).fetchone()
    stats = conn.execute("SELECT value FROM meta WHERE key = ?", (_STATS_KEY,)).fetchone()
    if row is not None and row[0] == ANALYZER_VERSION:
        if stats is None or stats[0] != _STATS_VERSION:
            conn.execute("BEGIN IMMEDIATE")
            try:
                rebuild_statistics(conn)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in LEGACY_FTS:  # one by one: executescript would commit first
            conn.execute(statement)
        rebuild_terms(conn)
        bump_generation(conn)  # the terms changed: any engine index built on them is behind
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
