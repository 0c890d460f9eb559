"""The agent tools on real embedded backends, driven by pydantic-ai's FunctionModel/TestModel.

No model is ever called over the network (`ALLOW_MODEL_REQUESTS` is off); the scripted
models below make the tool calls a model would, including the wrong ones.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic_ai import Agent
from pydantic_ai import models as ai_models
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel

import uda
from connectors.contract.predicates import Op
from ontology import Decision, Document, Person, Relation, Repository
from uda.agent import TOOLS, ConversationState, UDADeps, ag_ui_app, uda_agent, uda_toolset
from uda.agent.models import (
    ExpandArgs,
    GetResultArgs,
    ListFieldsArgs,
    NoArgs,
    RefineArgs,
    SearchArgs,
)
from uda.agent.state import QueryRecord, QuerySpec, UnknownQueryError
from uda.agent.tools import (
    expand,
    get_result,
    list_element_types,
    list_filter_fields,
    refine_search,
    search,
)
from uda.embedding import Embedder
from uda.errors import UnknownClearanceError, UnknownElementTypeError, UnknownFilterFieldError
from uda.query.filters import parse_filters

ROOT = Path(__file__).resolve().parent.parent
SECRET_ID, SECRET_NAME = "doc:keys", "Payment signing keys"

ELEMENTS = [
    Repository(element_id="repo:payments", name="payments", sensitivity="public"),
    Person(element_id="person:ada", name="Ada Lovelace", sensitivity="public"),
    Decision(
        element_id="adr:7",
        name="Retry payments with idempotency keys",
        text="We retry failed payment calls with an idempotency key per attempt.",
        status="accepted",
        sensitivity="internal",
    ),
    Decision(
        element_id="adr:3",
        name="Retry payments blindly",
        text="Failed payment calls were retried without any key. Superseded by ADR 7.",
        status="superseded",
        sensitivity="internal",
    ),
    Document(
        element_id="doc:retries",
        name="Retry policy",
        text="Failed payment calls are retried three times with exponential backoff.",
        sensitivity="public",
    ),
    Document(
        element_id="doc:ledger",
        name="Core ledger",
        text="The core ledger records every payment retry as a separate entry.",
        sensitivity="internal",
        scope="project:core",
    ),
    Document(
        element_id=SECRET_ID,
        name=SECRET_NAME,
        text="Failed payment calls are retried and signed again; signing keys rotate monthly.",
        sensitivity="restricted",
    ),
]
RELATIONS = [
    Relation(source_id="doc:retries", relation="partOf", target_id="repo:payments"),
    Relation(source_id="doc:retries", relation="governedBy", target_id="adr:7"),
    Relation(source_id="doc:retries", relation="authoredBy", target_id="person:ada"),
    Relation(source_id="adr:7", relation="supersedes", target_id="adr:3"),
    Relation(source_id=SECRET_ID, relation="governedBy", target_id="adr:7"),
]


@pytest.fixture(autouse=True)
def _no_real_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ai_models, "ALLOW_MODEL_REQUESTS", False)


@pytest.fixture
async def aclient(tmp_path: Path, embedder: Embedder) -> AsyncIterator[uda.AsyncClient]:
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await client.ingest(ELEMENTS, RELATIONS)
        yield client


@pytest.fixture
def deps(aclient: uda.AsyncClient) -> UDADeps:
    return UDADeps(client=aclient, clearance_scope=["internal"])


# -- a scripted model -------------------------------------------------------------------
Step = ModelResponse | Callable[[list[ModelMessage]], ModelResponse]


def call(tool: str, **args: Any) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(tool, args)])


def say(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)])


class Script:
    """A FunctionModel that answers with the given steps in order, recording what it saw."""

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.seen: list[list[ModelMessage]] = []

    def _next(self, messages: list[ModelMessage]) -> ModelResponse:
        self.seen.append(list(messages))
        step = self.steps[len(self.seen) - 1]
        return step(messages) if callable(step) else step

    def function(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return self._next(messages)

    async def stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
        for index, part in enumerate(self._next(messages).parts):
            if isinstance(part, ToolCallPart):
                yield {index: DeltaToolCall(part.tool_name, part.args_as_json_str())}
            elif isinstance(part, TextPart):
                yield part.content

    @property
    def model(self) -> FunctionModel:
        return FunctionModel(self.function, stream_function=self.stream)


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]


def answer_of(messages: list[ModelMessage]) -> dict[str, Any]:
    (part,) = returns(messages)
    assert part.outcome == "success", part.model_response_str()
    return json.loads(part.model_response_str())


def agent() -> Agent[UDADeps, str]:
    return Agent(deps_type=UDADeps, toolsets=[uda_toolset()])


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


# -- mistakes come back as retries with guidance ----------------------------------------
async def test_invalid_arguments_are_retried_with_the_validation_message(deps: UDADeps) -> None:
    script = Script(
        call("search", limit=0),
        call("get_result", query_id="q9", rank=1),
        call("search", query="payment retries", element_types=["Pamphlet"]),
        call("search", query="payment retries"),
        say("done"),
    )
    await agent().run("q", deps=deps, model=script.model)
    invalid = returns(script.seen[1])[0]
    assert invalid.outcome == "retried"
    text = invalid.model_response_str()
    assert "query" in text
    assert "Field required" in text
    assert "greater than or equal to 1" in text
    unknown_query = returns(script.seen[2])[0]
    assert unknown_query.outcome == "retried"
    assert "no searches in this conversation yet" in unknown_query.model_response_str()
    bad_type = returns(script.seen[3])[0].model_response_str()
    assert "'Pamphlet' is not a searchable element type" in bad_type
    assert "Document" in bad_type
    assert answer_of(script.seen[4])["hits"]


async def test_unknown_filter_field_gets_a_suggestion_not_an_empty_result(deps: UDADeps) -> None:
    script = Script(
        call("search", query="payment retries", filters={"stauts": "accepted"}),
        call("search", query="payment retries", filters={"status": "accepted"}),
        say("done"),
    )
    await agent().run("q", deps=deps, model=script.model)
    (part,) = returns(script.seen[1])
    assert part.outcome == "retried"
    guidance = part.model_response_str()
    assert "no field named 'stauts'; did you mean 'status'?" in guidance
    assert "list_filter_fields" in guidance
    assert [h["element_id"] for h in answer_of(script.seen[2])["hits"]] == ["adr:7"]


async def test_bad_operator_and_operand_are_explained(deps: UDADeps) -> None:
    with pytest.raises(Exception, match="status"):
        SearchArgs.model_validate({"query": "x", "filters": {"status": {"$regex": "acc"}}})
    # `$like` is an operator now, but only for strings: on an enumeration it is explained.
    with pytest.raises(UnknownFilterFieldError, match=r"\$like compares strings"):
        await search(deps, SearchArgs(query="x", filters={"status": {"$like": "acc%"}}))
    with pytest.raises(UnknownFilterFieldError, match="expected one of"):
        await search(deps, SearchArgs(query="x", filters={"status": "maybe"}))


# -- state across calls -----------------------------------------------------------------
async def test_state_lets_an_agent_build_a_query_in_steps(deps: UDADeps) -> None:
    def open_best(messages: list[ModelMessage]) -> ModelResponse:
        return call("get_result", query_id=answer_of(messages)["query_id"], rank=1)

    script = Script(
        call("auto_search", query="payment retry decisions"),
        call("refine_search", add_filters={"element_type": "Decision"}),
        call("refine_search", query_id="q2", add_filters={"status": "superseded"}),
        call("refine_search", query_id="q3", remove_filters=["status"], limit=1),
        open_best,
        call("expand", element_id="adr:7"),
        call("expand", element_id="person:ada"),
        call("list_queries"),
        say("done"),
    )
    await agent().run("q", deps=deps, model=script.model)
    first, decisions, superseded, narrowed = (answer_of(script.seen[i]) for i in (1, 2, 3, 4))
    assert decisions["refined_from"] == "q1"
    assert decisions["query"] == first["query"]
    assert {h["element_type"] for h in decisions["hits"]} == {"Decision"}
    assert [h["element_id"] for h in superseded["hits"]] == ["adr:3"]
    assert superseded["filters"] == {"element_type": "Decision", "status": "superseded"}
    assert narrowed["filters"] == {"element_type": "Decision"}
    assert len(narrowed["hits"]) == 1
    detail = answer_of(script.seen[5])
    assert detail["query_id"] == "q4"
    assert detail["element_id"] == narrowed["hits"][0]["element_id"]
    assert detail["properties"]["status"] in {"accepted", "superseded"}
    assert set(detail["legs"]) == {"semantic", "lexical", "centrality"}
    adr = answer_of(script.seen[6])
    assert adr["found"] is True
    assert {(c["relation"], c["element_id"]) for c in adr["context"]} >= {
        ("supersedes", "adr:3"),
        ("governedBy", "doc:retries"),
    }
    assert SECRET_ID not in json.dumps(adr)
    ada = answer_of(script.seen[7])
    assert ada["element_type"] == "Person"
    assert ada["note"].startswith("a context-only element")
    history = answer_of(script.seen[8])
    assert history["current"] == "q4"
    assert [q["refined_from"] for q in history["queries"]] == [None, "q1", "q2", "q3"]

    # The next run of the same conversation refers back to the first one's searches.
    later = Script(call("get_result", query_id="q2", rank=1), say("done"))
    await agent().run("and the first decision?", deps=deps, model=later.model)
    assert answer_of(later.seen[1])["element_type"] == "Decision"


async def test_refine_names_the_filters_it_can_drop(deps: UDADeps) -> None:
    await search(deps, SearchArgs(query="payment retries", filters={"status": "accepted"}))
    with pytest.raises(UnknownFilterFieldError, match="q1 has no filters named 'sttus'; its"):
        await refine_search(deps, RefineArgs(remove_filters=["sttus"]))


async def test_a_conversation_never_serves_results_to_another_clearance(
    aclient: uda.AsyncClient,
) -> None:
    shared = ConversationState()
    internal = UDADeps(client=aclient, clearance_scope=["internal"], conversation=shared)
    public = UDADeps(client=aclient, clearance_scope=["public"], conversation=shared)
    answer = await search(internal, SearchArgs(query="retry decisions"))
    assert any(h.element_type == "Decision" for h in answer.hits)
    with pytest.raises(UnknownQueryError):
        await get_result(public, GetResultArgs(query_id=answer.query_id, rank=1))
    assert (await expand(public, ExpandArgs(element_id="adr:7"))).found is False


def test_state_forgets_the_oldest_searches() -> None:
    state = ConversationState(max_queries=2)
    spec = QuerySpec(
        query="q", limit=1, filters={}, element_types=None, depth=0, strategy="default"
    )
    for _ in range(3):
        state.add(
            QueryRecord(
                query_id=state.next_id(),
                spec=spec,
                clearance=("internal",),
                weights={},
                results=(),
                legs={},
            )
        )
    assert [r.query_id for r in state.records(("internal",))] == ["q2", "q3"]
    with pytest.raises(UnknownQueryError, match="known: q2, q3"):
        state.get("q1", ("internal",))
    assert state.get(None, ("internal",)).query_id == "q3"
    assert state.current(("public",)) is None


# -- discovery --------------------------------------------------------------------------
async def test_filter_fields_come_with_types_values_and_operators(deps: UDADeps) -> None:
    answer = await list_filter_fields(deps, ListFieldsArgs())
    fields = {f.name: f for f in answer.fields}
    assert fields["status"].type == "enum"
    assert "accepted" in (fields["status"].values or [])
    assert fields["status"].operators == ["$eq", "$ne", "$in", "$nin", "$exists"]
    assert fields["status"].element_types == ["Decision"]
    assert fields["timestamp"].type.startswith("datetime")
    assert "$gte" in fields["timestamp"].operators
    assert fields["confidence"].type == "number"
    assert "Decision" in (fields["element_type"].values or [])
    assert "text" not in fields
    assert "$gte" in answer.syntax
    decision = {
        f.name
        for f in (await list_filter_fields(deps, ListFieldsArgs(element_type="Decision"))).fields
    }
    assert {"status", "decided_on", "element_type"} <= decision
    assert "email" not in decision
    with pytest.raises(UnknownElementTypeError, match="did you mean 'Decision'"):
        await list_filter_fields(deps, ListFieldsArgs(element_type="Decisoin"))


_SAMPLES = {"enum": None, "boolean": True, "integer": 3, "number": 0.5, "string": "x"}


async def test_every_listed_field_and_operator_is_accepted_by_the_parser(deps: UDADeps) -> None:
    for field in (await list_filter_fields(deps, ListFieldsArgs())).fields:
        sample: Any = (
            (field.values or ["x"])[0]
            if field.type == "enum"
            else _SAMPLES.get(field.type, "2025-01-01")
        )
        for op in field.operators:
            operand = {
                Op.IN: [sample],
                Op.NIN: [sample],
                Op.BETWEEN: [sample, sample],
                Op.EXISTS: True,
            }.get(Op(op), sample)
            assert parse_filters({field.name: {op: operand}}), (field.name, op)


async def test_element_types_and_relations_are_listed(deps: UDADeps) -> None:
    types = {t.name: t for t in (await list_element_types(deps, NoArgs())).element_types}
    assert types["Document"].searchable
    assert not types["Person"].searchable
    assert "status" in types["Decision"].fields
    assert "supersedes" in types["Decision"].relations_out
    script = Script(call("list_relations"), say("done"))
    await agent().run("q", deps=deps, model=script.model)
    relations = {r["name"]: r for r in answer_of(script.seen[1])["relations"]}
    assert relations["governedBy"]["targets"] == ["Decision"]


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


# -- filter trees --------------------------------------------------------------------------
async def test_search_takes_a_filter_tree_with_relation_paths(deps: UDADeps) -> None:
    tree = {"$or": [{"partOf.name": "payments"}, {"~supersedes.status": "accepted"}]}
    answer = await search(deps, SearchArgs(query="payment retries", where=tree))
    assert sorted(h.element_id for h in answer.hits) == ["adr:3", "doc:retries"]
    assert answer.where == tree
    # ANDed with the flat filters; a refinement keeps the tree unless it replaces it.
    narrowed = await search(
        deps, SearchArgs(query="payment retries", where=tree, filters={"element_type": "Decision"})
    )
    assert [h.element_id for h in narrowed.hits] == ["adr:3"]
    kept = await refine_search(deps, RefineArgs(query_id=answer.query_id, limit=1))
    assert kept.where == tree
    dropped = await refine_search(deps, RefineArgs(query_id=answer.query_id, where={}))
    assert dropped.where is None
    assert len(dropped.hits) > len(answer.hits)


async def test_a_bad_tree_is_explained_with_its_path(deps: UDADeps) -> None:
    with pytest.raises(UnknownFilterFieldError) as caught:
        await search(deps, SearchArgs(query="x", where={"$or": [{"partOf.nmae": "payments"}]}))
    assert caught.value.field == "context_filters.$or[0].partOf.nmae"
    assert "did you mean 'name'" in str(caught.value)
