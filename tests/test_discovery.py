"""Discovery: every filterable path (relation paths both ways), its type, the operators the
grammar takes on it, whether order_by takes it, and the values the caller may see.

Operators are checked against the grammar's own enforcement (`_operand`), not against a copy
of a table; values against a reference counted from the corpus with the clearance rule
restated (tests/discovery_fixtures.py) — a value only hidden elements hold must never be
listed. The sync client is here too (both profiles); the other surfaces (HTTP with 422
problem documents, the remote client, the CLI, the agent tools and MCP) are in
test_discovery_surfaces.py.
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from discovery_fixtures import EVERYONE, expected_values
from test_paging import (
    ASSETS,
    CLEARANCES,
    ELEMENTS,
    RELATIONS,
    ProfileFactory,
    make_profile,
    servers,
)

import uda
from connectors.contract.predicates import Op
from connectors.contract.selection import StateSelection
from connectors.contract.system_of_record import StoredState
from ontology import Decision, DecisionStatus, knowledge_asset_types
from uda.embedding import Embedder
from uda.errors import InvalidRequestError, UnknownClearanceError, UnknownFilterFieldError
from uda.query.clearance import Clearance
from uda.query.discovery import (
    MAX_LISTED_VALUES,
    SCAN_BATCH,
    FilterPath,
    all_paths,
    count_values,
    filter_paths,
    find_path,
    operators,
)
from uda.query.filters import parse_filters
from uda.query.filters.grammar import _operand

__all__ = ["make_profile", "servers"]  # the fixtures, shared with test_paging

SAMPLES: dict[str, Any] = {
    "string": "x",
    "integer": 3,
    "number": 0.5,
    "boolean": True,
    "date": "2025-01-01",
    "datetime": "2025-01-01T00:00:00+00:00",
}


def operand(op: Op, sample: Any) -> Any:
    return {Op.IN: [sample], Op.NIN: [sample], Op.BETWEEN: [sample, sample], Op.EXISTS: True}.get(
        op, sample
    )


def by_path(paths: list[FilterPath]) -> dict[str, FilterPath]:
    return {p.path: p for p in paths}


# -- the paths, their types and operators ------------------------------------------------
def test_relation_paths_are_listed_both_ways_with_their_types() -> None:
    paths = by_path(all_paths())
    name = paths["partOf.name"]
    assert (name.relation, name.direction, name.field, name.type) == (
        "partOf",
        "out",
        "name",
        "string",
    )
    assert set(name.element_types) == {"Project", "Repository", "SystemComponent"}
    assert "$like" in name.operators
    assert not name.orderable  # order_by takes the element's own fields only
    status = paths["~governedBy.status"]
    assert (status.relation, status.direction, status.type) == ("governedBy", "in", "enum")
    assert status.element_types == ["Decision"]
    assert "$like" not in status.operators
    assert "$gte" not in status.operators  # ordering an enumeration means nothing
    assert {"$eq", "$in", "$exists"} <= set(status.operators)
    assert status.choices == [s.value for s in DecisionStatus]
    assert paths["governedBy.decided_on"].type == "date"
    assert paths["~derivedFrom.name"].element_types == ["SourcePill"]
    assert paths["partOf.kind"].type == "enum"
    own = paths["status"]
    assert (own.relation, own.direction, own.orderable) == (None, None, True)
    assert paths["timestamp"].type == "datetime"
    assert paths["confidence"].type == "number"
    # The searchable types registered now (another test may have registered its own).
    assert paths["element_type"].choices == sorted(knowledge_asset_types())
    assert {"Decision", "Document", "Evidence", "SourcePill"} <= set(
        paths["element_type"].choices or []
    )
    # A path is listed when a result can stand at its near end and the far end has the field.
    assert not [p for p in paths if p.startswith("~partOf.")]  # only containers are targets
    assert "partOf.status" not in paths  # no container has a status
    assert "email" not in paths  # no searchable element has one...
    assert "authoredBy.email" in paths  # ...the people they are authored by do


def test_every_listed_operator_parses_and_every_other_is_refused() -> None:
    """What discovery lists is exactly what the grammar takes, path by path."""
    checked = 0
    for path in all_paths():
        sample = (path.choices or [None])[0] or SAMPLES[path.type]
        for op in Op:
            tree = {path.path: {op.value: operand(op, sample)}}
            if op.value in path.operators:
                assert parse_filters(tree), tree
            else:
                with pytest.raises(UnknownFilterFieldError):
                    parse_filters(tree)
            checked += 1
    assert checked > 1000


def test_the_operators_by_type_are_what_the_grammar_enforces() -> None:
    annotations: dict[str, Any] = {
        "string": str,
        "enum": DecisionStatus,
        "boolean": bool,
        "integer": int,
        "number": float,
        "date": date,
        "datetime": datetime,
    }
    table = operators()
    assert set(table.types) == set(annotations)
    for kind, annotation in annotations.items():
        sample = "accepted" if kind == "enum" else SAMPLES[kind]
        for op in Op:
            try:
                _operand("f", op, operand(op, sample), annotation)
                accepted = True
            except (TypeError, ValueError):
                accepted = False
            assert (op.value in table.types[kind]) == accepted, (kind, op)
    assert "$like" not in table.types["boolean"]
    assert "$gt" not in table.types["boolean"]
    assert set(table.descriptions) == {op.value for op in Op}
    assert table.max_depth == 5


def test_prefixes_select_and_unknown_ones_list_nothing() -> None:
    assert {p.relation for p in filter_paths("partOf.")} == {"partOf"}
    assert all(p.direction == "in" for p in filter_paths("~"))
    assert filter_paths("~governedBy.st")[0].path == "~governedBy.status"
    assert filter_paths("no-such-path") == []
    assert len(filter_paths(None)) == len(filter_paths("")) == len(all_paths())
    for bad in ("x" * 201, 42):
        with pytest.raises(InvalidRequestError) as refused:
            filter_paths(bad)
        assert refused.value.field == "prefix"
    with pytest.raises(UnknownFilterFieldError, match=r"did you mean 'partOf\.name'") as unknown:
        find_path("partOf.nme")
    assert unknown.value.field == "path"


# -- the values a caller may see ---------------------------------------------------------
def values_of(path: FilterPath) -> list[tuple[Any, int]]:
    assert path.values is not None, path.path
    return [(v.value, v.count) for v in path.values]


CONTAINERS = [e for e in ELEMENTS if e.type_name() == "Repository"]


@pytest.fixture
def store(make_profile: ProfileFactory, embedder: Embedder) -> Any:
    with uda.Client(make_profile("discovery"), embedder=embedder) as client:
        client.ingest(ELEMENTS, RELATIONS)
        yield client


def test_values_are_counted_over_what_each_clearance_may_see(store: uda.Client) -> None:
    """Both profiles: the values differ per clearance and equal the reference exactly."""
    seen: dict[str, set[Any]] = {}
    for clearance in CLEARANCES:
        paths = by_path(store.fields(clearance_scope=clearance))
        for path, field, elements in (
            ("status", "status", ASSETS),
            ("element_type", "element_type", ASSETS),
            ("sensitivity", "sensitivity", ASSETS),
            ("scope", "scope", ASSETS),
            ("partOf.name", "name", CONTAINERS),
        ):
            assert values_of(paths[path]) == expected_values(clearance, field, elements), (
                clearance,
                path,
            )
            seen.setdefault(path, set()).update(v for v, _ in values_of(paths[path]))
        statuses = {v for v, _ in values_of(paths["status"])}
        scopes = {v for v, _ in values_of(paths["scope"])}
        # Values only hidden elements hold are never listed.
        if clearance != EVERYONE:
            assert "superseded" not in statuses  # restricted decisions only
            assert "project:beta" not in scopes
        if clearance == ["public"]:
            assert statuses == set()  # every decision with a status is above public
            assert values_of(paths["partOf.name"]) == [("payments", 1)]
    assert seen["status"] == {"accepted", "proposed", "superseded"}
    assert seen["partOf.name"] == {"payments", "operations"}
    everything = by_path(store.fields(clearance_scope=EVERYONE))
    assert everything["name"].many_values
    assert everything["name"].values is None
    assert len({e.name for e in ASSETS}) > MAX_LISTED_VALUES


def test_the_sync_client_discovers(store: uda.Client) -> None:
    """(Both profiles: the sync facade over the async client.)"""
    paths = store.fields("~governedBy.", ["public"], values=False)
    assert paths
    assert all(p.relation == "governedBy" for p in paths)
    assert store.operators() == operators()


async def test_reclassified_and_deleted_elements_count_for_nobody_who_may_not_see_them(
    tmp_path: Path, embedder: Embedder
) -> None:
    decisions = [
        Decision(
            element_id=f"adr:{status}",
            name=f"Decision {status}",
            text=f"A decision, {status}.",
            status=status,
            sensitivity="public",
        )
        for status in ("accepted", "rejected", "deferred")
    ]
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await client.ingest(decisions)
        before = values_of(by_path(await client.fields("status", ["public"]))["status"])
        assert before == [("accepted", 1), ("deferred", 1), ("rejected", 1)]
        # Raised above public: its old, public version must not count either (THE rule
        # reads the newest state's clearance too). Deleted: nobody counts it.
        raised = decisions[1].model_dump(exclude={"hlc", "version", "element_type"})
        await client.ingest([Decision(**{**raised, "sensitivity": "restricted"})])
        await client.delete(["adr:deferred"])
        after = by_path(await client.fields("status", ["public"]))["status"]
        assert values_of(after) == [("accepted", 1)]
        restricted = by_path(await client.fields("status", ["restricted"]))["status"]
        assert values_of(restricted) == [("accepted", 1), ("rejected", 1)]
        without = await client.fields("status", ["public"], values=False)
        assert without[0].values is None
        assert not without[0].many_values
        assert await client.fields("zzz", ["public"]) == []
        with pytest.raises(UnknownClearanceError):
            await client.fields(None, ["top-secret"])
        with pytest.raises(InvalidRequestError) as one_string:
            await client.fields(None, "internal")
        assert one_string.value.field == "clearance_scope"
        assert (await client.operators()) == operators()


class _LooseStore:
    """A system of record that pushes down nothing (the contract allows looser, never
    stricter): every state comes back, so only THE rule can keep hidden values out."""

    def __init__(self, states: list[StoredState]) -> None:
        self.states = sorted(states, key=lambda s: s.element_id)
        self.reads = 0

    async def select_states(self, selection: StateSelection) -> list[StoredState]:
        self.reads += 1
        after = selection.after
        rows = [s for s in self.states if after is None or s.element_id > after.element_id]
        return rows[: selection.limit]


def _state(eid: str, status: str, rank: int, **extra: Any) -> StoredState:
    fields: dict[str, Any] = {
        "element_id": eid,
        "version": 1,
        "hlc": 1,
        "element_type": "Decision",
        "name": eid,
        "sensitivity_rank": rank,
        "scope": None,
        "timestamp_ms": 0,
        "tombstone": False,
        "content_hash": "",
        "payload": {},
        "filter_values": {"status": status, "element_type": "Decision"},
        "latest_sensitivity_rank": rank,
        "latest_scope": None,
    }
    return StoredState(**{**fields, **extra})


async def test_the_visibility_rule_itself_hides_values_a_loose_store_returns() -> None:
    states = [
        _state("adr:a", "accepted", 0),
        _state("adr:b", "rejected", 0, latest_sensitivity_rank=3),  # reclassified since
        _state("adr:c", "deferred", 0, tombstone=True),  # deleted
        _state("adr:d", "withdrawn", 0, scope="project:x", latest_scope="project:x"),
        _state("adr:e", "deprecated", 2),  # confidential
        *(_state(f"adr:z{n:04d}", "accepted", 0) for n in range(SCAN_BATCH + 5)),
    ]
    loose = _LooseStore(states)
    [status] = await count_values(loose, Clearance.parse(["public"]), filter_paths("status"))
    assert values_of(status) == [("accepted", SCAN_BATCH + 6)]
    assert loose.reads == 2  # keyset batches, not one read of everything
    [wider] = await count_values(
        loose, Clearance.parse(["confidential", "project:x"]), filter_paths("status")
    )
    assert {v for v, _ in values_of(wider)} == {"accepted", "withdrawn", "deprecated"}
