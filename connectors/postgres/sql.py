"""SQL of the PostgreSQL connector: schema, fixed statements, and the pushdown filter.

Only fixed fragments are formatted into SQL (table aliases chosen here, `OPEN`, the vector
dimension after validation as an int); every id, value, field name and query text is a
named parameter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from connectors.contract.characters import forbidden_character
from connectors.contract.filter_tree import AllOf, AnyOf, FilterNode, Not, RelationPredicate
from connectors.contract.patterns import LikeToken, folded_tokens, like_tokens, multi_folds
from connectors.contract.predicates import Op, Predicate, Scalar
from connectors.contract.records import OPEN, SearchFilter
from connectors.contract.system_of_record import (
    CHUNK_COLUMNS,
    CLEARANCE_COLUMNS,
    LATEST_COLUMNS,
    LOADED_CHUNK_COLUMNS,
    STATE_COLUMNS,
    column_list,
    conflict_update,
    insert_sql,
)
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
-- Current-state lookups, covering what clearance reads: a search checks the clearance of
-- every node its expansion reached without reading those rows (index-only once vacuumed).
CREATE INDEX IF NOT EXISTS states_clearance ON states (element_id)
    INCLUDE (version, sensitivity_rank, scope, tombstone) WHERE valid_to = {OPEN};
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
    if search_filter.tree is not None:
        clauses.append(tree_sql(search_filter.tree, f"{t}.filter_values", params, "f_t"))
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


# -- filter trees ----------------------------------------------------------------------------
# As in connectors/sql_filters.py for SQLite: each leaf is compiled for the polarity it sits in,
# exact where PostgreSQL can decide it, else "true" in positive and "false" in negative
# position (a sound relaxation); every leaf is true or false, never NULL, so `NOT` is exact.
# Values are read from the JSONB by `jsonb_typeof` (which tells `true` from `1` and a JSON
# null from a missing field). Strings compare by code point (`COLLATE "C"` on UTF-8). Text
# PostgreSQL cannot hold (`storable`) is in no stored row (writes refuse it), so a field with
# such a name is missing everywhere, such a string equals nothing, a pattern needing such a
# character matches nothing, and a bound holding one compares as an equivalent bound without
# it: all exact. One thing is relaxed: numbers of magnitude 2**53 and more, compared with a
# bound that large. JSONB keeps a float as its shortest decimal (`1.152921504606847e+18` for
# 2.0**60), which is not its exact value and is indistinguishable from an integer, so such
# rows are relaxed for such bounds.

_EXACT_BELOW = 2**53  # every float of smaller magnitude compares with integers exactly


class _Names:
    """Named parameters `%(<prefix><n>)s` added to the caller's dict."""

    def __init__(self, params: dict[str, Any], prefix: str) -> None:
        self.params = params
        self.prefix = prefix
        self.count = 0

    def add(self, value: Any, cast: str = "") -> str:
        while f"{self.prefix}{self.count}" in self.params:
            self.count += 1
        name = f"{self.prefix}{self.count}"
        self.params[name] = value
        return f"%({name})s{cast}"


def tree_sql(node: FilterNode, column: str, params: dict[str, Any], prefix: str) -> str:
    """A condition on the JSONB object in `column` with `evaluate`'s semantics.

    Adds its named parameters (`<prefix>0`, `<prefix>1`, ...) to `params`. `column` is a fixed
    SQL expression chosen by the caller (`"t.filter_values"`), never user input; every field
    name, value and pattern is a parameter. Exact where PostgreSQL can decide the tree (see
    above), a sound relaxation elsewhere; a relation leaf reads neighbours, which the row does
    not hold, and is relaxed too (compile `own_values_bound` of a tree to leave them out).
    """
    return _tree(node, column, _Names(params, prefix), positive=True)


def _tree(node: FilterNode, column: str, names: _Names, *, positive: bool) -> str:
    match node:
        case Predicate():
            return _leaf(node, column, names, positive=positive)
        case RelationPredicate():
            return "true" if positive else "false"
        case AllOf() | AnyOf():
            if not node.children:
                return "true" if isinstance(node, AllOf) else "false"
            glue = " AND " if isinstance(node, AllOf) else " OR "
            inner = [_tree(c, column, names, positive=positive) for c in node.children]
            return "(" + glue.join(inner) + ")"
        case Not():
            return f"(NOT {_tree(node.child, column, names, positive=not positive)})"


