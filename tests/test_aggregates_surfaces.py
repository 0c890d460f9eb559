"""Aggregates on every surface: HTTP (JSON and Arrow), the remote client, the CLI, the agent
tool and MCP. The semantics are tested in test_aggregates.py; here each surface must return
the Python API's rows for the same effective clearance, and name the field of a bad request
(HTTP 422 problem+json, CLI exit 2, an agent retry, an MCP error result).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from aggregate_fixtures import ELEMENTS, RELATIONS
from http_fixtures import Service, serve
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import uda
from uda.agent.aggregate import AggregateArgs, aggregate
from uda.agent.deps import UDADeps
from uda.agent.toolset import uda_toolset
from uda.cli.commands import EXIT_OK, EXIT_USAGE, main
from uda.embedding import Embedder
from uda.errors import InvalidAggregateError, InvalidRequestError, UserError
from uda.http.aggregate import META_AGGREGATE
from uda.http.remote import AsyncRemoteClient
from uda.http.wire import ARROW_STREAM, read_stream

EVERYONE = ["restricted", "project:*"]
SHAPE: dict[str, Any] = {
    "group_by": ["partOf.name", "element_type"],
    "temporal": ["timestamp", "quarter"],
    "metric": "max",
    "metric_field": "timestamp",
    "cumulative": True,
}
FILTERS = {"$not": {"status": "superseded"}}


def local_kwargs() -> dict[str, Any]:
    return {**SHAPE, "temporal": tuple(SHAPE["temporal"]), "context_filters": FILTERS}


@pytest.fixture
async def service(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Service]:
    async with serve(tmp_path / "uda", embedder, elements=ELEMENTS, relations=RELATIONS) as s:
        yield s


# -- HTTP -----------------------------------------------------------------------------------
async def test_http_answers_the_python_rows_in_json_and_arrow(service: Service) -> None:
    body = {**SHAPE, "context_filters": FILTERS, "clearance_scope": ["internal"]}
    headers = {"X-API-Key": service.keys.admin}
    local = await service.client.aggregate(clearance_scope=["internal"], **local_kwargs())
    assert local.rows
    response = await service.http.post("/v1/aggregate", json=body, headers=headers)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["rows"] == local.rows
    assert data["columns"] == [{"name": c.name, "kind": c.kind} for c in local.columns]
    assert data["matched"] == local.matched
    assert data["path"] == "pushdown"
    assert data["clearance"]["effective"] == ["internal"]
    assert data["clearance"]["narrowed"] is True
    assert response.headers["X-UDA-Clearance"] == "internal"
    arrow = await service.http.post(
        "/v1/aggregate", json=body, headers={**headers, "Accept": ARROW_STREAM}
    )
    assert arrow.status_code == 200, arrow.text
    assert arrow.headers["content-type"] == ARROW_STREAM
    table, extra = read_stream(arrow.content)
    assert table.equals(local.to_arrow())
    assert extra["clearance"]["effective"] == ["internal"]
    metadata = pa.ipc.open_stream(arrow.content).schema.metadata or {}
    assert json.loads(metadata[META_AGGREGATE]) == {"matched": local.matched, "path": "pushdown"}


async def test_http_clearance_is_the_grant_narrowed_never_widened(service: Service) -> None:
    body = {"group_by": ["partOf.name"], "clearance_scope": EVERYONE}
    response = await service.http.post(
        "/v1/aggregate", json=body, headers={"X-API-Key": service.keys.public}
    )
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["clearance"]["effective"] == ["public"]
    assert data["clearance"]["capped"] is True
    public = await service.client.aggregate(clearance_scope=["public"], group_by=["partOf.name"])
    assert data["rows"] == public.rows
    assert "operations" not in {row["partOf.name"] for row in data["rows"]}
    # No clearance_scope: the whole grant.
    whole = await service.http.post(
        "/v1/aggregate",
        json={"group_by": ["partOf.name"]},
        headers={"X-API-Key": service.keys.admin},
    )
    everyone = await service.client.aggregate(clearance_scope=EVERYONE, group_by=["partOf.name"])
    assert whole.json()["rows"] == everyone.rows
    assert "operations" in {row["partOf.name"] for row in whole.json()["rows"]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"group_by": ["stauts"]}, "group_by.0"),
        ({"temporal": ["name", "month"]}, "temporal"),
        ({"temporal": ["timestamp", "fortnight"]}, "temporal.1"),
        ({"metric": "avg"}, "metric_field"),
        ({"metric": "min", "metric_field": "status"}, "metric_field"),
        ({"cumulative": True}, "cumulative"),
        ({"top_n": 5}, "top_n"),
        ({"group_by": "status"}, "group_by"),
        ({"context_filters": {"stauts": 1}}, "context_filters.stauts"),
        ({"clearance": ["public"]}, "clearance"),
    ],
)
async def test_http_bad_input_is_a_problem_naming_the_field(
    service: Service, body: dict[str, Any], field: str
) -> None:
    response = await service.http.post(
        "/v1/aggregate", json=body, headers={"X-API-Key": service.keys.admin}
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["field"] == field


async def test_http_refuses_what_it_cannot_send_and_strangers(service: Service) -> None:
    refused = await service.http.post(
        "/v1/aggregate",
        json={},
        headers={"X-API-Key": service.keys.admin, "Accept": "text/html"},
    )
    assert refused.status_code == 406
    anonymous = await service.http.post("/v1/aggregate", json={})
    assert anonymous.status_code == 401


async def test_openapi_documents_the_aggregate_route(service: Service) -> None:
    spec = (await service.http.get("/openapi.json")).json()
    operation = spec["paths"]["/v1/aggregate"]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/AggregateRequest"
    )
    assert ARROW_STREAM in operation["responses"]["200"]["content"]
    assert "application/problem+json" in operation["responses"]["422"]["content"]
    request = spec["components"]["schemas"]["AggregateRequest"]["properties"]
    assert {"group_by", "temporal", "metric", "metric_field", "cumulative", "top_n"} <= set(request)
    assert "rows" in spec["components"]["schemas"]["AggregateOut"]["properties"]


# -- the remote client ------------------------------------------------------------------------
async def test_remote_client_answers_the_local_rows(service: Service) -> None:
    transport = httpx.ASGITransport(app=service.app)
    async with AsyncRemoteClient(
        "http://uda.test", api_key=service.keys.admin, transport=transport
    ) as remote:
        for clearance in (["public"], ["internal"], EVERYONE):
            got = await remote.aggregate(clearance_scope=clearance, **local_kwargs())
            local = await service.client.aggregate(clearance_scope=clearance, **local_kwargs())
            assert got.rows == local.rows
            assert got.to_arrow().equals(local.to_arrow())
            assert got.clearance == local.clearance
        ranked = await remote.aggregate("payment retries", EVERYONE, group_by=["status"], top_n=7)
        expected = await service.client.aggregate(
            "payment retries", EVERYONE, group_by=["status"], top_n=7
        )
        assert ranked.rows == expected.rows
        with pytest.raises(InvalidRequestError) as caught:
            await remote.aggregate(group_by=["stauts"])  # judged by the server
        assert caught.value.field == "group_by.0"
        with pytest.raises(InvalidRequestError) as local_check:
            await remote.aggregate(metric="avg")  # judged here, before any round trip
        assert local_check.value.field == "metric_field"


# -- the CLI ----------------------------------------------------------------------------------
def test_cli_prints_the_python_rows_in_every_format(
    tmp_path: Path, embedder: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    with uda.connect(path=store, embedder=embedder) as client:
        client.ingest(ELEMENTS, RELATIONS)
        local = client.aggregate(clearance_scope=EVERYONE, **local_kwargs())
    args = [
        "--path",
        str(store),
        "aggregate",
        "--where",
        json.dumps(FILTERS),
        "--group-by",
        "partOf.name",
        "--group-by",
        "element_type",
        "--temporal",
        "timestamp:quarter",
        "--metric",
        "max:timestamp",
        "--cumulative",
        "--clearance",
        "restricted,project:*",
    ]
    assert main([*args, "--format", "json"]) == EXIT_OK
    printed = json.loads(capsys.readouterr().out)
    assert printed["rows"] == local.rows
    assert printed["matched"] == local.matched
    assert main([*args, "--format", "csv"]) == EXIT_OK
    lines = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert lines[0] == [c.name for c in local.columns]
    assert len(lines) == len(local.rows) + 1
    assert lines[1] == ["" if v is None else str(v) for v in local.rows[0].values()]
    assert main([*args]) == EXIT_OK
    text = capsys.readouterr().out
    assert f"{local.matched} matches counted (pushdown)" in text
    out = tmp_path / "agg.arrow"
    assert main([*args, "--format", "arrow", "--output", str(out)]) == EXIT_OK
    assert pa.ipc.open_stream(out.read_bytes()).read_all().equals(local.to_arrow())
    ranked = ["--path", str(store), "aggregate", "payment retries", "--top-n", "5"]
    assert main([*ranked, "--group-by", "element_type", "--format", "json"]) == EXIT_OK
    assert sum(row["count"] for row in json.loads(capsys.readouterr().out)["rows"]) == 5
    for bad, named in [
        (["--group-by", "stauts"], "group_by.0"),
        (["--metric", "median:confidence"], "--metric"),
        (["--metric", "avg"], "--metric"),
        (["--temporal", "month"], "--temporal"),
        (["--temporal", "timestamp:fortnight"], "temporal.1"),
        (["--where", "{not json"], "--where"),
        (["--top-n", "5"], "top_n"),
    ]:
        assert main(["--path", str(store), "aggregate", *bad]) == EXIT_USAGE, bad
        assert named in capsys.readouterr().err, bad


# -- the agent tool and MCP ------------------------------------------------------------------
async def test_agent_tool_counts_at_the_deps_clearance(tmp_path: Path, embedder: Embedder) -> None:
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await client.ingest(ELEMENTS, RELATIONS)
        for clearance in (["public"], EVERYONE):
            deps = UDADeps(client=client, clearance_scope=clearance)
            answer = await aggregate(
                deps,
                AggregateArgs(
                    where=FILTERS,
                    group_by=["partOf.name", "element_type"],
                    period="quarter",
                    metric="max",
                    metric_field="timestamp",
                    cumulative=True,
                ),
            )
            local = await client.aggregate(clearance_scope=clearance, **local_kwargs())
            assert answer.rows == local.rows
            assert answer.matched == local.matched
            assert [c.name for c in answer.columns] == [c.name for c in local.columns]
        deps = UDADeps(client=client, clearance_scope=["public"])
        with pytest.raises(InvalidAggregateError) as caught:
            await aggregate(deps, AggregateArgs(group_by=["stauts"]))
        assert caught.value.field == "group_by.0"
        with pytest.raises(UserError):
            await aggregate(deps, AggregateArgs(filters={"stauts": "accepted"}))
        with pytest.raises(ValueError, match="extra"):
            AggregateArgs.model_validate({"clearance_scope": ["restricted"]})


async def test_a_model_is_told_which_field_to_fix(tmp_path: Path, embedder: Embedder) -> None:
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if len(seen) == 1:
            return ModelResponse(parts=[ToolCallPart("aggregate", {"group_by": ["stauts"]})])
        if len(seen) == 2:
            return ModelResponse(parts=[ToolCallPart("aggregate", {"group_by": ["status"]})])
        return ModelResponse(parts=[TextPart("done")])

    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await client.ingest(ELEMENTS, RELATIONS)
        deps = UDADeps(client=client, clearance_scope=EVERYONE)
        agent = Agent(FunctionModel(model), deps_type=UDADeps, toolsets=[uda_toolset()])
        await agent.run("how many decisions per status?", deps=deps)
        local = await client.aggregate(clearance_scope=EVERYONE, group_by=["status"])
    (retried,) = [p for p in seen[1][-1].parts if isinstance(p, ToolReturnPart)]
    assert retried.outcome == "retried"
    assert "group_by.0" in retried.model_response_str()
    assert "'status'" in retried.model_response_str()
    (returned,) = [p for p in seen[2][-1].parts if isinstance(p, ToolReturnPart)]
    assert returned.outcome == "success"
    assert json.loads(returned.model_response_str())["rows"] == local.rows


async def test_mcp_offers_the_aggregate_tool(tmp_path: Path, embedder: Embedder) -> None:
    from mcp import Client

    from uda.agent import build_mcp_server

    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await client.ingest(ELEMENTS, RELATIONS)
        server = build_mcp_server(client, clearance_scope=["internal"])
        async with Client(server) as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert "aggregate" in names
            result = await session.call_tool(
                "aggregate", {"group_by": ["partOf.name"], "period": "month"}
            )
            assert not result.is_error, result.content
            local = await client.aggregate(
                clearance_scope=["internal"],
                group_by=["partOf.name"],
                temporal=("timestamp", "month"),
            )
            assert result.structured_content["rows"] == local.rows
            bad = await session.call_tool("aggregate", {"metric": "avg", "metric_field": "name"})
            assert bad.is_error
            assert "metric_field" in " ".join(block.text for block in bad.content)
