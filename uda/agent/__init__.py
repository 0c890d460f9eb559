"""UDA as agent tools: a pydantic-ai toolset, an MCP server and an AG-UI app over one catalogue.

    from pydantic_ai import Agent
    from uda.agent import UDADeps, uda_toolset

    agent = Agent("openai:gpt-4o", deps_type=UDADeps, toolsets=[uda_toolset()])
    deps = UDADeps(client=client, clearance_scope=["internal"])  # the clearance is set here
    result = await agent.run("Why do we retry payments?", deps=deps)

The caller's clearance comes only from `UDADeps` (or the MCP server's command line); no
tool argument can carry it. Names load lazily, so that `uda mcp`'s parser can be built
without importing pydantic-ai or mcp (the `agent` extra).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from uda.agent.ag_ui import ag_ui_app
    from uda.agent.catalog import INSTRUCTIONS, TOOLS, ToolSpec
    from uda.agent.deps import AsyncSearcher, Searcher, SyncSearcher, UDADeps
    from uda.agent.mcp_server import build_mcp_server
    from uda.agent.router import Route, route_query
    from uda.agent.state import ConversationState, QueryRecord, UnknownQueryError
    from uda.agent.toolset import uda_agent, uda_toolset

_LAZY = {
    "ag_ui_app": "uda.agent.ag_ui",
    "INSTRUCTIONS": "uda.agent.catalog",
    "TOOLS": "uda.agent.catalog",
    "ToolSpec": "uda.agent.catalog",
    "AsyncSearcher": "uda.agent.deps",
    "Searcher": "uda.agent.deps",
    "SyncSearcher": "uda.agent.deps",
    "UDADeps": "uda.agent.deps",
    "build_mcp_server": "uda.agent.mcp_server",
    "Route": "uda.agent.router",
    "route_query": "uda.agent.router",
    "ConversationState": "uda.agent.state",
    "QueryRecord": "uda.agent.state",
    "UnknownQueryError": "uda.agent.state",
    "uda_agent": "uda.agent.toolset",
    "uda_toolset": "uda.agent.toolset",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'uda.agent' has no attribute {name!r}")
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in {"pydantic_ai", "mcp", "starlette"}:
            raise ModuleNotFoundError(
                f"uda.agent.{name} needs {exc.name}: pip install 'uda-query[agent]'",
                name=exc.name,
            ) from exc
        raise


__all__ = [
    "INSTRUCTIONS",
    "TOOLS",
    "AsyncSearcher",
    "ConversationState",
    "QueryRecord",
    "Route",
    "Searcher",
    "SyncSearcher",
    "ToolSpec",
    "UDADeps",
    "UnknownQueryError",
    "ag_ui_app",
    "build_mcp_server",
    "route_query",
    "uda_agent",
    "uda_toolset",
]
