"""Which aggregates the one statement in the system of record counts, and which Python does.

THE visibility rule on current states and the SQL that restates it on raw rows, the covering
index a count by month reads alone, leaves the statement cannot decide exactly (relaxed, or
rows holding NUL) and `as_of` — counted in Python — and the benchmark target that judges a
count by month at 100k. The corpus is aggregate_fixtures.py's; see test_aggregates.py.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aggregate_fixtures import CLEARANCES, ELEMENTS, LEVELS, RELATIONS, START, _rel
from hypothesis import given
from hypothesis import strategies as st
from test_paging import visible

import uda
from connectors.contract.aggregation import StateAggregation, TimeBucket
from connectors.contract.filter_tree import AllOf, Not
from connectors.contract.predicates import Op, Predicate
from connectors.contract.records import OPEN
from connectors.contract.system_of_record import StateHead
from ontology import Document, Repository
from uda.embedding import Embedder
from uda.query.aggregates import aggregate_request
from uda.query.auto.choice import choose
from uda.query.clearance import Clearance, state_visible
from uda.query.filters import parse_filters
from uda.write import validation


# -- counted in Python as it was -------------------------------------------------------------
def test_as_of_is_counted_in_python_as_it_was(tmp_path: Path, embedder: Embedder) -> None:
    with uda.connect(path=tmp_path / "uda", embedder=embedder) as client:
        client.ingest(ELEMENTS, RELATIONS)
        fields: dict[str, Any] = {"group_by": ["element_type"], "temporal": ("timestamp", "month")}
        before = client.aggregate(clearance_scope=["internal"], **fields)
        then = datetime.now(UTC)
        moved = [
            # New text too: an unchanged text is not written again (content hash).
            e.model_copy(update={"timestamp": e.timestamp + timedelta(days=400), "text": "Moved."})
            for e in ELEMENTS
            if isinstance(e, Document)
        ]
        client.ingest(moved)
        now = client.aggregate(clearance_scope=["internal"], **fields)
        assert now.rows != before.rows
        again = client.aggregate(clearance_scope=["internal"], as_of=then, **fields)
        assert again.path == "python"
        assert again.rows == before.rows


# -- THE rule on current states, and the SQL that restates it ------------------------------------
_SCOPES = st.one_of(st.none(), st.sampled_from(["project:alpha", "project:beta"]))


@given(
    rank=st.integers(min_value=-2, max_value=5),
    scope=_SCOPES,
    tombstone=st.booleans(),
    level=st.sampled_from(LEVELS),
    projects=st.sets(st.sampled_from(["project:alpha", "project:beta", "project:*"])),
)
def test_the_visibility_rule_is_one_check_on_a_current_state(
    rank: int, scope: str | None, tombstone: bool, level: str, projects: set[str]
) -> None:
    """A current state is its element's newest: THE rule is then what the statement checks."""
    clearance = Clearance.parse([level, *projects])
    state = StateHead(
        element_id="x",
        version=1,
        hlc=1,
        element_type="Document",
        name="x",
        timestamp_ms=0,
        filter_values={},
        sensitivity_rank=rank,
        scope=scope,
        tombstone=tombstone,
        latest_sensitivity_rank=rank,
        latest_scope=scope,
    )
    statement = (
        not tombstone
        and 0 <= rank <= clearance.level.rank
        and (scope is None or clearance.all_projects or scope in clearance.projects)
    )
    assert state_visible(clearance, state) == statement


def test_the_statement_restates_the_rule_on_raw_rows(tmp_path: Path) -> None:
    """Rows no ingest writes (a rank off the scale, a stale row) are counted as THE rule says."""
    from connectors.sqlite.aggregation import aggregate_sql
    from connectors.sqlite.schema import SCHEMA

    db = sqlite3.connect(tmp_path / "s.db")
    db.executescript(SCHEMA)
    rows = [
        ("a", 1, OPEN, 0, None, 0),  # visible
        ("b", 1, OPEN, -1, None, 0),  # a rank off the scale: hidden, as `allows_rank` says
        ("c", 1, OPEN, 0, "project:beta", 0),  # another project
        ("d", 1, OPEN, 0, None, 1),  # a tombstone
        ("e", 1, 4, 0, None, 0),  # an old version ...
        ("e", 2, OPEN, 3, None, 0),  # ... whose newest is restricted: hidden with its history
        ("f", 1, OPEN, 1, "project:alpha", 0),  # visible
    ]
    for eid, version, valid_to, rank, scope, tomb in rows:
        fv = json.dumps({"element_type": "Document", "name": eid})
        db.execute(
            "INSERT INTO states VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (eid, version, version, valid_to, "Document", eid, rank, scope, 0, tomb, "", "{}", fv),
        )
    sql, params = aggregate_sql(
        StateAggregation(
            max_sensitivity_rank=1,
            projects=("project:alpha",),
            all_projects=False,
            element_types=("Document",),
            tree=AllOf(children=()),
        )
    )
    (row,) = db.execute(sql, params).fetchall()
    assert row[1] == 2  # "a" and "f"
    plan = " ".join(str(r) for r in db.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall())
    assert "COVERING INDEX states_aggregate" in plan


