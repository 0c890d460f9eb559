"""An agent answers a question through the UDA tools over a small ingested corpus.

    python examples/agent_example.py "How are failed payments retried?"

With `UDA_AGENT_MODEL` set to a pydantic-ai model name (`openai:gpt-4o-mini`,
`anthropic:claude-sonnet-4-5`, ...), or with `OPENAI_API_KEY` set, a real model drives the
tools (install its provider: `pip install "pydantic-ai-slim[openai]"`). Without either, a
scripted stand-in (pydantic-ai's `FunctionModel`) drives them the way a model would —
search, open the best result, answer from it — and the output says so.

The caller here is cleared for `internal`: the restricted signing-key document never
reaches the agent, whatever it asks for.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, infer_model
from pydantic_ai.models.function import AgentInfo, FunctionModel

import uda
from ontology import Decision, Document, Person, Relation, Repository
from uda.agent import UDADeps, uda_toolset

QUESTION = "How are failed payment calls retried?"
CLEARANCE = ["internal"]

ELEMENTS = [
    Repository(element_id="repo:payments", name="payments", sensitivity="public"),
    Person(element_id="person:ada", name="Ada Lovelace", sensitivity="public"),
    Decision(
        element_id="adr:7",
        name="Retry payments with idempotency keys",
        text="We retry failed payment calls with an idempotency key per attempt, so that a "
        "retried call never charges twice.",
        status="accepted",
        sensitivity="internal",
    ),
    Document(
        element_id="doc:retries",
        name="Retry policy",
        text="Failed payment calls are retried three times with exponential backoff, "
        "starting at 200 ms. Timeouts count as failures.",
        sensitivity="public",
    ),
    Document(
        element_id="doc:keys",
        name="Payment signing keys",
        text="Payment signing keys rotate monthly; retried payment calls are signed again.",
        sensitivity="restricted",
    ),
]
RELATIONS = [
    Relation(source_id="doc:retries", relation="partOf", target_id="repo:payments"),
    Relation(source_id="doc:retries", relation="governedBy", target_id="adr:7"),
    Relation(source_id="doc:retries", relation="authoredBy", target_id="person:ada"),
]


@dataclass(frozen=True, kw_only=True)
class Answer:
    """What the agent said, which model said it, and the tools it called."""

    text: str
    model: str
    scripted: bool
    tool_calls: list[str]


def _last_return(messages: list[ModelMessage]) -> dict[str, Any]:
    for part in messages[-1].parts:
        if isinstance(part, ToolReturnPart):
            return json.loads(part.model_response_str())
    return {}


def _question(messages: list[ModelMessage]) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return QUESTION


def scripted_turn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Stand in for a model: search, open the best hit, then answer from it with citations."""
    calls = sum(isinstance(p, ToolCallPart) for m in messages for p in m.parts)
    if calls == 0:
        return ModelResponse(parts=[ToolCallPart("auto_search", {"query": _question(messages)})])
    data = _last_return(messages)
    if calls == 1:
        if not data.get("hits"):
            return ModelResponse(parts=[TextPart("Nothing I may see answers that.")])
        args = {"query_id": data["query_id"], "rank": 1}
        return ModelResponse(parts=[ToolCallPart("get_result", args)])
    context = [
        f"{node['relation']} {node['name']} ({node['element_id']})" for node in data["context"]
    ]
    text = f"According to {data['name']} ({data['element_id']}): {data['snippet']}" + (
        f" Context: {'; '.join(context)}." if context else ""
    )
    return ModelResponse(parts=[TextPart(text)])


def pick_model() -> tuple[Model | str, str, bool]:
    """A real model if one is configured and its provider installed, else the scripted one."""
    name = os.environ.get("UDA_AGENT_MODEL") or (
        "openai:gpt-4o-mini" if os.environ.get("OPENAI_API_KEY") else None
    )
    if name is not None:
        try:
            return infer_model(name), name, False
        except (ImportError, UserError) as exc:  # provider not installed, or an unknown name
            print(f"cannot use {name}: {exc}\nfalling back to the scripted model", file=sys.stderr)
    return FunctionModel(scripted_turn), "scripted FunctionModel (no usable model configured)", True


async def answer(question: str = QUESTION, *, path: str | Path, **connect: Any) -> Answer:
    """Ingest the corpus under `path`, then let the agent answer `question`."""
    model, label, scripted = pick_model()
    agent = Agent(model, deps_type=UDADeps, toolsets=[uda_toolset()])
    async with uda.aconnect(path=path, **connect) as client:
        await client.ingest(ELEMENTS, RELATIONS)
        deps = UDADeps(client=client, clearance_scope=CLEARANCE)
        result = await agent.run(question, deps=deps)
    calls = [
        f"{part.tool_name}({part.args_as_json_str()})"
        for message in result.all_messages()
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    ]
    return Answer(text=result.output, model=label, scripted=scripted, tool_calls=calls)


def main(argv: list[str]) -> int:
    """Answer the question given on the command line (or the default one)."""
    question = " ".join(argv) or QUESTION
    with tempfile.TemporaryDirectory() as folder:
        result = asyncio.run(answer(question, path=folder))
    print(f"model: {result.model}")
    if result.scripted:
        print("(set UDA_AGENT_MODEL or OPENAI_API_KEY to let a real model drive the tools)")
    print(f"clearance: {', '.join(CLEARANCE)}")
    print("tool calls:\n  " + "\n  ".join(result.tool_calls))
    print(f"\nQ: {question}\nA: {result.text}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