def _leaf(predicate: Predicate, column: str, names: _Names, *, positive: bool) -> str:
    """One predicate: exact, or true in positive and false in negative place."""
    unknown = "true" if positive else "false"
    op, value = predicate.op, predicate.value
    if op in (Op.NE, Op.NIN):  # exactly the negations of $eq and $in
        inner = Predicate(field=predicate.field, op=Op.EQ if op is Op.NE else Op.IN, value=value)
        return f"(NOT {_leaf(inner, column, names, positive=not positive)})"
    if not storable(predicate.field):  # no stored row has such a field
        return "true" if predicate.matches({}) else "false"
    value_sql = f"({column} -> {names.add(predicate.field)})"
    kind = f"jsonb_typeof({value_sql})"
    as_text = f"(CASE {kind} WHEN 'string' THEN {value_sql} #>> '{{}}' END) COLLATE \"C\""
    if op is Op.EXISTS:  # Python's `present == value`
        if value == True:  # noqa: E712 - equality, as Predicate.matches compares
            return f"({value_sql} IS NOT NULL)"
        return f"({value_sql} IS NULL)" if value == False else "false"  # noqa: E712
    if op is Op.EQ or op is Op.IN:
        if isinstance(value, tuple) != (op is Op.IN):
            return unknown  # `$in` over a string is a substring test; `$eq` to a tuple
        values = value if isinstance(value, tuple) else (value,)
        return _pg_one_of(values, value_sql, kind, as_text, names, unknown)
    if op in _ORDERED or op is Op.BETWEEN:
        if op is Op.BETWEEN:
            if not (isinstance(value, tuple) and len(value) == 2):
                return unknown
            bounds = ((">=", value[0]), ("<=", value[1]))
        elif isinstance(value, tuple):
            return unknown
        else:
            bounds = ((_ORDERED[op], value),)
        return _pg_ordered(bounds, value_sql, kind, as_text, names, unknown)
    if op is Op.LIKE or op is Op.ILIKE:
        if not isinstance(value, str):
            return "false"  # a pattern that is not a string matches nothing
        return _pg_pattern(value, as_text, names, fold=op is Op.ILIKE)
    return unknown


def _as_number(value_sql: str, kind: str, *, booleans: bool) -> str:
    boolean = f" WHEN 'boolean' THEN ({value_sql})::boolean::int::numeric" if booleans else ""
    return f"(CASE {kind} WHEN 'number' THEN ({value_sql})::numeric{boolean} END)"


def _big_guard(
    number: str, condition: str, unknown: str, bounds: Sequence[int | float | bool]
) -> str:
    """`condition`, relaxed on rows whose number is too large to compare exactly (see above)."""
    if all(abs(b) < _EXACT_BELOW or (isinstance(b, float) and math.isinf(b)) for b in bounds):
        return condition
    return f"(CASE WHEN abs({number}) >= {_EXACT_BELOW} THEN {unknown} ELSE {condition} END)"


def _pg_one_of(
    values: tuple[Scalar, ...], value_sql: str, kind: str, as_text: str, names: _Names, unknown: str
) -> str:
    """Equal to one of `values`: strings to strings, numbers and booleans to numbers."""
    strings = [v for v in values if isinstance(v, str) and storable(v)]
    numbers = [v for v in values if not isinstance(v, str) and not math.isnan(v)]
    parts: list[str] = []
    if strings:
        parts.append(f"COALESCE({as_text} = ANY({names.add(strings, '::text[]')}), false)")
    if numbers:
        number = _as_number(value_sql, kind, booleans=True)
        array = names.add([_decimal(n) for n in numbers], "::numeric[]")
        exact = f"COALESCE({number} = ANY({array}), false)"
        parts.append(_big_guard(number, exact, unknown, numbers))
    if not parts:
        return "false"
    return parts[0] if len(parts) == 1 else f"({parts[0]} OR {parts[1]})"


