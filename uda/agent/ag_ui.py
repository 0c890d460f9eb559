"""An ASGI app that serves a UDA agent to chat front ends over AG-UI (pydantic-ai's adapter).

Each AG-UI thread is one conversation: its `ConversationState` (query ids, earlier
results) is kept between runs of the thread, so "refine q2" works across turns. The
clearance is the app's (or what `clearance_for` derives from the request, for example from
authentication) — never from the request body, which the client controls. State is keyed
by thread and clearance together: a thread id guessed by another caller with another
clearance finds nothing.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from uda.agent.deps import Searcher, UDADeps
from uda.agent.state import ConversationState

if TYPE_CHECKING:
    from pydantic_ai.agent import AbstractAgent
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

ClearanceFor = Callable[["Request"], Awaitable[Sequence[str]]]


class _Conversations:
    """The most recent conversations' states, least recently used forgotten first."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._states: OrderedDict[tuple[str, tuple[str, ...]], ConversationState] = OrderedDict()

    def get(self, thread_id: str | None, clearance: tuple[str, ...]) -> ConversationState:
        if not thread_id:
            return ConversationState()
        key = (thread_id, clearance)
        state = self._states.pop(key, None) or ConversationState()
        self._states[key] = state
        while len(self._states) > self._limit:
            self._states.popitem(last=False)
        return state


def _thread_id(body: bytes) -> str | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None  # the adapter rejects the body itself, with a proper error
    if not isinstance(data, dict):
        return None
    value = cast("dict[str, object]", data).get("threadId")
    return value if isinstance(value, str) else None


def ag_ui_app(
    agent: AbstractAgent[UDADeps, Any],
    *,
    client: Searcher,
    clearance_scope: Sequence[str] = ("public",),
    clearance_for: ClearanceFor | None = None,
    max_conversations: int = 1000,
    path: str = "/",
) -> Starlette:
    """An ASGI app that runs `agent` for AG-UI clients (POST `path`, events as SSE).

    Args:
        agent: an agent whose deps are `UDADeps` (see `uda.agent.uda_agent`).
        client: the UDA client every run searches with.
        clearance_scope: the clearance of every run, unless `clearance_for` is given.
        clearance_for: derives a request's clearance (for example from its
            authentication); it replaces `clearance_scope`.
        max_conversations: threads whose state is kept; older ones start afresh.
        path: the route that accepts runs.

    Raises:
        UnknownClearanceError: `clearance_scope` is not valid.
    """
    from pydantic_ai.ui.ag_ui import AGUIAdapter
    from starlette.applications import Starlette
    from starlette.routing import Route

    fixed = UDADeps(client=client, clearance_scope=clearance_scope).clearance
    conversations = _Conversations(max_conversations)

    async def run(request: Request) -> Response:
        clearance = fixed if clearance_for is None else tuple(await clearance_for(request))
        # The body is read here and again by the adapter; Starlette caches it.
        state = conversations.get(_thread_id(await request.body()), clearance)
        deps = UDADeps(client=client, clearance_scope=clearance, conversation=state)
        return await AGUIAdapter[UDADeps, Any].dispatch_request(request, agent=agent, deps=deps)

    return Starlette(routes=[Route(path, run, methods=["POST"])])
