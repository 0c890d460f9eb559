"""The PostgreSQL connector's tables and indexes: the `schema` script run at every start.

One `CREATE ... IF NOT EXISTS` script for the system of record (`states`, `chunks`, `edges`,
`outbox`, `meta`, `secrets`, `settings`, `saved_queries`), the vector store's plain table
(`connectors.postgres.vector_sql`) and the lexical store (`text_chunks`, `chunk_terms`).
Kept apart from the statements that read and write these tables, which change more often
than their layout. Only fixed fragments are formatted in (`OPEN`, the vector dimension after
validation as an int).
"""

from __future__ import annotations

from connectors.contract.records import OPEN
from connectors.postgres.record_partitions import chunks_key, partitioned_by_hash
from connectors.postgres.vector_sql import plain_vector_table


def schema(dimension: int, *, vector_table: bool = True, record_partitions: bool = False) -> str:
    """The tables and indexes, created if missing (run with `search_path` = our schema).

    Without `vector_table` the vector store's table is left out: the caller makes it
    partitioned (`connectors.postgres.partitions`). With `record_partitions`, `states` and
    `chunks` are made hash-partitioned by element id; the caller adds the parts
    (`connectors.postgres.record_partitions`).
    """
    dim = int(dimension)
    vector_table_ddl = plain_vector_table(dim) if vector_table else ""
    by_hash = partitioned_by_hash(record_partitions)
    return f"""
CREATE TABLE IF NOT EXISTS states (
    element_id text NOT NULL,
    version integer NOT NULL,
    hlc bigint NOT NULL,
    valid_to bigint NOT NULL,
    element_type text NOT NULL,
    name text NOT NULL,
    sensitivity_rank integer NOT NULL,
    scope text,
    timestamp_ms bigint NOT NULL,
    tombstone boolean NOT NULL,
    content_hash text NOT NULL,
    payload jsonb NOT NULL,
    filter_values jsonb NOT NULL,
    PRIMARY KEY (element_id, version)
){by_hash};
-- Current-state lookups for a state's head (everything but the payload, ADR 51): a search
-- reads the heads of every candidate and node its expansion reached; a large payload stays
-- in TOAST, unread. Not covering: filter values could pass a B-tree entry's size limit.
CREATE INDEX IF NOT EXISTS states_clearance_named ON states (element_id)
    INCLUDE (version, sensitivity_rank, scope, tombstone, name) WHERE valid_to = {OPEN};
DROP INDEX IF EXISTS states_clearance;
DROP INDEX IF EXISTS states_current;
-- Structured retrieval (connectors/postgres/selection.py): ordered by time or name, and
-- relation paths that name their neighbour (`partOf.name = ...`). Every state, not only
-- current ones: later pages read as of their first page's stamp. Text by code point, as the
-- statements compare it.
CREATE INDEX IF NOT EXISTS states_time ON states (timestamp_ms, (element_id COLLATE "C"));
CREATE INDEX IF NOT EXISTS states_name ON states ((name COLLATE "C"), (element_id COLLATE "C"));
CREATE TABLE IF NOT EXISTS chunks (
    chunk_id text NOT NULL,
    element_id text NOT NULL,
    version integer NOT NULL,
    idx integer NOT NULL,
    text text NOT NULL,
    embedding vector,
    {chunks_key(record_partitions)}
){by_hash};
CREATE INDEX IF NOT EXISTS chunks_state ON chunks (element_id, version);
CREATE TABLE IF NOT EXISTS edges (
    source_id text NOT NULL,
    relation text NOT NULL,
    target_id text NOT NULL,
    valid_from bigint NOT NULL,
    valid_to bigint NOT NULL,
    PRIMARY KEY (source_id, relation, target_id)
);
CREATE INDEX IF NOT EXISTS edges_target ON edges (target_id);
CREATE TABLE IF NOT EXISTS outbox (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    store text NOT NULL,
    kind text NOT NULL,
    key text NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_store ON outbox (store, seq);
CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value bigint NOT NULL);
CREATE TABLE IF NOT EXISTS secrets (key text PRIMARY KEY, value bytea NOT NULL);
CREATE TABLE IF NOT EXISTS settings (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS saved_queries (
    query_id text PRIMARY KEY,
    owner text,
    created_ms bigint NOT NULL,
    body text NOT NULL,
    embedding bytea
);
CREATE INDEX IF NOT EXISTS saved_queries_created ON saved_queries (created_ms);

{vector_table_ddl}CREATE TABLE IF NOT EXISTS text_chunks (
    chunk_id text PRIMARY KEY,
    element_id text NOT NULL,
    version integer NOT NULL,
    element_type text NOT NULL,
    sensitivity_rank integer NOT NULL,
    scope text,
    valid_from bigint NOT NULL,
    valid_to bigint NOT NULL,
    filter_values jsonb NOT NULL,
    name text NOT NULL,
    text text NOT NULL,
    length integer NOT NULL
);
CREATE INDEX IF NOT EXISTS text_chunks_valid ON text_chunks (valid_to, sensitivity_rank);
-- What BM25 reads of each occurring chunk (length and the pushdown columns), without the
-- text: index-only lookups once autovacuum has marked the pages all-visible.
CREATE INDEX IF NOT EXISTS text_chunks_scoring ON text_chunks (chunk_id)
    INCLUDE (length, sensitivity_rank, scope, valid_to, valid_from, element_type);
-- The lexical index: one row per (stemmed term, chunk) with the term's frequency.
CREATE TABLE IF NOT EXISTS chunk_terms (
    term text NOT NULL,
    chunk_id text NOT NULL REFERENCES text_chunks (chunk_id) ON DELETE CASCADE,
    tf integer NOT NULL,
    PRIMARY KEY (term, chunk_id)
);
CREATE INDEX IF NOT EXISTS chunk_terms_chunk ON chunk_terms (chunk_id);
"""
