"""The agent tools on real embedded backends, driven by pydantic-ai's FunctionModel/TestModel.

No model is ever called over the network (`ALLOW_MODEL_REQUESTS` is off); the scripted
models of tests/agent_fixtures.py make the tool calls a model would, including the wrong ones.
Here: the tools' schemas, the search tools, clearance, other clients and surfaces, and the
example; the conversation's state is in test_agent_state.py, filters (listing them, filter
trees, and the mistakes a model makes with its arguments) in test_agent_filters.py.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_fixtures import (
    ELEMENTS,
    RELATIONS,
    SECRET_ID,
    SECRET_NAME,
    Script,
    _no_real_models,
    aclient,
    agent,
    answer_of,
    call,
    deps,
    returns,
    say,
)
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

import uda
from uda.agent import TOOLS, UDADeps, ag_ui_app, uda_agent, uda_toolset
from uda.agent.models import SearchArgs
from uda.agent.tools import search
from uda.embedding import Embedder
from uda.errors import UnknownClearanceError

__all__ = ["_no_real_models", "aclient", "deps"]  # fixtures

ROOT = Path(__file__).resolve().parent.parent


# -- schemas ----------------------------------------------------------------------------
def _property_names(schema: Any) -> Iterator[str]:
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                yield from value
            yield from _property_names(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _property_names(item)


async def test_tools_show_closed_schemas_without_any_clearance_field(deps: UDADeps) -> None:
    seen: dict[str, Any] = {}

    def look(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.update({t.name: t for t in info.function_tools})
        return say("ok")

    await Agent(FunctionModel(look), deps_type=UDADeps, toolsets=[uda_toolset()]).run(
        "hi", deps=deps
    )
    assert sorted(seen) == sorted(spec.name for spec in TOOLS)
    for name, tool in seen.items():
        schema = tool.parameters_json_schema
        assert schema.get("additionalProperties") is False, name
        assert not [p for p in _property_names(schema) if "clearance" in p.lower()], name
        assert tool.description
    assert set(seen["hybrid_search"].parameters_json_schema["properties"]) >= {
        "query",
        "limit",
        "filters",
        "element_types",
        "depth",
        "text_weight",
    }


# -- tool calls reach the backends -------------------------------------------------------
async def test_search_returns_ingested_elements_with_context(deps: UDADeps) -> None:
    script = Script(call("search", query="how are failed payments retried?", limit=3), say("done"))
    result = await agent().run("q", deps=deps, model=script.model)
    data = answer_of(script.seen[1])
    assert result.output == "done"
    assert data["query_id"] == "q1"
    assert data["strategy"] == "default"
    ids = [hit["element_id"] for hit in data["hits"]]
    assert "doc:retries" in ids
    hit = data["hits"][ids.index("doc:retries")]
    assert {(c["relation"], c["element_id"]) for c in hit["context"]} >= {
        ("partOf", "repo:payments"),
        ("governedBy", "adr:7"),
        ("authoredBy", "person:ada"),
    }
    assert "exponential backoff" in hit["snippet"]
    assert deps.conversation.current(deps.clearance) is not None


async def test_semantic_and_hybrid_run_only_the_legs_they_weigh(deps: UDADeps) -> None:
    script = Script(
        call("semantic_search", query="payment retries"),
        call("hybrid_search", query="payment retries", text_weight=1.0),
        say("done"),
    )
    await agent().run("q", deps=deps, model=script.model)
    semantic, lexical = answer_of(script.seen[1]), answer_of(script.seen[2])
    assert semantic["weights"]["lexical"] == 0.0
    assert lexical["weights"]["semantic"] == 0.0
    assert semantic["hits"]
    assert lexical["hits"]
    for query_id, silent in (("q1", "lexical"), ("q2", "semantic")):
        record = deps.conversation.get(query_id, deps.clearance)
        assert all(legs[silent].rank is None for legs in record.legs.values())


async def test_auto_search_reports_its_strategy_and_why(deps: UDADeps) -> None:
    script = Script(
        call("auto_search", query="why do we retry payments?"),
        call("auto_search", query='"idempotency key"'),
        say("done"),
    )
    await agent().run("q", deps=deps, model=script.model)
    question, quoted = answer_of(script.seen[1]), answer_of(script.seen[2])
    assert question["strategy"] == "semantic"
    assert question["reason"].startswith("auto: a question")
    assert (quoted["strategy"], quoted["text_weight"]) == ("hybrid", 0.8)
    assert "quoted phrase" in quoted["reason"]
    assert quoted["hits"][0]["element_id"] == "adr:7"


# -- clearance comes only from deps ------------------------------------------------------
async def test_a_model_cannot_widen_its_clearance(deps: UDADeps) -> None:
    query = "signing keys rotate monthly; retried payment calls are signed again"
    script = Script(
        call("search", query=query, clearance_scope=["restricted"]),
        call("semantic_search", query=query, clearance="restricted"),
        call("hybrid_search", query=query, sensitivity="restricted"),
        call("auto_search", query=query, filters={"clearance_scope": ["restricted"]}),
        call("search", query=query, filters={"sensitivity": "restricted"}),
        call("search", query=query, limit=25, depth=2),
        call("expand", element_id=SECRET_ID),
        say("done"),
    )
    result = await agent().run("q", deps=deps, model=script.model)
    for turn, field in ((1, "clearance_scope"), (2, "clearance"), (3, "sensitivity")):
        (part,) = returns(script.seen[turn])
        assert part.outcome == "retried"
        assert field in part.model_response_str()
        assert "Extra inputs are not permitted" in part.model_response_str()
    (part,) = returns(script.seen[4])
    assert part.outcome == "retried"
    assert "cannot be set or widened" in part.model_response_str()
    assert answer_of(script.seen[5])["hits"] == []  # a filter only narrows
    assert answer_of(script.seen[6])["hits"]  # the visible documents are still found
    assert answer_of(script.seen[7])["found"] is False
    history = ModelMessagesTypeAdapter.dump_json(result.all_messages()).decode()
    tool_output = "".join(
        p.model_response_str()
        for m in result.all_messages()
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_name != "expand"  # it echoes the id
    )
    assert SECRET_NAME not in history
    assert SECRET_ID not in tool_output
    assert "doc:ledger" not in tool_output  # scoped to project:core, not granted
    assert deps.clearance == ("internal",)
    # Not vacuous: a caller cleared for it finds the restricted document with that query.
    cleared = UDADeps(client=deps.client, clearance_scope=["restricted"])
    found = await search(cleared, SearchArgs(query=query))
    assert SECRET_ID in [h.element_id for h in found.hits]


def test_deps_check_the_clearance_once_at_construction(aclient: uda.AsyncClient) -> None:
    with pytest.raises(UnknownClearanceError, match="secret"):
        UDADeps(client=aclient, clearance_scope=["secret"])
    with pytest.raises(TypeError, match="list of entries"):
        UDADeps(client=aclient, clearance_scope="internal")
    assert UDADeps(client=aclient).clearance == ()  # deny by default: public only


# -- other clients and surfaces ---------------------------------------------------------
def test_a_sync_client_works_from_run_sync(client: uda.Client) -> None:
    client.ingest(ELEMENTS, RELATIONS)
    deps = UDADeps(client=client, clearance_scope=["internal"])
    script = Script(call("search", query="payment retries"), say("done"))
    agent().run_sync("q", deps=deps, model=script.model)
    assert "doc:retries" in [h["element_id"] for h in answer_of(script.seen[1])["hits"]]


async def test_test_model_can_drive_the_toolset(deps: UDADeps) -> None:
    result = await uda_agent(TestModel(call_tools=["auto_search", "list_filter_fields"])).run(
        "anything", deps=deps
    )
    assert "auto_search" in result.output


def test_toolset_selection() -> None:
    assert set(uda_toolset(include=["search", "get_result"]).tools) == {"search", "get_result"}
    with pytest.raises(ValueError, match="ingest"):
        uda_toolset(include=["ingest"])


@pytest.mark.filterwarnings("ignore:State was provided:UserWarning")  # sent on purpose
async def test_ag_ui_app_streams_a_run_and_keeps_the_thread_state(aclient: uda.AsyncClient) -> None:
    script = Script(
        call("auto_search", query="how are payments retried?"),
        say("They are retried three times."),
        call("get_result", query_id="q1", rank=1),
        say("It is the retry policy."),
        call("get_result", query_id="q1", rank=1),
        say("no such search here"),
    )
    app = ag_ui_app(uda_agent(script.model), client=aclient, clearance_scope=["internal"])

    async def run(thread: str, text: str) -> list[dict[str, Any]]:
        body = {
            "threadId": thread,
            "runId": f"run-{len(script.seen)}",
            "state": {"shared": "front-end state"},
            "messages": [{"id": "m1", "role": "user", "content": text}],
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            response = await http.post("/", json=body, headers={"accept": "text/event-stream"})
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return [
            json.loads(line.removeprefix("data: "))
            for line in response.text.splitlines()
            if line.startswith("data: ")
        ]

    events = await run("t1", "How are payments retried?")
    kinds = [e["type"] for e in events]
    assert kinds[0] == "RUN_STARTED"
    assert kinds[-1] == "RUN_FINISHED"
    assert {"TOOL_CALL_START", "TOOL_CALL_RESULT", "TEXT_MESSAGE_CONTENT"} <= set(kinds)
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert "doc:retries" in result["content"]
    assert SECRET_ID not in result["content"]
    again = await run("t1", "Open the first one")  # same thread: q1 is still there
    detail = next(e for e in again if e["type"] == "TOOL_CALL_RESULT")
    assert '"query_id":"q1"' in detail["content"]
    other = await run("t2", "Open the first one")  # another thread: no q1
    retry = next(e for e in other if e["type"] == "TOOL_CALL_RESULT")
    assert "no searches in this conversation yet" in retry["content"]
    assert other[-1]["type"] == "RUN_FINISHED"


# -- the example ------------------------------------------------------------------------
async def test_the_example_agent_answers_with_citations(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("UDA_AGENT_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    spec = importlib.util.spec_from_file_location(
        "agent_example", ROOT / "examples" / "agent_example.py"
    )
    assert spec is not None
    assert spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "agent_example", example)
    spec.loader.exec_module(example)
    answer = await example.answer(path=tmp_path / "store", embedder=embedder)
    assert answer.scripted
    assert "doc:retries" in answer.text
    assert "three times" in answer.text
    assert "adr:7" in answer.text
    assert "doc:keys" not in answer.text
    assert answer.tool_calls[0].startswith("auto_search(")
    assert answer.tool_calls[1].startswith("get_result(")
