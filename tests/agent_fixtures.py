"""The shared ground of the agent tool tests (tests/test_agent.py, test_agent_*.py).

A small corpus with one restricted document, a scripted pydantic-ai model that makes the tool
calls a model would, and helpers that read what the tools returned. `_no_real_models`
(autouse: no model is ever called over the network), `aclient` (an embedded async client
holding the corpus) and `deps` (that client at internal clearance) are function-scoped
fixtures: a test module imports all three (`deps` asks for `aclient` by name) and lists them in
its `__all__`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import models as ai_models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

import uda
from ontology import Decision, Document, Person, Relation, Repository
from uda.agent import UDADeps, uda_toolset
from uda.embedding import Embedder

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
