"""SQL of the PostgreSQL connector: schema, fixed statements, and the pushdown filter.

Only fixed fragments are formatted into SQL (table aliases chosen here, `OPEN`, the vector
dimension after validation as an int); every id, value, field name and query text is a
named parameter.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from connectors.contract.predicates import Op, Predicate
from connectors.contract.records import OPEN, SearchFilter
from connectors.contract.system_of_record import (
    CHUNK_COLUMNS,
    CLEARANCE_COLUMNS,
    DERIVED_CHUNK_COLUMNS,
    LATEST_COLUMNS,
    LOADED_CHUNK_COLUMNS,
    STATE_COLUMNS,
    column_list,
    insert_sql,
)


def schema(dimension: int) -> str:
    """The tables and indexes, created if missing (run with `search_path` = our schema)."""
    dim = int(dimension)
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
);
-- Current-state lookups, covering what clearance reads: a search checks the clearance of
-- every node its expansion reached without reading those rows (index-only once vacuumed).
CREATE INDEX IF NOT EXISTS states_clearance ON states (element_id)
    INCLUDE (version, sensitivity_rank, scope, tombstone) WHERE valid_to = {OPEN};
DROP INDEX IF EXISTS states_current;
CREATE TABLE IF NOT EXISTS chunks (
    chunk_id text PRIMARY KEY,
    element_id text NOT NULL,
    version integer NOT NULL,
    idx integer NOT NULL,
    text text NOT NULL,
    embedding vector
);
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

CREATE TABLE IF NOT EXISTS vector_chunks (
    chunk_id text PRIMARY KEY,
    element_id text NOT NULL,
    version integer NOT NULL,
    element_type text NOT NULL,
    sensitivity_rank integer NOT NULL,
    scope text,
    valid_from bigint NOT NULL,
    valid_to bigint NOT NULL,
    filter_values jsonb NOT NULL,
    text text NOT NULL,
    embedding vector({dim}) NOT NULL
);
CREATE INDEX IF NOT EXISTS vector_chunks_element ON vector_chunks (element_id);
CREATE INDEX IF NOT EXISTS vector_chunks_valid ON vector_chunks (valid_to, sensitivity_rank);
CREATE INDEX IF NOT EXISTS vector_chunks_hnsw ON vector_chunks
    USING hnsw (embedding vector_cosine_ops);

CREATE TABLE IF NOT EXISTS text_chunks (
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


def conflict_update(key: str, columns: Sequence[str]) -> str:
    """`ON CONFLICT (key)`: every other of `columns` takes the value just inserted."""
    updates = ", ".join(f"{column} = excluded.{column}" for column in columns if column != key)
    return f"ON CONFLICT ({key}) DO UPDATE SET {updates}"


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
_CLEARANCE_SELECT = column_list(CLEARANCE_COLUMNS, "s")


def states_sql(as_of: int | None) -> str:
    """Each id's state as of `%(as_of)s` (or the current one), with its newest state's clearance.

    Payload and filter values come as JSON text, for `LazyJSON`: a search fetches hundreds of
    states and hydrates a few.
    """
    return _state_rows_sql(_STATE_SELECT, as_of)


def clearances_sql(as_of: int | None) -> str:
    """`states_sql` for the `StateClearance` columns only (no payload)."""
    return _state_rows_sql(_CLEARANCE_SELECT, as_of)


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
LOAD_CHUNKS = f"""
WITH keys AS (
    SELECT DISTINCT eid, ver FROM unnest(%(eids)s::text[], %(vers)s::int[]) AS k(eid, ver))
