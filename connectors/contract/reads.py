"""One search's reads, as the stores see them: when the search began, and what they noticed.

A store that reads from copies (PostgreSQL's hot standbys, `connectors.postgres.replicas`)
must show every search what was acknowledged before the search began, whatever copy answers.
So it needs the moment the search began, not the moment of each read: a freshness check made
after that moment holds for every read of the search, and for every other search begun
before it, so one check serves them all. And when it reads elsewhere than it would have (a
standby that is down or behind, the primary answering instead), the answer is complete but
the caller should hear of it, as of any backend left out.

The planner opens a `read_scope()` per search; stores ask `read_started()` and call
`notice()`. Outside a scope (a store used on its own) each read is its own search.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class ReadNotice:
    """Where a read went instead, and why: `backend` is the copy that was passed over."""

    backend: str
    reason: str


@dataclass(kw_only=True)
class ReadScope:
    """The reads of one search: when it began (`time.monotonic()`) and what stores noticed."""

    started: float
    notices: list[ReadNotice] = field(default_factory=list[ReadNotice])


_SCOPE: ContextVar[ReadScope | None] = ContextVar("uda_read_scope", default=None)


@contextmanager
def read_scope() -> Generator[ReadScope]:
    """Mark the reads made inside (and in tasks started inside) as one search's."""
    scope = ReadScope(started=time.monotonic())
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


def read_started() -> float:
    """When the current search began; outside a search, now."""
    scope = _SCOPE.get()
    return time.monotonic() if scope is None else scope.started


def notice(backend: str, reason: str) -> None:
    """Tell the current search that a read went elsewhere (dropped outside a search).

    The same notice is told once per search, however many reads met it.
    """
    scope = _SCOPE.get()
    if scope is None:
        return
    told = ReadNotice(backend=backend, reason=reason)
    if told not in scope.notices:
        scope.notices.append(told)


__all__ = ["ReadNotice", "ReadScope", "notice", "read_scope", "read_started"]
