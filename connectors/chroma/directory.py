"""The embedded Chroma store's chunk directory: each chunk's filter fields, in SQLite beside it.

Chroma answers an ids-and-distances query over 100k vectors in about 2 ms, but returning
metadata or documents costs about 85 µs per record, and its filtered (`where`) query takes
hundreds of milliseconds at that size because it first materialises every matching id. So
the embedded connector asks Chroma for ids and distances only and decides here, with one
indexed SQLite lookup, which hits pass the caller's filter
(docs/adr/0016-chroma-chunk-directory.md).

The directory is the embedded store's only copy of its chunks' filter fields: Chroma holds ids
and vectors (ADR 52), and what the directory lacks is rewritten from the system of record by
`uda sync`, like any derived store's missing chunks. It keeps no text: a hit carries none, and
the planner reads the text of what it shows from the system of record (ADR 53); the text
table of earlier releases is dropped when a directory is opened. Writes go to Chroma first and
to the directory second, so an interrupted write leaves a vector with no directory row, which a
search treats as not passing (it fails closed) and `chunk_states` reports as unusable until
the write is repeated. A store from before the directory gets it from Chroma's metadata,
which was complete then (`reconcile`).

While the collection is small (`connectors.chroma.flat`), each chunk's vector is kept too
(`chunk_vectors`, beside the filter rows so that those stay narrow), written in the same
transaction as its filter fields: the exact index a small store is searched with is read
from here in one statement, and agrees with the filter rows by construction (ADR 62).
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np

from connectors.chroma.flat import FlatIndex
from connectors.contract.records import ChunkRecord, SearchFilter
from connectors.contract.system_of_record import (
    DERIVED_CHUNK_COLUMNS,
    derived_chunk_values,
    insert_sql,
)
from connectors.sql_filters import compile_filter
from connectors.sqlite.connections import SQLiteConnections
from connectors.sqlite.json_rows import json_array_rows, read_json_rows

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
    chunk_id TEXT PRIMARY KEY,
    element_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    element_type TEXT NOT NULL,
    sensitivity_rank INTEGER NOT NULL,
    scope TEXT,
    valid_from INTEGER NOT NULL,
    valid_to INTEGER NOT NULL,
    filter_values TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS chunks_element ON chunks (element_id);
-- Each chunk's vector while the store is small (ADR 62): a table of its own, so that the
-- filter rows a search looks up stay narrow.
CREATE TABLE IF NOT EXISTS chunk_vectors (
    chunk_id TEXT PRIMARY KEY,
    vector BLOB NOT NULL
) WITHOUT ROWID;
-- Releases before ADR 53 kept each chunk's text here too.
DROP TABLE IF EXISTS chunk_text;
"""
_UPSERT_CHUNK = insert_sql("chunks", DERIVED_CHUNK_COLUMNS, "?", verb="INSERT OR REPLACE")
_PUT_VECTOR = "INSERT OR REPLACE INTO chunk_vectors (chunk_id, vector) VALUES (?, ?)"
_VECTORS = "SELECT c.chunk_id, v.vector FROM chunks c JOIN chunk_vectors v USING (chunk_id)"
_VECTOR_COUNTS = (
    "SELECT count(*), count(v.chunk_id) FROM chunks c LEFT JOIN chunk_vectors v USING (chunk_id)"
)
_WITHOUT_VECTOR = (
    "SELECT c.chunk_id FROM chunks c "
    "WHERE NOT EXISTS (SELECT 1 FROM chunk_vectors v WHERE v.chunk_id = c.chunk_id)"
)
# Every id list is one JSON parameter, expanded by json_each: no statement grows with the input.
_IDS = "(SELECT value FROM json_each(?))"
# One JSON row (connectors/sqlite/json_rows.py): a search reads it beside other threads.
_PASSING_SQL = (
    f"SELECT {json_array_rows('t.chunk_id, t.element_id, t.version')} "  # noqa: S608
    f"FROM chunks t WHERE t.chunk_id IN {_IDS} AND {{where}}"
)
_MATCHING_SQL = "SELECT t.chunk_id FROM chunks t WHERE {where}"
_OF_ELEMENTS_SQL = f"SELECT t.chunk_id FROM chunks t WHERE t.element_id IN {_IDS} AND {{where}}"  # noqa: S608
_PAGE = 2000

# (element_id, version) of a chunk that passed a filter.
Passing = tuple[str, int]


