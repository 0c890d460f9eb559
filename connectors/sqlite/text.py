"""The SQLite lexical leg's writes on one connection: index, delete, rebuild, migrate.

Terms come from `connectors.analyzer` (the same on every backend). Each chunk's row keeps
them packed (`packed_terms`), FTS5 keeps their postings (`postings`), and the per-label
statistics (`lexical_stats`) change by the write's deltas, all in the write's transaction.
A write also says what the engine's indexes must take and drop (`LexicalChange`), and counts
text writes (`lexical_generation`), so that an index that missed one is known to be behind.
The searches are `lexical_engine` and `lexical_exhaustive`.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from connectors.analyzer import ANALYZER_VERSION, chunk_length, term_frequencies
from connectors.contract.records import OPEN, ChunkRecord
from connectors.contract.system_of_record import (
    DERIVED_CHUNK_COLUMNS,
    derived_chunk_values,
    insert_sql,
)
from connectors.sqlite import lexical_stats, packed_terms, postings
from connectors.sqlite.schema import LEGACY_TEXT_INDEXES
from connectors.tantivy import Label
from connectors.tantivy.index import IndexedChunk

log = logging.getLogger(__name__)
_INSERT_CHUNK = insert_sql(
    "text_chunks", (*DERIVED_CHUNK_COLUMNS, "name", "text", "length", "term_freqs"), "?"
)
# What a write needs of the stored rows of the chunks it writes: the label, validity and
# terms of what it replaces (statistics, postings, the engine's documents), and the name and
# text of those it may close in place.
_STORED_ROWS = """
SELECT chunk_id, rowid, sensitivity_rank, scope, element_type, valid_to, length, term_freqs,
       name, text
FROM text_chunks WHERE chunk_id IN (SELECT value FROM json_each(?))
"""
_CLOSING_TEXT = (
    "SELECT chunk_id, name, text FROM text_chunks "
    "WHERE chunk_id IN (SELECT value FROM json_each(?))"
)
# Every derived column again (the same values for the id's own); terms and length stay.
_SET_DERIVED = ", ".join(f"{column} = ?" for column in DERIVED_CHUNK_COLUMNS)
_CLOSE_KEPT = f"UPDATE text_chunks SET {_SET_DERIVED} WHERE chunk_id = ?"  # noqa: S608
_DELETE_ROW = "DELETE FROM text_chunks WHERE rowid = ?"
_ANALYZER_KEY = "text_analyzer"
_POSTINGS_KEY = "lexical_postings"
_POSTINGS_VERSION = "fts5-1"  # ADR 60: FTS5 postings and packed frequencies for every row
_STATS_KEY = "lexical_stats"
_STATS_VERSION = "3"  # 2: packed term frequencies; 3: keyed by term id
_GENERATION_KEY = "lexical_generation"


@dataclass(frozen=True, kw_only=True)
class LexicalChange:
    """What a text write asks of the engine's indexes: documents to drop and to add."""

    removed: list[tuple[Label, int]] = field(default_factory=list[tuple[Label, int]])
    added: list[IndexedChunk] = field(default_factory=list[IndexedChunk])


@dataclass(frozen=True, kw_only=True, slots=True)
class _StoredRow:
    """A chunk's row as stored, before a write replaces, closes or deletes it."""

    rid: int
    rank: int
    scope: str | None
    element_type: str
    current: bool
    length: int
    term_freqs: bytes
    name: str
    text: str

    @property
    def label(self) -> Label:
        return Label(rank=self.rank, scope=self.scope)

    @property
    def key(self) -> lexical_stats.LabelKey:
        return lexical_stats.label_key(self.rank, self.scope, self.element_type)


def _stored_rows(conn: sqlite3.Connection, chunk_ids: Sequence[str]) -> dict[str, _StoredRow]:
    rows = conn.execute(_STORED_ROWS, (json.dumps(list(chunk_ids)),))
    return {
        chunk_id: _StoredRow(
            rid=int(rid),
            rank=int(rank),
            scope=scope,
            element_type=element_type,
            current=valid_to == OPEN,
            length=int(length),
            term_freqs=packed or b"",
            name=name,
            text=text,
        )
        for chunk_id, rid, rank, scope, element_type, valid_to, length, packed, name, text in rows
    }


