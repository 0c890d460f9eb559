"""SQL of the SQLite connector: the schema, and the lexical leg's fixed statements."""

from __future__ import annotations

from connectors.contract.records import OPEN
from connectors.contract.system_of_record import (
    CHUNK_COLUMNS,
    HEAD_COLUMNS,
    LATEST_COLUMNS,
    LOADED_CHUNK_COLUMNS,
    LOADED_CHUNK_COLUMNS_WITHOUT_EMBEDDING,
    STATE_COLUMNS,
    column_list,
    insert_sql,
)
from connectors.sqlite.json_rows import json_array_rows
from connectors.sqlite.postings import SCHEMA as POSTINGS_SCHEMA

SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS states (
    element_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    hlc INTEGER NOT NULL,
    valid_to INTEGER NOT NULL,
    element_type TEXT NOT NULL,
    name TEXT NOT NULL,
    sensitivity_rank INTEGER NOT NULL,
    scope TEXT,
    timestamp_ms INTEGER NOT NULL,
    tombstone INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    payload TEXT NOT NULL,
    filter_values TEXT NOT NULL,
    PRIMARY KEY (element_id, version)
) WITHOUT ROWID;
-- Current and as-of lookups, covering a state's head (everything but the payload): a search
-- ranks its candidates and checks every node its expansion reached without reading those
-- rows, which payloads make wide (ADR 51). Built when an older store is opened.
CREATE INDEX IF NOT EXISTS states_head ON states (
    element_id, valid_to, hlc, sensitivity_rank, scope, tombstone, name, element_type,
    timestamp_ms, filter_values);
DROP INDEX IF EXISTS states_clearance_named;
DROP INDEX IF EXISTS states_clearance;
DROP INDEX IF EXISTS states_current;
-- Aggregates (connectors/sqlite/aggregation.py): current live states by type and clearance,
-- with their timestamp, so that "count by month" reads this index only. Partial on a condition
-- only that statement states (`sensitivity_rank >= 0`), so that no other query is tempted by
-- it (a lookup per row would make a structured retrieval several times slower).
CREATE INDEX IF NOT EXISTS states_aggregate
    ON states (element_type, sensitivity_rank, scope, timestamp_ms, valid_to, tombstone)
    WHERE valid_to = 9223372036854775807 AND tombstone = 0 AND sensitivity_rank >= 0;
