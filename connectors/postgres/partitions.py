"""The vector store partitioned by scope: a project-bound search reads its projects' slices.

With `partition_by = "scope"` the connector's `vector_chunks` is a list-partitioned table:
one partition for the chunks of unscoped elements and one per project scope, made when a
project's first chunk is written (docs/adr/0035-vector-partitions-by-scope.md). Each has its
own HNSW index (an index on the parent is made on every partition). A caller cleared for
some projects sees unscoped elements and those projects only, and the filter says so on
the partition key, so PostgreSQL reads those partitions' indexes and skips the others:
invisible chunks are never visited, where one index over everything has to walk past them.

The key is a column of its own, `part`: the scope, or '' for none (a partition key cannot be
NULL in a primary key, and no scope is ''). A chunk whose scope changes moves: the write
deletes it from the partition it leaves and upserts it into the one it joins, in one
transaction.
"""

from __future__ import annotations

import hashlib
from typing import Any

from connectors.contract.records import SearchFilter
from connectors.contract.system_of_record import DERIVED_CHUNK_COLUMNS, conflict_update, insert_sql
from connectors.postgres.filter_sql import storable
from connectors.postgres.vector_sql import VECTOR_INDEXES, vector_columns

UNSCOPED = ""
# One partition made at a time, across connectors and processes (pg_advisory_xact_lock).
PARTITION_LOCK = 0x0DA5C4F


def part_of(scope: str | None) -> str:
    """The partition key of a chunk with this scope."""
    return UNSCOPED if scope is None else scope


def partition_name(part: str) -> str:
    """The partition's table name: a digest, so any scope gives a valid short identifier."""
    if part == UNSCOPED:
        return "vector_chunks_unscoped"
    return "vector_chunks_p_" + hashlib.sha256(part.encode()).hexdigest()[:20]


def vector_schema(dimension: int) -> str:
    """`vector_chunks` partitioned by `part`, its unscoped partition and its indexes."""
    return f"""
CREATE TABLE IF NOT EXISTS vector_chunks (
    chunk_id text NOT NULL,
{vector_columns(dimension)},
    part text NOT NULL,
    PRIMARY KEY (chunk_id, part)
) PARTITION BY LIST (part);
CREATE TABLE IF NOT EXISTS {partition_name(UNSCOPED)} PARTITION OF vector_chunks
    FOR VALUES IN ('');
{VECTOR_INDEXES}
"""


# Whether the schema's vector table is partitioned ('p') or plain ('r').
VECTOR_TABLE_KIND = "SELECT relkind::text FROM pg_class WHERE oid = 'vector_chunks'::regclass"


def prune(
    where: str, params: dict[str, Any], search_filter: SearchFilter, *, table: str
) -> tuple[str, dict[str, Any]]:
    """`where` with the caller's scopes also said on the partition key.

    The scope clause already admits exactly these rows; said on `part` as well, it lets
    PostgreSQL leave out every other partition (plan-time or run-time pruning).
    """
    if search_filter.all_projects:
        return where, params
    parts = [UNSCOPED, *(p for p in search_filter.projects if storable(p))]
    return f"{where} AND {table}.part = ANY(%(f_parts)s::text[])", {**params, "f_parts": parts}


_COLUMNS = (*DERIVED_CHUNK_COLUMNS, "text", "embedding", "part")
UPSERT = f"{insert_sql('vector_chunks', _COLUMNS, '%s')}\n" + conflict_update(
    "chunk_id, part", [c for c in _COLUMNS if c not in ("chunk_id", "part")]
)
# Rows of these chunks in a partition other than the one each now belongs to: removed before
# the upsert, so a chunk is in one partition only.
LEAVE_OTHER_PARTS = """
DELETE FROM vector_chunks v
USING unnest(%s::text[], %s::text[]) AS moved(chunk_id, part)
WHERE v.chunk_id = moved.chunk_id AND v.part <> moved.part
"""


__all__ = [
    "LEAVE_OTHER_PARTS",
    "PARTITION_LOCK",
    "UNSCOPED",
    "UPSERT",
    "VECTOR_TABLE_KIND",
    "part_of",
    "partition_name",
    "prune",
    "vector_schema",
]