class ChunkDirectory:
    """The filter fields of every chunk of one collection, and its vectors while few; thread-safe.

    Args:
        path: the SQLite file.
        vectors_up_to: rows keep their chunk's vector while the directory holds at most this
            many (the exact index's limit, `connectors.chroma.flat`); past it a row's vector
            would never be read, and would double what the store keeps on disk.
    """

    def __init__(self, path: Path, vectors_up_to: int = 0) -> None:
        self._db = SQLiteConnections(
            path, not_open=lambda: RuntimeError("chunk directory is not open")
        )
        self._vectors_up_to = vectors_up_to

    def open(self) -> None:
        """Create the file and its tables if missing."""
        self._db.open(lambda writer: writer.executescript(_SCHEMA))

    def close(self) -> None:
        """Close every connection."""
        self._db.close()

    def _reader(self) -> sqlite3.Connection:
        return self._db.reader()

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._db.transaction()

    # -- writes ---------------------------------------------------------------------------
    def put(self, chunks: Sequence[ChunkRecord]) -> None:
        """Insert or replace the chunks' rows (idempotent)."""
        if not chunks:
            return
        with self._transaction() as conn:
            keep = (
                self._vectors_up_to > 0
                and conn.execute("SELECT count(*) FROM chunks").fetchone()[0] + len(chunks)
                <= self._vectors_up_to
            )
            conn.executemany(_UPSERT_CHUNK, [derived_chunk_values(c, json.dumps) for c in chunks])
            if keep:
                conn.executemany(
                    _PUT_VECTOR,
                    [(c.chunk_id, _vector_blob(c.embedding)) for c in chunks if c.embedding],
                )

    def delete_ids(self, chunk_ids: Sequence[str]) -> None:
        """Delete chunks by id (unknown ids are ignored)."""
        with self._transaction() as conn:
            _delete_ids(conn, chunk_ids)

    # -- reads ----------------------------------------------------------------------------
    def count(self) -> int:
        """Number of chunks in the directory."""
        return int(self._reader().execute("SELECT count(*) FROM chunks").fetchone()[0])

    def states(self) -> dict[str, int]:
        """Every chunk id with its `valid_to`."""
        return dict(self._reader().execute("SELECT chunk_id, valid_to FROM chunks"))

    def passing(self, chunk_ids: Sequence[str], search_filter: SearchFilter) -> dict[str, Passing]:
        """The chunks among `chunk_ids` that pass the filter, with their element and version."""
        if not chunk_ids:
            return {}
        where, params = compile_filter(search_filter, table="t")
        rows = read_json_rows(
            self._reader(), _PASSING_SQL.format(where=where), (json.dumps(list(chunk_ids)), *params)
        )
        return {cid: (eid, int(version)) for cid, eid, version in rows}

    def matching(self, search_filter: SearchFilter) -> list[str]:
        """Every chunk id that passes the filter (a scan: for filters that pass few)."""
        where, params = compile_filter(search_filter, table="t")
        return [row[0] for row in self._reader().execute(_MATCHING_SQL.format(where=where), params)]

    def of_elements(self, element_ids: Sequence[str], search_filter: SearchFilter) -> list[str]:
        """The ids of the chunks of these elements that pass the filter (index lookups)."""
        if not element_ids:
            return []
        where, params = compile_filter(search_filter, table="t")
        rows = self._reader().execute(
            _OF_ELEMENTS_SQL.format(where=where), (json.dumps(list(element_ids)), *params)
        )
        return [row[0] for row in rows]

    def chunks_of(self, element_ids: Sequence[str]) -> list[str]:
        """The ids of every chunk of these elements, whatever their state."""
        rows = self._reader().execute(
            f"SELECT chunk_id FROM chunks WHERE element_id IN {_IDS}",  # noqa: S608
            (json.dumps(list(element_ids)),),
        )
        return [row[0] for row in rows]

    def ids(self) -> set[str]:
        """Every chunk id in the directory."""
        return {row[0] for row in self._reader().execute("SELECT chunk_id FROM chunks")}

    def vector_counts(self) -> tuple[int, int]:
        """How many rows there are, and how many hold their vector."""
        rows, with_vectors = self._reader().execute(_VECTOR_COUNTS).fetchone()
        return int(rows), int(with_vectors)

    def fill_vectors(self, collection: Any) -> int:
        """Give rows without a vector the one Chroma holds (rows of earlier releases)."""
        missing = [row[0] for row in self._reader().execute(_WITHOUT_VECTOR)]
        filled = 0
        for start in range(0, len(missing), _PAGE):
            page = collection.get(ids=missing[start : start + _PAGE], include=["embeddings"])
            rows = [
                (cid, _vector_blob(vector))
                for cid, vector in zip(page["ids"], page["embeddings"], strict=True)
            ]
            with self._transaction() as conn:
                conn.executemany(_PUT_VECTOR, rows)
            filled += len(rows)
        return filled

    def flat_index(self, limit: int) -> FlatIndex | None:
        """Every chunk's vector, if there are at most `limit` chunks and each has its vector."""
        conn = self._reader()
        conn.execute("BEGIN DEFERRED")  # the counts and the rows from one snapshot
        try:
            rows, with_vectors = conn.execute(_VECTOR_COUNTS).fetchone()
            if rows > limit or with_vectors < rows:
                return None
            ids: list[str] = []
            blobs: list[bytes] = []
            for chunk_id, blob in conn.execute(_VECTORS):
                ids.append(chunk_id)
                blobs.append(blob)
        finally:
            conn.execute("COMMIT")
        return FlatIndex.of(ids, blobs)


