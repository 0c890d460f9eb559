"""Retries of transient backend failures: exponential backoff with full jitter, within a deadline.

A connection reset, a server restarting a pooled connection, a serialization failure or a
503 from a server often passes on the next try. Connectors say which failures are of that
kind by raising `TransientBackendError` (they know their drivers; the planner does not).
Everything else fails at once: retrying a refused connection or a syntax error only spends
the deadline. Every call retried here is a read, or a write that is idempotent.

Full jitter (a delay drawn uniformly from zero to the exponential bound) spreads the retries
of many clients that failed together, so that they do not come back together
(docs/adr/0026-deadlines-and-degradation.md).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from uda.errors import TransientBackendError

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Retries:
    """How often and how patiently a transient failure is tried again.

    Attributes:
        attempts: calls in all, the first included (1: never retried).
        base_s: the bound of the first delay; each later one doubles it.
        cap_s: no delay is longer than this.
    """

    attempts: int = 3
    base_s: float = 0.05
    cap_s: float = 0.5

    def delay(self, retry: int, draw: Callable[[float, float], float] = random.uniform) -> float:
        """How long to wait before retry number `retry` (1 for the first): full jitter."""
        return draw(0.0, min(self.cap_s, self.base_s * 2 ** (retry - 1)))


NO_RETRIES = Retries(attempts=1)


async def retrying(
    call: Callable[[], Awaitable[T]],
    retries: Retries,
    *,
    until: float | None = None,
    backend: str = "",
) -> T:
    """`call()`'s answer, calling it again after a transient failure.

    Args:
        call: makes one attempt (a new awaitable each time).
        retries: the policy.
        until: a `time.monotonic()` deadline; no retry is started whose delay reaches it.
        backend: named in the log line of a retry.

    Raises:
        TransientBackendError: the last attempt's, when the attempts or the time ran out.
        Exception: any other failure, at once.
    """
    retry = 0
    while True:
        try:
            return await call()
        except TransientBackendError as exc:
            retry += 1
            delay = retries.delay(retry)
            if retry >= retries.attempts or (
                until is not None and time.monotonic() + delay >= until
            ):
                raise
            log.info("%s: %s; retry %d in %.0f ms", backend, exc, retry, delay * 1000)
            await asyncio.sleep(delay)


__all__ = ["NO_RETRIES", "Retries", "retrying"]
