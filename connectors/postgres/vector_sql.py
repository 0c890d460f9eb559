"""The PostgreSQL vector store's SQL: its table, indexes, upsert and nearest-neighbour queries.

The plain and the partitioned table share one column list and one set of indexes.

`connectors.postgres.vector` runs them; `connectors.postgres.partitions` builds the
partitioned table from the same columns and indexes.
"""

from __future__ import annotations

from connectors.contract.system_of_record import (
    DERIVED_CHUNK_COLUMNS,
    conflict_update,
    insert_sql,
)


def vector_columns(dim: int) -> str:
    """The vector store's columns after `chunk_id`: one list for both layouts."""
    return f"""    element_id text NOT NULL,
    version integer NOT NULL,
    element_type text NOT NULL,
    sensitivity_rank integer NOT NULL,
    scope text,
    valid_from bigint NOT NULL,
    valid_to bigint NOT NULL,
    filter_values jsonb NOT NULL,
    text text NOT NULL,
    embedding vector({int(dim)}) NOT NULL"""


# The vector store's indexes, on the table or (partitioned) on every partition.
VECTOR_INDEXES = """
CREATE INDEX IF NOT EXISTS vector_chunks_element ON vector_chunks (element_id);
CREATE INDEX IF NOT EXISTS vector_chunks_valid ON vector_chunks (valid_to, sensitivity_rank);
CREATE INDEX IF NOT EXISTS vector_chunks_hnsw ON vector_chunks
    USING hnsw (embedding vector_cosine_ops);
"""


def plain_vector_table(dim: int) -> str:
    """The plain (unpartitioned) vector store table and its indexes."""
    return f"""
CREATE TABLE IF NOT EXISTS vector_chunks (
    chunk_id text PRIMARY KEY,
{vector_columns(dim)}
);
{VECTOR_INDEXES}
"""


_VECTOR_CHUNK_COLUMNS = (*DERIVED_CHUNK_COLUMNS, "text", "embedding")
UPSERT_VECTOR_CHUNK = (
    f"{insert_sql('vector_chunks', _VECTOR_CHUNK_COLUMNS, '%s')}\n"
    f"{conflict_update('chunk_id', _VECTOR_CHUNK_COLUMNS)}"
)

# Transaction-local settings for the approximate query (parameters: ef_search and
# max_scan_tuples). Sequential and bitmap scans are off because pgvector's cost estimate does
# not know the iterative scan and prices the HNSW index above reading every row of a small
# table: at 10,000 chunks of 384 dimensions PostgreSQL read them all (16 ms) where the index
# answers in 0.5 ms (ADR 20). B-tree index scans stay open to the planner.
APPROXIMATE_SETTINGS = (
    "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
    "set_config('hnsw.ef_search', %s, true), "
    "set_config('hnsw.max_scan_tuples', %s, true), "
    "set_config('enable_seqscan', 'off', true), "
    "set_config('enable_bitmapscan', 'off', true)"
)

# The exact query: no HNSW index scan; every other access path is the planner's choice.
EXACT_SETTINGS = (
    "SELECT set_config('enable_indexscan', 'off', true), "
    "set_config('enable_seqscan', 'on', true), "
    "set_config('enable_bitmapscan', 'on', true)"
)

# The inner query lets the HNSW index order by distance (iterative scan with the filter
# inside); the outer one restores exact order among the rows found, ties by chunk id.
_NEAREST = """
WITH nearest AS MATERIALIZED (
    SELECT v.chunk_id, v.element_id, v.version, v.text, v.embedding <=> %(q)s AS distance
    FROM vector_chunks v
    WHERE {where}
    ORDER BY v.embedding <=> %(q)s{tie}
    LIMIT %(k)s)
SELECT chunk_id, element_id, version, text, 1 - distance FROM nearest
ORDER BY distance, chunk_id COLLATE "C"
"""


def nearest_sql(where: str, *, exact: bool) -> str:
    """Top-k by cosine distance under `where` (exact: ties broken by chunk id inside too)."""
    return _NEAREST.format(where=where, tie=', v.chunk_id COLLATE "C"' if exact else "")


# Every passing chunk of the given elements, scored (for candidates found by the graph).
_SCORES = """
SELECT v.chunk_id, v.element_id, v.version, v.text, 1 - (v.embedding <=> %(q)s) AS score
FROM vector_chunks v
WHERE v.element_id = ANY(%(ids)s::text[]) AND {where}
ORDER BY score DESC, v.chunk_id COLLATE "C"
"""


def scores_sql(where: str) -> str:
    """The passing chunks of `%(ids)s` with their cosine similarity to `%(q)s`."""
    return _SCORES.format(where=where)


__all__ = [
    "APPROXIMATE_SETTINGS",
    "EXACT_SETTINGS",
    "UPSERT_VECTOR_CHUNK",
    "VECTOR_INDEXES",
    "nearest_sql",
    "plain_vector_table",
    "scores_sql",
    "vector_columns",
]