def _pg_ordered(
    bounds: tuple[tuple[str, Scalar], ...],
    value_sql: str,
    kind: str,
    as_text: str,
    names: _Names,
    unknown: str,
) -> str:
    """`value op bound` for every bound, with Python's rule on what compares.

    Strings with strings, numbers with numbers (a stored boolean never, a NaN bound never).
    The first bound decides, as in `Predicate.matches`; a later bound of the other kind would
    make the reference raise and is compiled as false.
    """
    textual = isinstance(bounds[0][1], str)
    number = _as_number(value_sql, kind, booleans=False)
    conditions: list[str] = []
    for operator, bound in bounds:
        if isinstance(bound, str) != textual:
            return "false"
        if isinstance(bound, str):
            operator, bound = _storable_bound(operator, bound)
            conditions.append(f"{as_text} {operator} {names.add(bound, '::text')}")
        elif math.isnan(bound):
            return "false"
        else:
            conditions.append(f"{number} {operator} {names.add(_decimal(bound), '::numeric')}")
    exact = f"COALESCE({' AND '.join(conditions)}, false)"
    if textual:
        return exact
    return _big_guard(number, exact, unknown, [b for _, b in bounds if not isinstance(b, str)])


def _storable_bound(operator: str, bound: str) -> tuple[str, str]:
    """A comparison with a bound PostgreSQL cannot hold, as one with a bound it can.

    Stored strings hold no NUL and no lone surrogate, so against them a bound cut before its
    first such character compares the same: `x < p + NUL + ...` is `x <= p` (nothing lies
    between), and `x < p + surrogate + ...` is `x < p + U+E000` (surrogates sit just below).
    """
    cut = next((n for n, c in enumerate(bound) if not storable(c)), None)
    if cut is None:
        return operator, bound
    prefix = bound[:cut]
    below = operator in ("<", "<=")
    if bound[cut] == "\x00":
        return ("<=" if below else ">"), prefix
    return ("<" if below else ">="), prefix + "\ue000"


def _pg_pattern(pattern: str, as_text: str, names: _Names, *, fold: bool) -> str:
    """`$like` as LIKE (literals escaped), `$ilike` as an anchored regular expression.

    In the expression each literal of the folded pattern is the class of characters folding
    to it, matched against the string with its multi-character folds (`ß` -> `ss`) expanded.
    """
    tokens = folded_tokens(pattern) if fold else like_tokens(pattern)
    if any(not storable(c) for token in tokens for c in token.chars):
        return "false"  # a character the string must hold, and no stored string holds
    if not fold:
        like = "".join(
            "%" if t.kind == "run" else "_" if t.kind == "one" else _like_literal(t.chars[0])
            for t in tokens
        )
        return f"COALESCE({as_text} LIKE {names.add(like, '::text')}, false)"
    regex = names.add("^" + "".join(_regex(t) for t in tokens) + "$", "::text")
    multi = names.add(_regex(LikeToken("char", tuple(multi_folds()))), "::text")
    return (
        f"COALESCE(CASE WHEN {as_text} ~ {multi} THEN {_pg_expanded(as_text)} ~ {regex} "
        f"ELSE {as_text} ~ {regex} END, false)"
    )


def _like_literal(char: str) -> str:
    return "\\" + char if char in "\\%_" else char


def _regex(token: LikeToken) -> str:
    """A token as a regular expression; every literal as a hexadecimal escape."""
    if token.kind == "run":
        return ".*"
    if token.kind == "one":
        return "."
    escaped = "".join(
        f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}" for c in token.chars
    )
    return escaped if len(token.chars) == 1 else f"[{escaped}]"


def _pg_expanded(text: str) -> str:
    """`text` with every multi-character fold expanded (fixed SQL: code points only)."""
    expression = text
    for char, folded in multi_folds().items():
        expression = f"replace({expression}, {_chr_sql(char)}, {_chr_sql(folded)})"
    return f'({expression}) COLLATE "C"'


def _chr_sql(text: str) -> str:
    return " || ".join(f"chr({ord(c)})" for c in text)


def _decimal(value: int | float | bool) -> Decimal:
    """A number as the JSON text Python wrote for it (`repr`), so comparisons are exact."""
    return Decimal(int(value)) if isinstance(value, bool | int) else Decimal(repr(value))


def storable(text: str) -> bool:
    """Whether PostgreSQL's `text` can hold this string (no NUL, no lone surrogate)."""
    return forbidden_character(text) is None
