"""The UDA tools as a pydantic-ai toolset.

    Agent(model, deps_type=UDADeps, toolsets=[uda_toolset()])


Each tool takes one Pydantic argument model, so the model sees that model's JSON Schema
(pydantic-ai unwraps a single model-like parameter) and pydantic-ai validates every call
against it: an invalid call — a missing query, an invented `clearance_scope` field — comes
back to the model as a retry carrying the validation message. A `UserError` from UDA (an
unknown filter field, element type or query id) becomes a `ModelRetry` with UDA's message,
which names the field and suggests the fix. Backend failures are not the model's to fix
and propagate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.models import Model
from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import FunctionToolset

from uda.agent.catalog import INSTRUCTIONS, TOOLS, ToolSpec
from uda.agent.deps import UDADeps
from uda.errors import UserError

DEFAULT_RETRIES = 3


def _agent_tool(spec: ToolSpec[Any, Any]) -> Tool[UDADeps]:
    async def call(ctx: RunContext[UDADeps], args: BaseModel) -> BaseModel:
        try:
            return await spec.run(ctx.deps, args)
        except UserError as exc:
            raise ModelRetry(str(exc)) from exc

    # pydantic-ai builds the schema and the validator from the annotations; one generic
    # wrapper serves every tool once they name this tool's own argument and answer models.
    call.__annotations__ = {
        "ctx": RunContext[UDADeps],
        "args": spec.args_model,
        "return": spec.result_model,
    }
    call.__name__ = call.__qualname__ = spec.name
    return Tool(call, takes_ctx=True, name=spec.name, description=spec.description)


def uda_toolset(
    *,
    include: Sequence[str] | None = None,
    max_retries: int = DEFAULT_RETRIES,
    instructions: bool = True,
) -> FunctionToolset[UDADeps]:
    """The UDA tools for a pydantic-ai agent whose deps are `UDADeps`.

    Args:
        include: only these tools, by name (default: all of them; see `uda.agent.TOOLS`).
        max_retries: how often the model may correct one tool's arguments in a run.
        instructions: add the short usage instructions to the agent's system prompt.

    Raises:
        ValueError: `include` names a tool that does not exist.
    """
    names = [spec.name for spec in TOOLS]
    unknown = sorted(set(include or ()) - set(names))
    if unknown:
        raise ValueError(f"no UDA tools named {unknown}; tools: {', '.join(names)}")
    chosen = [spec for spec in TOOLS if include is None or spec.name in include]
    return FunctionToolset[UDADeps](
        [_agent_tool(spec) for spec in chosen],
        max_retries=max_retries,
        id="uda",
        instructions=INSTRUCTIONS if instructions else None,
    )


def uda_agent(model: Model | str | None = None, **agent_options: Any) -> Agent[UDADeps, str]:
    """An agent with the UDA toolset and `UDADeps` as its deps type.

    Args:
        model: a pydantic-ai model or model name (`"openai:gpt-4o"`); None to give it per run.
        **agent_options: passed to `pydantic_ai.Agent` (instructions, retries, ...).
    """
    toolsets = [uda_toolset(), *agent_options.pop("toolsets", ())]
    return Agent(model, deps_type=UDADeps, output_type=str, toolsets=toolsets, **agent_options)
