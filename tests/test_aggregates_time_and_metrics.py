"""Aggregates by time and with metrics, embedded and server: UTC periods, running totals,
min, max and average over numbers, datetimes and dates, and the Arrow types of each column.

Every expected answer is computed from the corpus (aggregate_fixtures.py), never from the
engine, and held both ways of counting (`both`); see test_aggregates.py.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aggregate_fixtures import (
    CLEARANCES,
    CURRENT,
    START,
    both,
    expected_groups,
    got_counts,
    matches,
    profiles,
    servers,
    store,
)

import uda
from ontology import Decision, Evidence
from uda.errors import InvalidRequestError

__all__ = ["profiles", "servers", "store"]  # fixtures


UNITS = ["day", "week", "month", "quarter", "year"]


# -- time buckets and running totals ----------------------------------------------------------
@pytest.mark.parametrize("unit", UNITS)
def test_temporal_buckets_are_utc_periods(store: uda.Client, unit: str) -> None:
    for clearance in (["public"], ["restricted", "project:*"]):
        got = both(store, clearance, group_by=["element_type"], temporal=("timestamp", unit))
        assert got.path == "pushdown"
        expected = expected_groups(clearance, ["element_type"], unit=unit)
        assert got_counts(got, ["element_type"]) == {k: len(v) for k, v in expected.items()}
    # A date field (epoch days): decisions by the quarter they were decided in.
    got = both(store, ["restricted"], temporal=("decided_on", unit))
    expected = expected_groups(
        ["restricted"], [], unit=unit, when=lambda e: getattr(e, "decided_on", None)
    )
    assert got_counts(got, []) == {k: len(v) for k, v in expected.items()}


def test_the_epoch_and_midnight_fall_in_the_right_periods(store: uda.Client) -> None:
    everyone = ["restricted", "project:*"]
    late = {"element_id": "doc:00"}  # 2024-11-28T23:30Z, a Thursday
    assert CURRENT["doc:00"].timestamp == START
    for unit, start in [("day", "2024-11-28"), ("week", "2024-11-25"), ("quarter", "2024-10-01")]:
        got = both(store, everyone, context_filters=late, temporal=("timestamp", unit))
        assert [row["bucket"] for row in got.rows] == [start]
    early = {"element_id": "doc:29"}  # 1969-12-31T23:59:59.999Z, a Wednesday
    for unit, start in [("day", "1969-12-31"), ("week", "1969-12-29"), ("year", "1969-01-01")]:
        got = both(store, everyone, context_filters=early, temporal=("timestamp", unit))
        assert [row["bucket"] for row in got.rows] == [start]


def test_rows_are_sorted_and_running_totals_accumulate_per_group(store: uda.Client) -> None:
    clearance = ["restricted", "project:*"]
    got = both(
        store,
        clearance,
        group_by=["partOf.name"],
        temporal=("timestamp", "quarter"),
        cumulative=True,
    )
    assert [c.name for c in got.columns] == ["partOf.name", "bucket", "count", "cumulative"]
    keys = [
        (row["partOf.name"] is None, row["partOf.name"] or "", row["bucket"]) for row in got.rows
    ]
    assert keys == sorted(keys)
    running: dict[Any, int] = defaultdict(int)
    for row in got.rows:
        running[row["partOf.name"]] += row["count"]
        assert row["cumulative"] == running[row["partOf.name"]]
    expected = expected_groups(clearance, ["partOf.name"], unit="quarter")
    assert got_counts(got, ["partOf.name"]) == {k: len(v) for k, v in expected.items()}
    with pytest.raises(InvalidRequestError) as caught:
        store.aggregate(group_by=["status"], cumulative=True)
    assert caught.value.field == "cumulative"


# -- metrics ----------------------------------------------------------------------------------
def test_min_max_avg_over_numbers_datetimes_and_dates(store: uda.Client) -> None:
    for clearance in CLEARANCES:
        evidence = [e for e in matches(clearance) if isinstance(e, Evidence)]
        confidences = [e.confidence for e in evidence if e.confidence is not None]
        low = both(
            store,
            clearance,
            context_filters={"element_type": "Evidence"},
            metric="min",
            metric_field="confidence",
        )
        assert low.path == "pushdown"
        assert [r["min"] for r in low.rows] == ([min(confidences)] if evidence else [])
        mean = both(
            store,
            clearance,
            context_filters={"element_type": "Evidence"},
            metric="avg",
            metric_field="confidence",
        )
        assert mean.path == "python"  # a float sum depends on its order: never pushed down
        if confidences:
            assert mean.rows[0]["avg"] == math.fsum(confidences) / len(confidences)
        newest = both(
            store, clearance, group_by=["element_type"], metric="max", metric_field="timestamp"
        )
        assert newest.path == "pushdown"
        expected = {
            type(e).__name__: max(
                x.timestamp for x in matches(clearance) if type(x) is type(e)
            ).isoformat(timespec="milliseconds")
            for e in matches(clearance)
        }
        assert {r["element_type"]: r["max"] for r in newest.rows} == expected
        average = both(
            store,
            clearance,
            group_by=["element_type"],
            metric="avg",
            metric_field="timestamp",
            temporal=("timestamp", "year"),
            cumulative=True,
        )
        assert average.path == "pushdown"
        for row in average.rows:
            group = [
                e
                for e in matches(clearance)
                if type(e).__name__ == row["element_type"]
                and str(e.timestamp.year) == row["bucket"][:4]
            ]
            ms = [
                (e.timestamp - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
                for e in group
            ]
            mean_ms = sum(ms) // len(ms)
            moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=mean_ms)
            assert row["avg"] == moment.isoformat(timespec="milliseconds")
        decided = both(
            store, clearance, metric="max", metric_field="decided_on", group_by=["status"]
        )
        for row in decided.rows:
            days = [
                e.decided_on
                for e in matches(clearance)
                if isinstance(e, Decision)
                and (e.status.value if e.status else None) == row["status"]
                and e.decided_on is not None
            ]
            assert row["max"] == (max(days).isoformat() if days else None)


def test_arrow_types_follow_the_fields(store: uda.Client) -> None:
    got = store.aggregate(
        clearance_scope=["restricted", "project:*"],
        group_by=["partOf.name"],
        temporal=("timestamp", "month"),
        metric="max",
        metric_field="timestamp",
        cumulative=True,
    )
    table = got.to_arrow()
    assert [str(t) for t in table.schema.types] == [
        "string",
        "date32[day]",
        "int64",
        "timestamp[ms, tz=UTC]",
        "timestamp[ms, tz=UTC]",
    ]
    assert table.num_rows == len(got.rows)
    first = table.to_pylist()[0]
    assert first["bucket"].isoformat() == got.rows[0]["bucket"]
    assert first["max"].isoformat(timespec="milliseconds") == got.rows[0]["max"]
