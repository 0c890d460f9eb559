"""The system of record hash-partitioned by element id, with `partition_by = "scope"`.

The vector store is partitioned by scope, so that a project-bound search reads its projects'
index only (`connectors.postgres.partitions`). The system of record is read by id, never by
scope: its tables are split by a hash of the element id into `RECORD_PARTITIONS` parts of
equal size, so that each part's indexes, vacuum and backups stay a fraction of the whole,
and an element's states and chunks fall in parts of the same number. The key is in both
primary keys: `states` keeps (element, version), which refuses two writers of one version,
and `chunks` becomes (element, chunk) (a chunk id names its element, so it is as unique).
A schema made before keeps its plain tables: the layout is read from the table, not assumed
(docs/adr/0035-vector-partitions-by-scope.md).
"""

from __future__ import annotations

from connectors.contract.system_of_record import CHUNK_COLUMNS, conflict_update, insert_sql

RECORD_PARTITIONS = 8
RECORD_TABLES = ("states", "chunks")

# Whether the schema's `chunks` table is hash-partitioned ('p') or plain ('r').
CHUNKS_TABLE_KIND = "SELECT relkind::text FROM pg_class WHERE oid = 'chunks'::regclass"

UPSERT_CHUNK = f"{insert_sql('chunks', CHUNK_COLUMNS, '%s')}\n" + conflict_update(
    "element_id, chunk_id", [c for c in CHUNK_COLUMNS if c not in ("element_id", "chunk_id")]
)
"""The chunk upsert of a partitioned `chunks` (its key includes the partition key)."""


def partitioned_by_hash(partitioned: bool) -> str:
    """The clause after a record table's columns."""
    return " PARTITION BY HASH (element_id)" if partitioned else ""


def chunks_key(partitioned: bool) -> str:
    """The `chunks` primary key: with the partition key when partitioned."""
    return "PRIMARY KEY (element_id, chunk_id)" if partitioned else "PRIMARY KEY (chunk_id)"


def record_partitions() -> str:
    """The parts of `states` and `chunks`, created if missing."""
    return "\n".join(
        f"CREATE TABLE IF NOT EXISTS {table}_h{i} PARTITION OF {table} "
        f"FOR VALUES WITH (MODULUS {RECORD_PARTITIONS}, REMAINDER {i});"
        for table in RECORD_TABLES
        for i in range(RECORD_PARTITIONS)
    )


__all__ = [
    "CHUNKS_TABLE_KIND",
    "RECORD_PARTITIONS",
    "UPSERT_CHUNK",
    "chunks_key",
    "partitioned_by_hash",
    "record_partitions",
]