def test_count_by_month_reads_only_the_covering_index_and_structured_pages_do_not(
    tmp_path: Path,
) -> None:
    from connectors.contract.selection import StateOrder, StateSelection
    from connectors.sqlite.aggregation import aggregate_sql
    from connectors.sqlite.schema import SCHEMA
    from connectors.sqlite.selection import select_sql
    from uda.config import SearchDefaults
    from uda.query.contracts import SearchRequest
    from uda.query.plan import make_plan

    db = sqlite3.connect(tmp_path / "s.db")
    db.executescript(SCHEMA)
    for clearance in CLEARANCES:
        plan = make_plan(
            SearchRequest(order_by="-timestamp", clearance_scope=clearance),
            SearchDefaults(),
            vector=(),
            text=(),
            graph=(),
            system_of_record="sqlite",
            auto=choose(None),
        )
        compiled = aggregate_sql(
            StateAggregation(
                max_sensitivity_rank=plan.pushdown.max_sensitivity_rank,
                projects=plan.pushdown.projects,
                all_projects=plan.pushdown.all_projects,
                element_types=plan.element_types,
                tree=AllOf(children=()),
                temporal=TimeBucket(field="timestamp", unit="month"),
            )
        )
        assert compiled is not None
        explained = str(db.execute("EXPLAIN QUERY PLAN " + compiled[0], compiled[1]).fetchall())
        assert "COVERING INDEX states_aggregate" in explained
        sql, params = select_sql(
            StateSelection(
                search_filter=plan.pushdown,
                order=plan.order or StateOrder(field="element_id", kind="text"),
                limit=20,
            )
        )
        assert "states_aggregate" not in str(
            db.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
        )


def test_a_relaxed_leaf_is_never_pushed_down() -> None:
    from connectors.postgres.aggregation import aggregate_sql as postgres_sql
    from connectors.sqlite.aggregation import aggregate_sql as sqlite_sql
    from connectors.sqlite.aggregation import exact_leaf

    def asked(tree: Any) -> StateAggregation:
        return StateAggregation(
            max_sensitivity_rank=3,
            projects=(),
            all_projects=True,
            element_types=("Document",),
            tree=tree,
        )

    # `$in` over a string (no grammar builds it): `tree_sql` relaxes it on both backends.
    odd = Predicate(field="name", op=Op.IN, value="abc")
    assert exact_leaf(odd, "t.filter_values") is None
    assert sqlite_sql(asked(Not(child=odd))) is None
    assert postgres_sql(asked(Not(child=odd))) is None
    # PostgreSQL relaxes numbers of 2**53 and more; SQLite compares them exactly.
    big = parse_filters({"confidence": {"$lt": 2**60}})
    assert postgres_sql(asked(big)) is None
    assert sqlite_sql(asked(big)) is not None
    # A string comparison is exact but for rows holding NUL: there it is NULL, not relaxed.
    compiled = exact_leaf(Predicate(field="name", op=Op.EQ, value="x"), "t.filter_values")
    assert compiled is not None
    assert compiled[1]


def test_rows_holding_nul_are_counted_in_python(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ingest refuses NUL now (connectors/contract/characters.py); a store written before that
    # rule may still hold it, and must still be counted right.
    monkeypatch.setattr(validation, "forbidden_character", lambda text: None)
    with uda.connect(path=tmp_path / "uda", embedder=embedder) as client:
        client.ingest(ELEMENTS, RELATIONS)
        client.ingest(
            [
                Document(
                    element_id="doc:nul",
                    name="Note 1\x00 cut",
                    text="A note with a NUL.",
                    sensitivity="public",
                    timestamp=START,
                )
            ]
        )
        tree = {"name": {"$like": "Note 1%"}}
        got = client.aggregate(clearance_scope=["public"], context_filters=tree)
        reference = client.run_aggregate(aggregate_request(None, ["public"], tree), pushdown=False)
        assert got.path == "python"  # the statement could not decide the NUL row
        assert got.rows == reference.rows
        expected = [
            e
            for e in [*ELEMENTS]
            if type(e).knowledge_asset and visible(e, ["public"]) and e.name.startswith("Note 1")
        ]
        assert got.matched == len(expected) + 1
        # A neighbour holding NUL: the relation leaf is undecided for its elements only.
        client.ingest(
            [
                Repository(element_id="repo:nul", name="pay\x00ments", sensitivity="public"),
                Document(
                    element_id="doc:in-nul",
                    name="In a NUL repository",
                    text="Inside.",
                    sensitivity="public",
                    timestamp=START,
                ),
            ],
            [_rel("doc:in-nul", "partOf", "repo:nul")],
        )
        for related in ({"partOf.name": {"$like": "pay%"}}, {"$not": {"partOf.name": "pay"}}):
            fast = client.aggregate(clearance_scope=["public"], context_filters=related)
            slow = client.run_aggregate(
                aggregate_request(None, ["public"], related), pushdown=False
            )
            assert fast.path == "python", related
            assert fast.rows == slow.rows
        # Without a string comparison the statement needs no row's strings: still pushed down.
        assert (
            client.aggregate(clearance_scope=["public"], temporal=("timestamp", "year")).path
            == "pushdown"
        )


# -- the benchmark target -------------------------------------------------------------------
def test_the_benchmark_target_judges_a_count_by_month_at_100k() -> None:
    from benchmarks.targets import evaluate_targets

    def row(size: int, p50: float) -> dict[str, Any]:
        return {
            "suite": "structured",
            "dataset": "synthetic",
            "system": "uda",
            "method": "aggregate: count by month",
            "profile": "embedded",
            "metrics": {"wall_p50_ms": p50},
            "params": {"size": size},
        }

    small = {
        t.id: t for t in evaluate_targets({"structured": {"rows": [row(10_000, 5.0)]}}, "quick")
    }
    assert small["aggregate_month_p50_100k_embedded"].met is None  # judged at 100k only
    rows = [row(10_000, 5.0), row(100_000, 120.0)]
    big = {t.id: t for t in evaluate_targets({"structured": {"rows": rows}}, "full")}
    assert big["aggregate_month_p50_100k_embedded"].met is False
    assert big["aggregate_month_p50_100k_embedded"].figure == 120.0