def reconcile(
    directory: ChunkDirectory,
    stored_ids: Iterable[str],
    fetch: Callable[[Sequence[str]], Sequence[ChunkRecord]] | None,
) -> tuple[int, int]:
    """Drop the rows of chunks Chroma lacks, and add the rows `fetch` can rebuild.

    `stored_ids` are the ids in Chroma; `fetch(ids)` returns the records of those it can
    from Chroma's metadata and documents (the slow read, done only for ids the directory
    lacks); None: none can be (ADR 52). Returns (rows added, rows removed).
    """
    # The directory first: a chunk written while Chroma is read is then at worst "missing"
    # (rebuilt from Chroma or left unusable, harmless), never "extra" (which would drop its
    # row). Writes go to Chroma first, so a row the directory had before Chroma was read and
    # Chroma lacks now was deleted.
    known = directory.ids()
    stored = set(stored_ids)
    missing = sorted(stored - known) if fetch is not None else []
    extra = sorted(known - stored)
    added = 0
    if fetch is not None:
        for start in range(0, len(missing), _PAGE):
            records = fetch(missing[start : start + _PAGE])
            directory.put(records)
            added += len(records)
    if extra:
        directory.delete_ids(extra)
    return added, len(extra)


def record_from_metadata(chunk_id: str, meta: Mapping[str, Any], text: str) -> ChunkRecord:
    """A chunk record rebuilt from Chroma's metadata of it (see connectors/chroma/connector.py)."""
    scope = str(meta["scope"])
    return ChunkRecord(
        chunk_id=chunk_id,
        element_id=str(meta["element_id"]),
        version=int(meta["version"]),
        index=0,
        text=text,
        embedding=None,
        element_type=str(meta["etype"]),
        name="",
        sensitivity_rank=int(meta["sens"]),
        scope=scope or None,
        valid_from=int(meta["valid_from"]),
        valid_to=int(meta["valid_to"]),
        filter_values={k[2:]: v for k, v in meta.items() if k.startswith("f_")},
    )


def open_directory(path: Path, collection: Any, vectors_up_to: int = 0) -> ChunkDirectory:
    """The collection's directory, made consistent with the vectors where Chroma can tell.

    A store from before the directory (ADR 16) gets it from Chroma's metadata and documents,
    which were complete then. Since ADR 52 Chroma holds vectors only: rows the directory
    lacks stay missing (their vectors are unusable, and `uda sync` rewrites them from the
    system of record), and rows without a vector are dropped. A directory of at most
    `vectors_up_to` rows, some written before it kept vectors (ADR 62), gets theirs from
    Chroma once, so that its store can be searched exactly.
    """
    before_directories = not path.exists()
    directory = ChunkDirectory(path, vectors_up_to)
    directory.open()
    if directory.count() != collection.count():

        def fetch(ids: Sequence[str]) -> list[ChunkRecord]:
            return _records(collection, ids)

        reconcile(directory, all_ids(collection), fetch if before_directories else None)
    rows, with_vectors = directory.vector_counts()
    if with_vectors < rows <= vectors_up_to:
        directory.fill_vectors(collection)
    return directory


def all_ids(collection: Any) -> Iterator[str]:
    """Every id in a Chroma collection, page by page (ids only: the cheap read)."""
    for offset in itertools.count(0, _PAGE):
        ids: list[str] = collection.get(include=[], limit=_PAGE, offset=offset)["ids"]
        yield from ids
        if len(ids) < _PAGE:
            return


def _records(collection: Any, ids: Sequence[str]) -> list[ChunkRecord]:
    """Chunk records rebuilt from Chroma's metadata and documents (the slow read).

    Vectors written without metadata (ADR 52) give none.
    """
    page = collection.get(ids=list(ids), include=["metadatas", "documents"])
    return [
        record_from_metadata(cid, meta, doc or "")
        for cid, meta, doc in zip(page["ids"], page["metadatas"], page["documents"], strict=True)
        if meta
    ]


def _vector_blob(vector: Sequence[float]) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def _delete_ids(conn: sqlite3.Connection, chunk_ids: Sequence[str]) -> None:
    for start in range(0, len(chunk_ids), _PAGE):
        ids = json.dumps(list(chunk_ids[start : start + _PAGE]))
        conn.execute(f"DELETE FROM chunks WHERE chunk_id IN {_IDS}", (ids,))  # noqa: S608
        conn.execute(f"DELETE FROM chunk_vectors WHERE chunk_id IN {_IDS}", (ids,))  # noqa: S608