def _retire(stored: Iterable[_StoredRow], delta: lexical_stats.Delta) -> list[tuple[Label, int]]:
    """Take the current ones of these rows out of the statistics; the engine's documents."""
    removed: list[tuple[Label, int]] = []
    for row in stored:
        if row.current:
            removed.append((row.label, row.rid))
            delta.change(row.key, packed_terms.ids_of(row.term_freqs), row.length, -1)
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
    """Delete chunks by id, their postings and their statistics."""
    stored = list(_stored_rows(conn, chunk_ids).values())
    delta = lexical_stats.Delta()
    removed = _retire(stored, delta)
    postings.remove(conn, [(row.rid, row.term_freqs) for row in stored])
    conn.executemany(_DELETE_ROW, [(row.rid,) for row in stored])
    delta.write(conn)
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
    closing = [c.chunk_id for c in unique if c.valid_to != OPEN]
    stored = (
        {
            chunk_id: (name, text)
            for chunk_id, name, text in conn.execute(_CLOSING_TEXT, (json.dumps(closing),))
        }
        if closing
        else {}
    )
    return AnalysedChunks(
        unique,
        {
            c.chunk_id: term_frequencies(c.name, c.text)
            for c in unique
            if c.valid_to == OPEN or stored.get(c.chunk_id) != (c.name, c.text)
        },
    )


def _closes_in_place(chunk: ChunkRecord, stored: _StoredRow | None) -> bool:
    """Whether a chunk arrives closed with the stored row's name and text.

    Its terms are what the row holds already. A superseded state sends every chunk of its
    version again with `valid_to` set, as many chunks as the new version writes; analysing
    and posting them again would double the cost of every revision (ADR 59).
    """
    return (
        chunk.valid_to != OPEN
        and stored is not None
        and (stored.name, stored.text) == (chunk.name, chunk.text)
    )


def _packed(
    conn: sqlite3.Connection, analysed: Sequence[Counter[str]]
) -> tuple[dict[str, int], list[bytes], list[int]]:
    """Every term's lexicon id (added if new), each chunk's packed BLOB and its length."""
    ids = packed_terms.term_ids(conn, {term for terms in analysed for term in terms})
    return (
        ids,
        [packed_terms.pack(terms, ids) for terms in analysed],
        [chunk_length(terms) for terms in analysed],
    )


def index_chunks(conn: sqlite3.Connection, analysed_chunks: AnalysedChunks) -> LexicalChange:
    """Insert or replace chunks, their postings and statistics (inside the caller's transaction).

    A chunk closing with its name and text unchanged keeps its row, its terms and its
    postings; only its columns change. Others are written whole, with new row ids, analysed
    here if `analyse` found them unchanged and another writer changed them since.
    """
    chunks = analysed_chunks.chunks
    stored = _stored_rows(conn, [c.chunk_id for c in chunks])
    delta = lexical_stats.Delta()
    removed = _retire(stored.values(), delta)
    kept = [c for c in chunks if _closes_in_place(c, stored.get(c.chunk_id))]
    conn.executemany(
        _CLOSE_KEPT, [(*derived_chunk_values(c, json.dumps), c.chunk_id) for c in kept]
    )
    kept_ids = {c.chunk_id for c in kept}
    fresh = [c for c in chunks if c.chunk_id not in kept_ids]
    replaced = [stored[c.chunk_id] for c in fresh if c.chunk_id in stored]
    postings.remove(conn, [(row.rid, row.term_freqs) for row in replaced])
    conn.executemany(_DELETE_ROW, [(row.rid,) for row in replaced])
    analysed: list[Counter[str]] = []
    for c in fresh:
        terms = analysed_chunks.terms.get(c.chunk_id)
        analysed.append(term_frequencies(c.name, c.text) if terms is None else terms)
    ids, packed, lengths = _packed(conn, analysed)
    conn.executemany(
        _INSERT_CHUNK,
        [
            (*derived_chunk_values(c, json.dumps), c.name, c.text, length, blob)
            for c, length, blob in zip(fresh, lengths, packed, strict=True)
        ],
    )
    rids = dict(
        conn.execute(
            "SELECT chunk_id, rowid FROM text_chunks "
            "WHERE chunk_id IN (SELECT value FROM json_each(?))",
            (json.dumps([c.chunk_id for c in fresh]),),
        ).fetchall()
    )
    postings.add(conn, [(rids[c.chunk_id], blob) for c, blob in zip(fresh, packed, strict=True)])
    added: list[IndexedChunk] = []
    for c, terms, length in zip(fresh, analysed, lengths, strict=True):
        if c.valid_to != OPEN:
            continue
        key = lexical_stats.label_key(c.sensitivity_rank, c.scope, c.element_type)
        delta.change(key, map(ids.__getitem__, terms), length, 1)
        added.append(
            IndexedChunk(
                rid=rids[c.chunk_id],
                label=Label(rank=c.sensitivity_rank, scope=c.scope),
                element_type=c.element_type,
                terms=terms,
            )
        )
    delta.write(conn)
    return LexicalChange(removed=removed, added=added)


