"""Concurrent backend calls that never outlive a failure.

`asyncio.gather` returns at the first error while its siblings still run: a caller that then
closes the client would pull connections from under them. Every concurrent fan-out of the
read path (the planner's phases, element lookup, relation paths) goes through `together`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


async def together(calls: Sequence[Coroutine[Any, Any, T]]) -> list[T]:
    """Run the calls concurrently; if one fails, cancel and await the others, then raise."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    await all_or_none(tasks)
    return [task.result() for task in tasks]


async def all_or_none(tasks: Sequence[asyncio.Future[Any]]) -> None:
    """Wait for every task; if one fails, cancel and await the others, then raise."""
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
