"""Discovery: every filterable path (relation paths both ways), its type, the operators the
grammar takes on it, whether order_by takes it, and the values the caller may see.

Operators are checked against the grammar's own enforcement (`_operand`), not against a copy
of a table; values against a reference counted here from the corpus with the clearance rule
restated — a value only hidden elements hold must never be listed. Then every surface: the
sync and async clients, HTTP (with 422 problem documents), the remote client, the CLI, the
agent tools and MCP.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_fixtures import Service, serve
from test_paging import (
    ASSETS,
    CLEARANCES,
    ELEMENTS,
    RELATIONS,
    ProfileFactory,
    make_profile,
    servers,
    visible,
)

import uda
from connectors.contract.predicates import Op
from connectors.contract.selection import StateSelection
from connectors.contract.system_of_record import StoredState
from ontology import Decision, DecisionStatus, Element, knowledge_asset_types
from uda.agent.data_models import DiscoverPathsArgs, OperatorsArgs
from uda.agent.data_tools import discover_filter_paths, get_valid_operators
from uda.agent.deps import UDADeps
from uda.cli.commands import EXIT_OK, EXIT_USAGE, main
from uda.embedding import Embedder
from uda.errors import InvalidRequestError, UnknownClearanceError, UnknownFilterFieldError
from uda.http.remote import AsyncRemoteClient
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

EVERYONE = ["restricted", "project:*"]
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
def expected_values(
    clearance: list[str], field: str, elements: list[Element]
) -> list[tuple[Any, int]]:
    counted: Counter[Any] = Counter()
    for element in elements:
        if not visible(element, clearance):
            continue
        value = element.type_name() if field == "element_type" else getattr(element, field, None)
        if value is not None:
            counted[getattr(value, "value", value)] += 1
    return sorted(counted.items(), key=lambda item: (-item[1], str(item[0])))


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


# -- HTTP and the remote client ---------------------------------------------------------
@pytest.fixture
async def service(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Service]:
    async with serve(tmp_path / "uda", embedder, elements=ELEMENTS, relations=RELATIONS) as s:
        yield s


async def test_http_lists_paths_with_the_values_the_grant_allows(service: Service) -> None:
    async def get(key: str, **params: Any) -> httpx.Response:
        return await service.http.get("/v1/paths", params=params, headers={"X-API-Key": key})

    admin = await get(service.keys.admin, prefix="status")
    assert admin.status_code == 200
    assert admin.headers["x-uda-clearance"] == "restricted,project:*"
    [status] = admin.json()["paths"]
    assert {v["value"] for v in status["values"]} == {"accepted", "proposed", "superseded"}
    public = await get(service.keys.public, prefix="status", clearance_scope=["restricted"])
    assert public.headers["x-uda-clearance"] == "public"  # asking for more gets the grant
    assert public.json()["clearance"]["capped"] is True
    assert public.json()["paths"][0]["values"] == []
    narrowed = await get(service.keys.admin, prefix="status", clearance_scope=["internal"])
    assert [v["value"] for v in narrowed.json()["paths"][0]["values"]] == ["accepted"]
    relation = await get(service.keys.admin, prefix="~governedBy.")
    assert {p["path"] for p in relation.json()["paths"]} >= {"~governedBy.status"}
    bare = await get(service.keys.admin, prefix="partOf.name", values="false")
    assert bare.json()["paths"][0]["values"] is None
    assert (await get(service.keys.admin, prefix="nothing-like-this")).json()["paths"] == []
    for params, field in (
        ({"prefix": "x" * 201}, "prefix"),
        ({"clearance_scope": ["top-secret"]}, "clearance_scope"),
        ({"values": "maybe"}, "values"),
    ):
        bad = await get(service.keys.admin, **params)
        assert bad.status_code == 422, params
        assert bad.headers["content-type"] == "application/problem+json"
        assert bad.json()["field"] == field
    assert (await service.http.get("/v1/paths")).status_code == 401


async def test_http_definitions_and_the_openapi_document(service: Service) -> None:
    headers = {"X-API-Key": service.keys.public}
    definitions = await service.http.get("/v1/definitions", headers=headers)
    assert definitions.status_code == 200
    assert definitions.json()["operators"] == operators().model_dump(mode="json")
    assert {"timestamp", "name", "status"} <= set(definitions.json()["orderable"])
    spec = (await service.http.get("/openapi.json")).json()
    paths = spec["paths"]["/v1/paths"]["get"]
    assert {p["name"] for p in paths["parameters"]} == {"prefix", "clearance_scope", "values"}
    assert paths["responses"]["422"]["content"]["application/problem+json"]
    assert "/v1/definitions" in spec["paths"]
    schemas = spec["components"]["schemas"]
    assert {"path", "type", "operators", "orderable", "values"} <= set(
        schemas["FilterPath"]["properties"]
    )
    assert "operators" in schemas["DefinitionsOut"]["properties"]


async def test_the_remote_client_discovers_like_the_local_one(service: Service) -> None:
    transport = httpx.ASGITransport(app=service.app)
    async with AsyncRemoteClient(
        "http://uda.test", api_key=service.keys.admin, transport=transport
    ) as remote:
        for clearance in (None, ["internal"], []):
            local_scope = EVERYONE if clearance is None else clearance
            got = await remote.fields("partOf.", clearance)
            assert got == await service.client.fields("partOf.", local_scope), clearance
        assert await remote.operators() == operators()
        assert await remote.fields("zzz") == []
        with pytest.raises(InvalidRequestError) as bad:
            await remote.fields("x" * 201)
        assert bad.value.field == "prefix"


def test_the_sync_client_discovers(store: uda.Client) -> None:
    """(Both profiles: the sync facade over the async client.)"""
    paths = store.fields("~governedBy.", ["public"], values=False)
    assert paths
    assert all(p.relation == "governedBy" for p in paths)
    assert store.operators() == operators()


# -- the command line, the agent tools and MCP --------------------------------------------
def test_cli_lists_fields(
    tmp_path: Path, embedder: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    del embedder  # loaded once for the session; the CLI reuses it
    store = tmp_path / "store"
    with uda.connect(path=store) as client:
        client.ingest(ELEMENTS, RELATIONS)

    def run(*args: str) -> int:
        return main(["--path", str(store), "fields", *args])

    assert run("partOf.", "--clearance", "public") == EXIT_OK
    table = capsys.readouterr().out
    assert "partOf.name" in table
    assert "payments=1" in table
    assert "operations" not in table  # a confidential repository's name
    assert run("partOf.name", "--clearance", "confidential") == EXIT_OK
    assert "operations=1" in capsys.readouterr().out
    assert run("status", "--format", "json", "--clearance", "restricted,project:*") == EXIT_OK
    [status] = json.loads(capsys.readouterr().out)
    assert status["orderable"] is True
    assert {v["value"] for v in status["values"]} == {"accepted", "proposed", "superseded"}
    assert run("nothing-like-this") == EXIT_OK
    assert "no filterable path starts with" in capsys.readouterr().out
    assert run("--clearance", "top-secret") == EXIT_USAGE
    assert "clearance_scope" in capsys.readouterr().err
    assert run("x" * 201) == EXIT_USAGE
    assert "prefix" in capsys.readouterr().err


@pytest.fixture
async def deps(tmp_path: Path, embedder: Embedder) -> AsyncIterator[UDADeps]:
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await client.ingest(ELEMENTS, RELATIONS)
        yield UDADeps(client=client, clearance_scope=["internal"])


async def test_agent_tools_discover_paths_and_operators(deps: UDADeps) -> None:
    answer = await discover_filter_paths(deps, DiscoverPathsArgs(prefix="status"))
    [status] = answer.paths
    assert [(v.value, v.count) for v in status.values or []] == expected_values(
        ["internal"], "status", ASSETS
    )
    relations = await discover_filter_paths(deps, DiscoverPathsArgs(prefix="~governedBy."))
    assert "~governedBy.status" in {p.path for p in relations.paths}
    empty = await discover_filter_paths(deps, DiscoverPathsArgs(prefix="zzz"))
    assert empty.paths == []
    assert empty.note
    every = await get_valid_operators(deps, OperatorsArgs())
    assert every.types == operators().types
    assert every.path is None
    one = await get_valid_operators(deps, OperatorsArgs(path="partOf.name"))
    assert (one.path, one.path_type) == ("partOf.name", "string")
    assert "$like" in (one.path_operators or [])
    with pytest.raises(UnknownFilterFieldError, match="did you mean") as unknown:
        await get_valid_operators(deps, OperatorsArgs(path="partOf.nme"))
    assert unknown.value.field == "path"
    # A client without discovery (anything with `run`) still gets the paths, without values.
    bare = UDADeps(client=_RunOnly(), clearance_scope=["internal"])
    listed = await discover_filter_paths(bare, DiscoverPathsArgs(prefix="status"))
    assert listed.paths[0].values is None


class _RunOnly:
    async def run(self, request: Any) -> Any:  # pragma: no cover - never searched here
        raise AssertionError("discovery must not search")


async def test_mcp_offers_the_discovery_tools(deps: UDADeps) -> None:
    from mcp import Client

    from uda.agent import build_mcp_server

    server = build_mcp_server(deps.client, clearance_scope=["public"])
    async with Client(server) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert {"discover_filter_paths", "get_valid_operators"} <= set(tools)
        assert tools["discover_filter_paths"].annotations.read_only_hint is True
        found = await session.call_tool("discover_filter_paths", {"prefix": "partOf.name"})
        assert not found.is_error, found.content
        [path] = found.structured_content["paths"]
        assert path["values"] == [{"value": "payments", "count": 1}]  # the server's clearance
        widened = await session.call_tool(
            "discover_filter_paths", {"prefix": "status", "clearance_scope": ["restricted"]}
        )
        assert widened.is_error
        ops = await session.call_tool("get_valid_operators", {"path": "~governedBy.status"})
        assert not ops.is_error
        assert "$like" not in ops.structured_content["path_operators"]
        unknown = await session.call_tool("get_valid_operators", {"path": "nope"})
        assert unknown.is_error