_CURRENT_ROWS = f"""
SELECT rowid, sensitivity_rank, scope, element_type, term_freqs
FROM text_chunks WHERE valid_to = {OPEN} ORDER BY rowid
"""  # noqa: S608 - fixed fragments only


def current_chunks(conn: sqlite3.Connection) -> Iterator[IndexedChunk]:
    """Every current chunk as the engine indexes it, from the packed terms (a rebuild).

    Streamed from one cursor: a store's terms do not fit in memory as objects.
    """
    terms_by_id: dict[int, str] = dict(conn.execute("SELECT id, term FROM lexicon"))
    for rid, rank, scope, element_type, packed in conn.execute(_CURRENT_ROWS):
        yield IndexedChunk(
            rid=rid,
            label=Label(rank=rank, scope=scope),
            element_type=element_type,
            terms={terms_by_id[t]: tf for t, tf in packed_terms.unpack(packed).tolist()},
        )


_REBUILD_BATCH = 2_000


def rebuild_terms(conn: sqlite3.Connection) -> None:
    """Recompute every chunk's terms, length and postings from its stored name and text."""
    postings.clear(conn)
    last = -1
    while True:
        rows: list[tuple[int, str, str]] = conn.execute(
            "SELECT rowid, name, text FROM text_chunks WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (last, _REBUILD_BATCH),
        ).fetchall()
        if not rows:
            break
        last = rows[-1][0]
        _, packed, lengths = _packed(conn, [term_frequencies(name, text) for _, name, text in rows])
        conn.executemany(
            "UPDATE text_chunks SET length = ?, term_freqs = ? WHERE rowid = ?",
            [
                (length, blob, rid)
                for (rid, _, _), length, blob in zip(rows, lengths, packed, strict=True)
            ],
        )
        postings.add(conn, [(rid, blob) for (rid, _, _), blob in zip(rows, packed, strict=True)])
    _set_meta(conn, _ANALYZER_KEY, ANALYZER_VERSION)
    _set_meta(conn, _POSTINGS_KEY, _POSTINGS_VERSION)
    rebuild_statistics(conn)


def rebuild_statistics(conn: sqlite3.Connection) -> None:
    """Recompute the per-label statistics from the postings, and record them kept."""
    lexical_stats.rebuild(conn)
    _set_meta(conn, _STATS_KEY, _STATS_VERSION)


def _set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta VALUES (?, ?) ON CONFLICT DO UPDATE SET value = excluded.value",
        (key, value),
    )


def _meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def upgrade(conn: sqlite3.Connection) -> None:
    """Bring the lexical index to this analyzer and this index format (after the schema).

    A store indexed with another analyzer version, or with an earlier index (FTS5 over the
    text, then one row per term and chunk), is re-indexed once from its text; a new store
    only records the versions. Statistics kept in an earlier form are recounted.
    """
    packed_terms.ensure_column(conn)  # a store made before the column (rebuilt below)
    current = (
        _meta(conn, _ANALYZER_KEY) == ANALYZER_VERSION
        and _meta(conn, _POSTINGS_KEY) == _POSTINGS_VERSION
    )
    if current and _meta(conn, _STATS_KEY) == _STATS_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if current:
            rebuild_statistics(conn)
        else:
            chunks = conn.execute("SELECT count(*) FROM text_chunks").fetchone()[0]
            if chunks:  # minutes for a large store: say why opening it waits
                log.warning("re-indexing the text of %d chunks once (an older format)", chunks)
            for statement in LEGACY_TEXT_INDEXES:  # one by one: executescript would commit
                conn.execute(statement)
            rebuild_terms(conn)
            bump_generation(conn)  # the terms changed: any engine index built on them is behind
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
