"""Discovery on every surface but the sync client: HTTP (with 422 problem documents and the
OpenAPI document), the remote client, the CLI, the agent tools and MCP.

The paths, operators and values themselves, and the sync client, are tested in
test_discovery.py; the reference values are tests/discovery_fixtures.py's, the corpus
test_paging's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from discovery_fixtures import EVERYONE, expected_values
from http_fixtures import Service, serve
from test_paging import ASSETS, ELEMENTS, RELATIONS

import uda
from uda.agent.data_models import DiscoverPathsArgs, OperatorsArgs
from uda.agent.data_tools import discover_filter_paths, get_valid_operators
from uda.agent.deps import UDADeps
from uda.cli.commands import EXIT_OK, EXIT_USAGE, main
from uda.embedding import Embedder
from uda.errors import InvalidRequestError, UnknownFilterFieldError
from uda.http.remote import AsyncRemoteClient
from uda.query.discovery import operators


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
