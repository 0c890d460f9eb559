"""Aggregates (`client.aggregate`), embedded and server: counts of what the caller may see.

Every expected answer here is computed from the corpus itself — who may see what (the rule
restated in test_paging.visible), which neighbours an element has, which period a moment
falls in — never from the engine. Both ways of counting are held to it: the one statement in
the system of record (`path == "pushdown"`, asserted wherever it must be taken, so that a
silent fallback cannot pass for it) and the Python reference (`pushdown=False`).

This module: counts by fields and by neighbours at every clearance, under filter trees, with
hidden, deleted and reclassified elements, over a query's top results, and the one statement
against the Python reference. The corpus, the reference and the stores are in
aggregate_fixtures.py; time buckets and metrics in test_aggregates_time_and_metrics.py; the
statement itself and what Python counts instead in test_aggregates_pushdown.py; bad input in
test_aggregates_bad_input.py; the CLI, HTTP, agent and MCP in test_aggregates_surfaces.py.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from aggregate_fixtures import (
    CLEARANCES,
    CURRENT,
    DELETED,
    ELEMENTS,
    RECLASSIFIED,
    RELATIONS,
    ProfileFactory,
    both,
    expected_groups,
    got_counts,
    matches,
    neighbours,
    profiles,
    servers,
    store,
)

import uda
from ontology import Decision, Document, Element
from uda.embedding import Embedder
from uda.errors import InvalidRequestError
from uda.query.clearance import Clearance

# The fixtures; and the corpus, which test_aggregates_surfaces.py imports from this module.
__all__ = ["ELEMENTS", "RELATIONS", "profiles", "servers", "store"]


# -- counts at every clearance --------------------------------------------------------------
GROUPINGS: list[list[str]] = [
    [],
    ["element_type"],
    ["status"],
    ["partOf.name"],
    ["governedBy.status"],
    ["~governedBy.name"],
    ["element_type", "partOf.name"],
    ["partOf.name", "governedBy.name"],
]


@pytest.mark.parametrize("group_by", GROUPINGS, ids=["+".join(g) or "all" for g in GROUPINGS])
def test_counts_equal_a_brute_force_count_at_every_clearance(
    store: uda.Client, group_by: list[str]
) -> None:
    for clearance in CLEARANCES:
        got = both(store, clearance, group_by=group_by)
        assert got.path == "pushdown"
        expected = {k: len(v) for k, v in expected_groups(clearance, group_by).items()}
        assert got_counts(got, group_by) == expected, clearance
        assert got.matched == len(matches(clearance))
        assert got.clearance == Clearance.parse(clearance).entries()


def test_counts_under_filter_trees_with_relation_paths(store: uda.Client) -> None:
    filters: list[tuple[dict[str, Any], Callable[[Element, list[str]], bool]]] = [
        (
            {"partOf.name": "payments"},
            lambda e, c: "payments" in neighbours(e.element_id, "partOf.name", c),
        ),
        (
            {"$not": {"partOf.name": "operations"}},
            lambda e, c: "operations" not in neighbours(e.element_id, "partOf.name", c),
        ),
        (
            {"$or": [{"status": "accepted"}, {"governedBy.status": {"$in": ["accepted"]}}]},
            lambda e, c: (
                getattr(e, "status", None) == "accepted"
                or "accepted" in neighbours(e.element_id, "governedBy.status", c)
            ),
        ),
        (
            {"name": {"$ilike": "note 1%"}, "element_type": {"$ne": "Decision"}},
            lambda e, c: e.name.lower().startswith("note 1") and type(e) is not Decision,
        ),
        (
            {"timestamp": {"$gte": "2025-03-01T00:00:00+00:00"}, "status": {"$exists": False}},
            lambda e, c: (
                e.timestamp >= datetime(2025, 3, 1, tzinfo=UTC)
                and getattr(e, "status", None) is None
            ),
        ),
    ]
    for tree, keep in filters:
        for clearance in CLEARANCES:
            got = both(store, clearance, context_filters=tree, group_by=["element_type"])
            assert got.path == "pushdown", tree
            kept = functools.partial(lambda e, k, c: k(e, c), k=keep, c=clearance)
            expected = expected_groups(clearance, ["element_type"], kept)
            assert got_counts(got, ["element_type"]) == {k: len(v) for k, v in expected.items()}


def test_hidden_neighbours_form_no_group_and_change_no_count(
    store: uda.Client, profiles: ProfileFactory, embedder: Embedder
) -> None:
    public = both(store, ["public"], group_by=["partOf.name"], temporal=("timestamp", "month"))
    names = {row["partOf.name"] for row in public.rows}
    assert "operations" not in names
    assert "alpha tools" not in names
    assert "payments" in names
    assert None in names
    # A store that never held the confidential repository gives the public caller the same
    # answer: a hidden element changes nothing the caller can observe.
    elements = [e for e in ELEMENTS if e.element_id != "repo:ops"]
    relations = [r for r in RELATIONS if r.target_id != "repo:ops"]
    with uda.Client(profiles("without"), embedder=embedder) as other:
        other.ingest(elements, relations)
        other.delete([DELETED])
        other.ingest([CURRENT[RECLASSIFIED]])
        for group_by in (["partOf.name"], ["partOf.name", "element_type"]):
            fields: dict[str, Any] = {"group_by": group_by, "temporal": ("timestamp", "month")}
            assert both(other, ["public"], **fields).rows == both(store, ["public"], **fields).rows
        probe = {"context_filters": {"partOf.name": "operations"}, "group_by": ["element_type"]}
        assert both(store, ["public"], **probe).rows == []
        assert both(store, ["internal"], **probe).rows == []
        assert both(store, ["confidential"], **probe).rows != []


def test_deleted_and_reclassified_elements_count_only_where_visible(store: uda.Client) -> None:
    everyone = both(store, ["restricted", "project:*"], group_by=["sensitivity"])
    by_level = {row["sensitivity"]: row["count"] for row in everyone.rows}
    expected = Counter(e.sensitivity.value for e in matches(["restricted", "project:*"]))
    assert by_level == dict(expected)
    public = both(store, ["public"], context_filters={"element_type": "Document"})
    assert public.matched == len([e for e in matches(["public"]) if isinstance(e, Document)])
    assert RECLASSIFIED not in {e.element_id for e in matches(["public"])}


# -- with a query: the ranked search's top n --------------------------------------------------
def test_a_query_aggregates_its_top_results(store: uda.Client) -> None:
    clearance = ["internal"]
    for n in (3, 10, 40):
        results = store.search("payment retries", limit=min(n, 100), clearance_scope=clearance)
        got = store.aggregate("payment retries", clearance, group_by=["element_type"], top_n=n)
        ids = [r.element_id for r in results.results]
        expected = Counter(type(CURRENT[eid]).__name__ for eid in ids)
        assert {r["element_type"]: r["count"] for r in got.rows} == dict(expected)
        assert got.matched == len(ids) == min(n, len(matches(clearance)))
        assert got.path == "python"
    with pytest.raises(InvalidRequestError) as caught:
        store.aggregate(None, clearance, top_n=5)
    assert caught.value.field == "top_n"


# -- the fast path is the reference ----------------------------------------------------------
TREES: list[dict[str, Any]] = [
    {},
    {"status": {"$nin": ["accepted", "proposed"]}},
    {"$not": {"governedBy.name": {"$like": "Decision _"}}},
    {"$or": [{"name": {"$between": ["Note 2", "Note 4"]}}, {"~governedBy.element_id": "doc:03"}]},
    {"confidence": {"$gt": 0.15}, "element_type": "Evidence"},
    {"partOf.name": {"$exists": True}, "$not": {"partOf.name": "payments"}},
    {"sensitivity": {"$in": ["internal", "restricted"]}, "scope": {"$exists": False}},
]


@pytest.mark.parametrize("tree", TREES, ids=[json.dumps(t)[:40] for t in TREES])
def test_the_one_statement_answers_exactly_what_python_counts(
    store: uda.Client, tree: dict[str, Any]
) -> None:
    shapes: list[dict[str, Any]] = [
        {"group_by": ["element_type", "~governedBy.name"], "temporal": ("timestamp", "month")},
        {"group_by": ["partOf.name"], "metric": "min", "metric_field": "confidence"},
        {
            "group_by": ["status"],
            "metric": "avg",
            "metric_field": "decided_on",
            "cumulative": True,
            "temporal": ("timestamp", "quarter"),
        },
    ]
    for clearance in CLEARANCES:
        for shape in shapes:
            got = both(store, clearance, context_filters=tree, **shape)
            assert got.path == "pushdown", (tree, shape)
