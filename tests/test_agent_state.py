"""The agent tools' conversation state: searches built in steps, referred back to by id,
refined, forgotten when old, and never served to another clearance.

Scripted models and the corpus are tests/agent_fixtures.py's.
"""

from __future__ import annotations

import json

import pytest
from agent_fixtures import (
    SECRET_ID,
    Script,
    _no_real_models,
    aclient,
    agent,
    answer_of,
    call,
    deps,
    say,
)
from pydantic_ai.messages import ModelMessage, ModelResponse

import uda
from uda.agent import ConversationState, UDADeps
from uda.agent.models import ExpandArgs, GetResultArgs, RefineArgs, SearchArgs
from uda.agent.state import QueryRecord, QuerySpec, UnknownQueryError
from uda.agent.tools import expand, get_result, refine_search, search
from uda.errors import UnknownFilterFieldError

__all__ = ["_no_real_models", "aclient", "deps"]  # fixtures


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
    assert set(detail["legs"]) == {"semantic", "lexical", "centrality", "entity"}
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
