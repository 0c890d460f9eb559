"""Readiness: one cheap call per connector, concurrently, each under a deadline.

A readiness probe runs every few seconds on every replica, so it must not be `check()` (which
reads whole stores) nor `stats()` (counts are not the prober's business, and they would tell
an unauthenticated caller how much data there is). Each connector answers the smallest
question its capability offers; the answer itself is thrown away, only success and latency are
reported, and a failure reports the exception's type, never its message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from connectors.base import (
    Connector,
    GraphCapable,
    RelationalCapable,
    TextCapable,
    VectorCapable,
)
from connectors.contract.records import SearchFilter
from ontology import Sensitivity

log = logging.getLogger("uda.http")

_PROBE_ID = "uda:readiness-probe"
# Permissive on purpose: a filter that matches nothing sends some stores down their slow
# filtered path, while one nearest chunk is the cheapest question a vector index answers.
_ANY = SearchFilter(max_sensitivity_rank=len(Sensitivity) - 1, all_projects=True)


@dataclass(frozen=True, kw_only=True)
class BackendStatus:
    """How one connector answered its probe."""

    name: str
    capabilities: tuple[str, ...]
    ok: bool
    latency_ms: float
    error: str | None = None


def capabilities(connector: Connector) -> tuple[str, ...]:
    """The capability names a connector declares."""
    pairs = (
        ("relational", RelationalCapable),
        ("vector", VectorCapable),
        ("text", TextCapable),
        ("graph", GraphCapable),
    )
    return tuple(name for name, cls in pairs if isinstance(connector, cls))


async def _ask(connector: Connector, dimension: int) -> None:
    # One round trip to the backend; which capability answers does not matter, a connector
    # with several shares one connection (pool) between them.
    if isinstance(connector, RelationalCapable):
        await connector.last_hlc()
    elif isinstance(connector, GraphCapable):
        await connector.expand([_PROBE_ID], 1, None, None)
    elif isinstance(connector, TextCapable):
        await connector.text_search("ready", 1, _ANY)
    elif isinstance(connector, VectorCapable):
        await connector.vector_search([1.0] + [0.0] * (dimension - 1), 1, _ANY)


async def probe(connector: Connector, dimension: int, timeout: float) -> BackendStatus:
    """Ask one connector one cheap question, within `timeout` seconds."""
    started = time.perf_counter()
    error: str | None = None
    try:
        await asyncio.wait_for(_ask(connector, dimension), timeout)
    except TimeoutError:
        error = f"no answer within {timeout:g} s"
    except Exception as exc:  # any failure means "not ready"; logged in full
        log.warning("readiness: %s failed", connector.name, exc_info=exc)
        error = type(exc).__name__
    return BackendStatus(
        name=connector.name,
        capabilities=capabilities(connector),
        ok=error is None,
        latency_ms=round((time.perf_counter() - started) * 1000, 3),
        error=error,
    )


async def probe_all(
    connectors: Sequence[Connector], dimension: int, timeout: float
) -> list[BackendStatus]:
    """Probe every connector concurrently."""
    return list(await asyncio.gather(*(probe(c, dimension, timeout) for c in connectors)))
