"""SQL of the SQLite connector: the schema, and the lexical leg's fixed statements."""

from __future__ import annotations

SCHEMA = """
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
CREATE INDEX IF NOT EXISTS states_current ON states (element_id, valid_to);
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
    length INTEGER NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS text_fts USING fts5(
    name, text, content='text_chunks', content_rowid='rowid', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS text_chunks_ai AFTER INSERT ON text_chunks BEGIN
    INSERT INTO text_fts (rowid, name, text) VALUES (new.rowid, new.name, new.text);
END;
CREATE TRIGGER IF NOT EXISTS text_chunks_ad AFTER DELETE ON text_chunks BEGIN
    INSERT INTO text_fts (text_fts, rowid, name, text)
    VALUES ('delete', old.rowid, old.name, old.text);
END;
CREATE VIRTUAL TABLE IF NOT EXISTS text_vocab USING fts5vocab(text_fts, 'instance');
"""

# Per reader connection: a scratch FTS5 table with the same tokenizer, used to turn query
# words into the index's stemmed terms exactly as the index would.
QUERY_TOKENIZER = """
CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_tokens USING fts5(x, tokenize='porter unicode61');
CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_terms USING fts5vocab(temp, query_tokens, 'row');
"""

# BM25 (Lucene's idf) with the statistics of the chunks the caller may see, not of the whole
# index: FTS5's own bm25() counts hidden chunks in idf and average length, so adding a hidden
# document would move a caller's scores (docs/adr/0005-lexical-statistics-per-caller.md).
VISIBLE_STATS_SQL = "SELECT count(*), avg(length) FROM text_chunks t WHERE {where}"
OCCURRENCES_SQL = """
WITH terms(term) AS (SELECT value FROM json_each(?))
SELECT v.doc, v.term, count(*), t.length, t.chunk_id
FROM text_vocab v JOIN terms ON v.term = terms.term
JOIN text_chunks t ON t.rowid = v.doc
WHERE {where}
GROUP BY v.doc, v.term
"""

LIVE_EDGES_SQL = """
SELECT source_id, relation, target_id, valid_from, valid_to FROM edges
WHERE valid_to = ?2 AND (
    source_id IN (SELECT value FROM json_each(?1))
    OR target_id IN (SELECT value FROM json_each(?1)))
"""

# What the derived stores should hold (uda/consistency.py), each in one statement.
EXPECTED_CHUNKS_SQL = """
SELECT c.chunk_id, s.valid_to FROM chunks c
JOIN states s ON s.element_id = c.element_id AND s.version = c.version
"""
EXPECTED_EDGES_SQL = "SELECT source_id, relation, target_id, valid_from, valid_to FROM edges"
LATEST_VERSIONS_SQL = "SELECT element_id, max(version) FROM states GROUP BY element_id"
PENDING_COUNTS_SQL = "SELECT store, count(*) FROM outbox GROUP BY store"
# FTS5 keeps one docsize row per indexed document: chunks without one cannot be found, and
# entries without a chunk would lend their terms to whichever chunk reuses the rowid.
TEXT_INDEX_DRIFT_SQL = """
SELECT (SELECT count(*) FROM text_chunks t
        WHERE NOT EXISTS (SELECT 1 FROM text_fts_docsize d WHERE d.id = t.rowid))
     + (SELECT count(*) FROM text_fts_docsize d
        WHERE NOT EXISTS (SELECT 1 FROM text_chunks t WHERE t.rowid = d.id))
"""