-- Structured retrieval ordered by time (connectors/sqlite/selection.py): the newest first
-- and a date range read a slice of this index instead of sorting every visible state; every
-- state, not only current ones, because later pages read as of their first page's stamp.
CREATE INDEX IF NOT EXISTS states_time ON states (timestamp_ms, element_id);
-- Ordered by name, and relation paths that name their neighbour (`partOf.name = ...`).
CREATE INDEX IF NOT EXISTS states_name ON states (name, element_id);
-- The ids each commit wrote or retired a state of, in commit order: the current heads a
-- process keeps in memory catch up from here (connectors/sqlite/current_heads.py).
CREATE TABLE IF NOT EXISTS state_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    element_id TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    chunk_id TEXT PRIMARY KEY,
    element_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    text TEXT NOT NULL,
    embedding BLOB
);
CREATE INDEX IF NOT EXISTS chunks_state ON chunks (element_id, version);
CREATE TABLE IF NOT EXISTS edges (
    source_id TEXT NOT NULL,
    relation TEXT NOT NULL,
    target_id TEXT NOT NULL,
    valid_from INTEGER NOT NULL,
    valid_to INTEGER NOT NULL,
    PRIMARY KEY (source_id, relation, target_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS edges_target ON edges (target_id);
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    store TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_store ON outbox (store, seq);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- Saved queries live in a file of their own (connectors/sqlite/saved_queries.py).
CREATE TABLE IF NOT EXISTS text_chunks (
    rowid INTEGER PRIMARY KEY,
    chunk_id TEXT NOT NULL UNIQUE,
    element_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    element_type TEXT NOT NULL,
    sensitivity_rank INTEGER NOT NULL,
    scope TEXT,
    valid_from INTEGER NOT NULL,
    valid_to INTEGER NOT NULL,
    filter_values TEXT NOT NULL,
    name TEXT NOT NULL,
    text TEXT NOT NULL,
    length INTEGER NOT NULL,
    term_freqs BLOB  -- (term id, tf) pairs (connectors/sqlite/packed_terms.py)
);
-- The statistics of a caller's BM25, for the current chunks of each clearance label and type
-- (docs/adr/0050-lexical-leg-on-tantivy.md): a caller's are the sums over what it may see.
-- `scoped` 0 is a chunk without a scope ('' then); kept in the write that changes the chunks.
CREATE TABLE IF NOT EXISTS lexicon (id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS lexical_labels (
    sensitivity_rank INTEGER NOT NULL,
    scoped INTEGER NOT NULL,
    scope TEXT NOT NULL,
    element_type TEXT NOT NULL,
    chunks INTEGER NOT NULL,
    total_length INTEGER NOT NULL,
    PRIMARY KEY (sensitivity_rank, scoped, scope, element_type)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lexical_term_df (
    term_id INTEGER NOT NULL,
    sensitivity_rank INTEGER NOT NULL,
    scoped INTEGER NOT NULL,
    scope TEXT NOT NULL,
    element_type TEXT NOT NULL,
    chunks INTEGER NOT NULL,
    PRIMARY KEY (term_id, sensitivity_rank, scoped, scope, element_type)
) WITHOUT ROWID;
"""
    + POSTINGS_SCHEMA
)

# Older lexical indexes of the text store, dropped when it is rebuilt on open: the FTS5 index
# of releases before the shared analyzer, then one row per (term, chunk) (before ADR 60).
LEGACY_TEXT_INDEXES = (
    "DROP TRIGGER IF EXISTS text_chunks_ai",
    "DROP TRIGGER IF EXISTS text_chunks_ad",
    "DROP TABLE IF EXISTS text_vocab",
    "DROP TABLE IF EXISTS text_fts",
    "DROP TRIGGER IF EXISTS text_chunks_terms_ad",
    "DROP TABLE IF EXISTS chunk_terms",
    "DROP TABLE IF EXISTS lexical_df",
)

# BM25 (Lucene's idf) with the statistics of the chunks the caller may see, not of the whole
# index: FTS5's own bm25() counts hidden chunks in idf and average length, so adding a hidden
# document would move a caller's scores (docs/adr/0005-lexical-statistics-per-caller.md).
VISIBLE_STATS_SQL = "SELECT count(*), avg(length) FROM text_chunks t WHERE {where}"

LIVE_EDGES_SQL = """
SELECT source_id, relation, target_id, valid_from, valid_to FROM edges
WHERE valid_to = ?2 AND (
    source_id IN (SELECT value FROM json_each(?1))
    OR target_id IN (SELECT value FROM json_each(?1)))
"""

# What the derived stores should hold (uda/write/consistency.py), each in one statement.
EXPECTED_CHUNKS_SQL = """
SELECT c.chunk_id, s.valid_to FROM chunks c
JOIN states s ON s.element_id = c.element_id AND s.version = c.version
"""
EXPECTED_EDGES_SQL = "SELECT source_id, relation, target_id, valid_from, valid_to FROM edges"
LATEST_VERSIONS_SQL = "SELECT element_id, max(version) FROM states GROUP BY element_id"
PENDING_COUNTS_SQL = "SELECT store, count(*) FROM outbox GROUP BY store"
# The system of record's rows, spelled from connectors/contract/system_of_record.py.
INSERT_STATE_SQL = insert_sql("states", STATE_COLUMNS, "?")
INSERT_CHUNK_SQL = insert_sql("chunks", CHUNK_COLUMNS, "?", verb="INSERT OR REPLACE")
# DISTINCT: a drain page may name a state twice (a repair re-sends a pending key), and a
# store must not get the same chunk twice in one upsert.
_LOAD_CHUNKS_SQL = """
WITH keys(eid, ver) AS (
    SELECT DISTINCT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))
SELECT {columns}
FROM keys JOIN chunks c ON c.element_id = keys.eid AND c.version = keys.ver
JOIN states s ON s.element_id = c.element_id AND s.version = c.version
ORDER BY c.element_id, c.version, c.idx
"""
LOAD_CHUNKS_SQL = _LOAD_CHUNKS_SQL.format(columns=column_list(LOADED_CHUNK_COLUMNS))
LOAD_CHUNKS_WITHOUT_EMBEDDING_SQL = _LOAD_CHUNKS_SQL.format(
    columns=column_list(LOADED_CHUNK_COLUMNS_WITHOUT_EMBEDDING)
)
# The text of chunks by id (phase 3's snippets and exact matches): one JSON row.
CHUNK_TEXTS_SQL = f"""
SELECT {json_array_rows("c.chunk_id, c.text")} FROM chunks c
WHERE c.chunk_id IN (SELECT value FROM json_each(?))
"""  # noqa: S608 - fixed fragments only
STATE_SELECT = column_list(STATE_COLUMNS, "s")
HEAD_SELECT = column_list(HEAD_COLUMNS, "s")
HEAD_SELECT_WITHOUT_VALUES = column_list(HEAD_COLUMNS, "s", json_as="NULL")
# Whole states of exact (element, version) pairs, given as a JSON array of pairs in `?1`,
# with the newest state's clearance as it is now.
VERSIONS_SQL = f"""
WITH keys(eid, ver) AS (
    SELECT DISTINCT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?1))
SELECT {json_array_rows(f"{STATE_SELECT}, {column_list(LATEST_COLUMNS, 'l')}")}
FROM keys JOIN states s ON s.element_id = keys.eid AND s.version = keys.ver
JOIN states l ON l.element_id = keys.eid AND l.valid_to = {OPEN}
"""  # noqa: S608 - fixed fragments only


def state_rows_sql(columns: str, as_of: int | None) -> str:
    """`columns` of each id's state as of `?2` (now: `as_of` None), then its newest clearance.

    All rows come as one JSON array (`connectors.sqlite.json_rows`).

    Ids come as JSON in `?1`. With `HEAD_SELECT` it reads the `states_head` index only. A
    current state is the newest, so its clearance is the newest clearance; an older one
    takes it from the current row.
    """
    if as_of is None:
        latest, join, validity = column_list(LATEST_COLUMNS, "s"), "", "s.valid_to = ?2"
    else:
        latest, validity = column_list(LATEST_COLUMNS, "l"), "s.hlc <= ?2 AND s.valid_to > ?2"
        join = f"JOIN states l ON l.element_id = ids.id AND l.valid_to = {OPEN}"
    return f"""
WITH ids(id) AS (SELECT DISTINCT value FROM json_each(?1))
SELECT {json_array_rows(f"{columns}, {latest}")}
FROM ids JOIN states s ON s.element_id = ids.id
{join}
WHERE {validity}
"""  # noqa: S608 - only fixed fragments are formatted in; values are parameters
