"""The text store's postings: an FTS5 index of each chunk's term ids (ADR 60).

The exhaustive lexical path (`as_of` reads, value filters, an engine index that is behind)
needs every chunk that holds a query term, current or not. SQLite's FTS5 keeps those
postings: a contentless table (`content=''`) without positions or sizes (`detail=none`,
`columnsize=0`) whose document is the chunk's row id and whose tokens are its term ids
from `lexicon`, as decimal numbers. It is BM25's postings only; FTS5's own ranking is not
used (it would count hidden chunks, ADR 5): term frequencies come from the packed BLOBs
(`packed_terms`), which the same write fills.

A contentless table forgets what it indexed, so a row is taken out by giving its tokens
again (FTS5's `delete` command): the ids of the row's BLOB, which were its tokens.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from connectors.sqlite import packed_terms

TABLE = "text_postings"
SCHEMA = f"""
CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING fts5(
    terms, content='', detail=none, columnsize=0, tokenize='ascii'
);
-- One row per (term, chunk): `term` the id as text, `doc` the chunk's row id.
CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE}_rows USING fts5vocab({TABLE}, instance);
"""
_INSERT = f"INSERT INTO {TABLE} (rowid, terms) VALUES (?, ?)"  # noqa: S608 - a constant
_DELETE = f"INSERT INTO {TABLE} ({TABLE}, rowid, terms) VALUES ('delete', ?, ?)"  # noqa: S608
_CLEAR = f"INSERT INTO {TABLE} ({TABLE}) VALUES ('delete-all')"  # noqa: S608 - a constant


def _tokens(ids: Iterable[int]) -> str:
    return " ".join(map(str, ids))


def add(conn: sqlite3.Connection, rows: Sequence[tuple[int, bytes | None]]) -> None:
    """Post each `(row id, packed BLOB)`'s terms."""
    conn.executemany(_INSERT, [(rid, _tokens(packed_terms.ids_of(blob))) for rid, blob in rows])


def remove(conn: sqlite3.Connection, rows: Sequence[tuple[int, bytes | None]]) -> None:
    """Take back each `(row id, packed BLOB)`'s postings, the BLOB being what was posted."""
    conn.executemany(_DELETE, [(rid, _tokens(packed_terms.ids_of(blob))) for rid, blob in rows])


def clear(conn: sqlite3.Connection) -> None:
    """Drop every posting (a rebuild posts every row again)."""
    conn.execute(_CLEAR)


def any_of(term_ids: Sequence[int]) -> str:
    """The FTS5 query that matches the chunks holding any of these terms."""
    return " OR ".join(map(str, term_ids))


# The exhaustive path's rows, one range of row ids at a time: every chunk in the range that
# holds a query term and passes the filter, with its length and packed frequencies, read as
# the engine path reads its candidates: JSON arrays of row ids, lengths and BLOB sizes, and
# the BLOBs one after the other. Parameters: the `any_of` query, the range (after, up to),
# the filter's.
MATCHING_SQL = packed_terms.rows_and_blobs_sql(
    "json_group_array(t.rowid), json_group_array(t.length), "
    "json_group_array(coalesce(length(t.term_freqs), 0))",
    f"SELECT rowid AS doc FROM {TABLE} WHERE {TABLE} MATCH ? AND rowid > ? AND rowid <= ?",  # noqa: S608
)

# `uda check`: chunks whose postings are not their BLOB's terms (by count), and postings of
# no chunk, which would lend their terms to whichever chunk reuses the row id.
DRIFT_SQL = f"""
WITH posted(doc, n) AS (SELECT doc, count(*) FROM {TABLE}_rows GROUP BY doc)
SELECT (SELECT count(*) FROM text_chunks t LEFT JOIN posted p ON p.doc = t.rowid
        WHERE coalesce(length(t.term_freqs), 0) / {2 * packed_terms.PAIR.itemsize}
              <> coalesce(p.n, 0))
     + (SELECT count(*) FROM posted p
        WHERE NOT EXISTS (SELECT 1 FROM text_chunks t WHERE t.rowid = p.doc))
"""  # noqa: S608 - fixed fragments only