SELECT {column_list(LOADED_CHUNK_COLUMNS)}
FROM keys
JOIN chunks c ON c.element_id = keys.eid AND c.version = keys.ver
JOIN states s ON s.element_id = c.element_id AND s.version = c.version
ORDER BY c.element_id COLLATE "C", c.version, c.idx
"""  # noqa: S608 - fixed fragments only
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

# -- vector store ----------------------------------------------------------------------
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


# -- the pushdown filter ---------------------------------------------------------------
_ORDERED = {Op.GT: ">", Op.GTE: ">=", Op.LT: "<", Op.LTE: "<="}


def compile_filter(search_filter: SearchFilter, *, table: str) -> tuple[str, dict[str, Any]]:
    """A WHERE condition over `table`'s chunk columns, and its named parameters.

    Mirrors `SearchFilter.allows_chunk` on the `filter_values` JSONB. `table` is a fixed alias
    chosen by the caller, never user input; parameter names are generated here (`f_*`).
    Text that PostgreSQL cannot hold (a NUL character, a lone surrogate) can match no stored
    row: such project and type names are dropped from their lists, and a predicate with one is
    not pushed down (phase 3 checks it anyway; a pushdown may be looser, never stricter).
    """
    t = table
    params: dict[str, Any] = {"f_rank": search_filter.max_sensitivity_rank}
    clauses = [f"{t}.sensitivity_rank <= %(f_rank)s"]
    if not search_filter.all_projects:
        clauses.append(f"({t}.scope IS NULL OR {t}.scope = ANY(%(f_projects)s::text[]))")
        params["f_projects"] = [p for p in search_filter.projects if storable(p)]
    if search_filter.as_of is None:
        clauses.append(f"{t}.valid_to = {OPEN}")
    else:
        clauses.append(f"{t}.valid_from <= %(f_as_of)s AND {t}.valid_to > %(f_as_of)s")
        params["f_as_of"] = search_filter.as_of
    if search_filter.element_types is not None:
        clauses.append(f"{t}.element_type = ANY(%(f_types)s::text[])")
        params["f_types"] = [e for e in search_filter.element_types if storable(e)]
    for n, predicate in enumerate(search_filter.predicates):
        clause = _predicate_sql(predicate, f"{t}.filter_values", f"f_p{n}", params)
        if clause:
            clauses.append(clause)
    return " AND ".join(clauses), params


def _predicate_sql(predicate: Predicate, column: str, name: str, params: dict[str, Any]) -> str:
    """One predicate as SQL with Python's comparison semantics (`Predicate.matches`).

    Numbers and booleans compare as numbers (`True == 1` in Python), strings as strings by
    code point (`COLLATE "C"` on UTF-8); a value of the other kind never matches.
    """
    values = predicate.value if isinstance(predicate.value, tuple) else (predicate.value,)
    if not storable(predicate.field) or not all(storable(v) for v in values if isinstance(v, str)):
        return ""
    params[f"{name}_field"] = predicate.field
    value = f"{column} -> %({name}_field)s"
    as_number = (
        f"(CASE jsonb_typeof({value}) WHEN 'number' THEN ({value})::numeric "
        f"WHEN 'boolean' THEN ({value})::boolean::int::numeric END)"
    )
    as_text = f"(CASE jsonb_typeof({value}) WHEN 'string' THEN {value} #>> '{{}}' END)"
    if predicate.op in (Op.EQ, Op.IN):
        strings = [v for v in values if isinstance(v, str)]
        numbers = [_decimal(v) for v in values if not isinstance(v, str)]
        parts: list[str] = []
        if strings:
            params[f"{name}_s"] = strings
            parts.append(f'{as_text} COLLATE "C" = ANY(%({name}_s)s::text[])')
        if numbers:
            params[f"{name}_n"] = numbers
            parts.append(f"{as_number} = ANY(%({name}_n)s::numeric[])")
        return "(" + " OR ".join(parts) + ")" if parts else ""
    if predicate.op in _ORDERED:
        bound = values[0]
        operator = _ORDERED[predicate.op]
        if isinstance(bound, str):
            params[f"{name}_v"] = bound
            return f'{as_text} COLLATE "C" {operator} %({name}_v)s::text'
        params[f"{name}_v"] = _decimal(bound)
        # Python's ordered comparison rejects booleans on the stored side.
        return (
            f"(jsonb_typeof({value}) = 'number' AND ({value})::numeric {operator} "
            f"%({name}_v)s::numeric)"
        )
    return ""  # negative operators are not pushed down (uda.query.filters.PUSHDOWN_OPS)


def _decimal(value: int | float | bool) -> Decimal:
    """A number as the JSON text Python wrote for it (`repr`), so comparisons are exact."""
    return Decimal(int(value)) if isinstance(value, bool | int) else Decimal(repr(value))


def storable(text: str) -> bool:
    """Whether PostgreSQL's `text` can hold this string (no NUL, no lone surrogate)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
