"""The system of record's fixed statements on PostgreSQL: states, chunks, edges, outbox.

What `connectors.postgres.connector` runs to commit a batch, read states (as of a stamp,
or only their heads), live edges and chunks, and what the consistency check expects
the derived stores to hold. Columns are spelled from `connectors.contract.system_of_record`.
Only fixed fragments are formatted into SQL (table aliases chosen here, `OPEN`); every id
and value is a parameter.
"""

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
    conflict_update,
    insert_sql,
)

# -- system of record ------------------------------------------------------------------
# Rows spelled from connectors/contract/system_of_record.py.
INSERT_STATE = insert_sql("states", STATE_COLUMNS, "%s")
RETIRE_STATE = "UPDATE states SET valid_to = %s WHERE element_id = %s AND version = %s"
UPSERT_CHUNK = (
    f"{insert_sql('chunks', CHUNK_COLUMNS, '%s')}\n{conflict_update('chunk_id', CHUNK_COLUMNS)}"
)
UPSERT_EDGE = """
INSERT INTO edges (source_id, relation, target_id, valid_from, valid_to)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (source_id, relation, target_id) DO UPDATE SET
    valid_from = excluded.valid_from, valid_to = excluded.valid_to
"""
INSERT_OUTBOX = "INSERT INTO outbox (store, kind, key) VALUES (%s, %s, %s)"
RAISE_HLC = """
INSERT INTO meta (key, value) VALUES ('hlc', %s)
ON CONFLICT (key) DO UPDATE SET value = greatest(meta.value, excluded.value)
"""


# Payload and filter values as JSON text, for `LazyJSON`.
_STATE_SELECT = column_list(STATE_COLUMNS, "s", json_as="{}::text")
_HEAD_SELECT = column_list(HEAD_COLUMNS, "s", json_as="{}::text")
_HEAD_SELECT_WITHOUT_VALUES = column_list(HEAD_COLUMNS, "s", json_as="NULL")


def states_sql(as_of: int | None) -> str:
    """Each id's state as of `%(as_of)s` (or the current one), with its newest state's clearance.

    Payload and filter values come as JSON text, for `LazyJSON`: a search fetches hundreds of
    states and hydrates a few.
    """
    return _state_rows_sql(_STATE_SELECT, as_of)


def heads_sql(as_of: int | None, filter_values: bool = True) -> str:
    """`states_sql` for the `StateHead` columns only: no payload, so none is detoasted.

    Without `filter_values` they are selected as NULL (`UNREAD`).
    """
    return _state_rows_sql(_HEAD_SELECT if filter_values else _HEAD_SELECT_WITHOUT_VALUES, as_of)


# Whole states of exact (element, version) pairs, with the newest state's clearance now.
VERSIONS = f"""
WITH keys AS (
    SELECT DISTINCT eid, ver FROM unnest(%(eids)s::text[], %(vers)s::int[]) AS k(eid, ver))
SELECT {_STATE_SELECT}, {column_list(LATEST_COLUMNS, "l")}
FROM keys
JOIN states s ON s.element_id = keys.eid AND s.version = keys.ver
JOIN states l ON l.element_id = keys.eid AND l.valid_to = {OPEN}
"""  # noqa: S608 - fixed fragments only


def _state_rows_sql(columns: str, as_of: int | None) -> str:
    """`columns` of each id's state as of `%(as_of)s`, then its newest sensitivity and scope.

    A current state is the newest, so it needs no second row.
    """
    if as_of is None:
        latest, join, validity = column_list(LATEST_COLUMNS, "s"), "", f"s.valid_to = {OPEN}"
    else:
        latest = column_list(LATEST_COLUMNS, "l")
        join = f"JOIN states l ON l.element_id = ids.id AND l.valid_to = {OPEN}"
        validity = "s.hlc <= %(as_of)s AND s.valid_to > %(as_of)s"
    return f"""
SELECT {columns}, {latest}
FROM (SELECT DISTINCT id FROM unnest(%(ids)s::text[]) AS ids(id)) AS ids
JOIN states s ON s.element_id = ids.id
{join}
WHERE {validity}
"""  # noqa: S608 - fixed fragments only


LIVE_EDGES = f"""
SELECT source_id, relation, target_id, valid_from, valid_to FROM edges
WHERE valid_to = {OPEN} AND (source_id = ANY(%(ids)s::text[]) OR target_id = ANY(%(ids)s::text[]))
"""  # noqa: S608 - fixed fragments only
_LOAD_CHUNKS = """
WITH keys AS (
    SELECT DISTINCT eid, ver FROM unnest(%(eids)s::text[], %(vers)s::int[]) AS k(eid, ver))
SELECT {columns}
FROM keys
JOIN chunks c ON c.element_id = keys.eid AND c.version = keys.ver
JOIN states s ON s.element_id = c.element_id AND s.version = c.version
ORDER BY c.element_id COLLATE "C", c.version, c.idx
"""
CHUNK_TEXTS = """
WITH keys AS (
    SELECT DISTINCT eid, ver, cid
    FROM unnest(%(eids)s::text[], %(vers)s::int[], %(cids)s::text[]) AS k(eid, ver, cid))
SELECT c.chunk_id, c.text
FROM keys JOIN chunks c
  ON c.element_id = keys.eid AND c.version = keys.ver AND c.chunk_id = keys.cid
"""
LOAD_CHUNKS = _LOAD_CHUNKS.format(columns=column_list(LOADED_CHUNK_COLUMNS))
LOAD_CHUNKS_WITHOUT_EMBEDDING = _LOAD_CHUNKS.format(
    columns=column_list(LOADED_CHUNK_COLUMNS_WITHOUT_EMBEDDING)
)
LOAD_EDGES = """
WITH keys AS (
    SELECT DISTINCT s, r, t FROM unnest(%(s)s::text[], %(r)s::text[], %(t)s::text[]) AS k(s, r, t))
SELECT e.source_id, e.relation, e.target_id, e.valid_from, e.valid_to
FROM keys JOIN edges e ON e.source_id = keys.s AND e.relation = keys.r AND e.target_id = keys.t
"""
COUNTS = f"""
SELECT (SELECT count(*) FROM states),
       (SELECT count(*) FROM states WHERE valid_to = {OPEN} AND NOT tombstone),
       (SELECT count(*) FROM chunks),
       (SELECT count(*) FROM edges WHERE valid_to = {OPEN}),
       (SELECT count(*) FROM outbox)
"""  # noqa: S608 - fixed fragments only
EXPECTED_CHUNKS = """
SELECT c.chunk_id, s.valid_to FROM chunks c
JOIN states s ON s.element_id = c.element_id AND s.version = c.version
"""
EXPECTED_EDGES = "SELECT source_id, relation, target_id, valid_from, valid_to FROM edges"
LIVE_ELEMENT_IDS = f"""
SELECT element_id FROM states
WHERE valid_to = {OPEN} AND NOT tombstone AND starts_with(element_id, %(prefix)s)
ORDER BY element_id COLLATE "C"
"""  # noqa: S608 - fixed fragments only
LATEST_VERSIONS = "SELECT element_id, max(version) FROM states GROUP BY element_id"
PENDING_COUNTS = "SELECT store, count(*) FROM outbox GROUP BY store"
