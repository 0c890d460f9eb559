"""The siloed alternative: a client that talks to each store on its own, on UDA's backends.

What an application does without a planner: ask the vector store for the nearest chunks
(no pushdown: the store does not know the caller), then the graph store once per hit for its
neighbourhood (the N+1 pattern), then read every element's metadata from the system of
record (one batched read: the generous version) and filter by clearance in Python. It has no
lexical leg and no fusion; it does the same vector and graph work as a UDA search of the same
limit, pool and depth, on the same stores and data (its own connector instances, opened
from the same profile).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from connectors.base import Connector, GraphCapable, RelationalCapable, VectorCapable
from connectors.contract.records import SearchFilter
from connectors.registry import connector_class
from ontology import Sensitivity
from uda.config import Profile
from uda.query.clearance import Clearance

_LEVELS = list(Sensitivity)
_EVERYTHING = SearchFilter(max_sensitivity_rank=len(_LEVELS) - 1, all_projects=True)


@dataclass(frozen=True, kw_only=True)
class SiloedHit:
    """One result of the siloed client."""

    element_id: str
    score: float
    context: tuple[str, ...]


class SiloedClient:
    """Vector store, then graph store per hit, then Python filtering (see module doc)."""

    def __init__(self, profile: Profile) -> None:
        self._connectors: list[Connector] = [
            connector_class(spec.name)(**dict(spec.options)) for spec in profile.connectors
        ]
        self._vector = next(c for c in self._connectors if isinstance(c, VectorCapable))
        self._graph = next((c for c in self._connectors if isinstance(c, GraphCapable)), None)
        self._sor = next(c for c in self._connectors if isinstance(c, RelationalCapable))

    async def open(self) -> None:
        """Connect every store."""
        await asyncio.gather(*(c.connect() for c in self._connectors))

    async def close(self) -> None:
        """Close every store."""
        await asyncio.gather(*(c.close() for c in self._connectors))

    async def search(
        self,
        vector: Sequence[float],
        *,
        limit: int = 10,
        depth: int = 1,
        clearance: Clearance | None = None,
        pool: int | None = None,
    ) -> tuple[list[SiloedHit], dict[str, float]]:
        """Search; returns the hits and the time spent per store (ms)."""
        clearance = clearance or Clearance.parse([])
        pool = pool or max(10 * limit, 50)
        timings: dict[str, float] = {}
        started = time.perf_counter()
        hits = await self._vector.vector_search(list(vector), pool, _EVERYTHING)
        best: dict[str, float] = {}
        for hit in hits:
            if hit.score > best.get(hit.element_id, float("-inf")):
                best[hit.element_id] = hit.score
        timings["vector"] = (time.perf_counter() - started) * 1000

        started = time.perf_counter()
        neighbours: dict[str, set[str]] = {}
        if self._graph is not None and depth > 0:
            for element_id in best:  # one call per hit: what a store-by-store client does
                sub = await self._graph.expand([element_id], depth, None, None)
                neighbours[element_id] = {
                    n for e in sub.edges for n in (e.source_id, e.target_id)
                } - {element_id}
        timings["graph"] = (time.perf_counter() - started) * 1000

        started = time.perf_counter()
        wanted = sorted(set(best) | {n for ns in neighbours.values() for n in ns})
        states = await self._sor.fetch(wanted, None)
        visible = {
            eid
            for eid, s in states.items()
            if not s.tombstone and clearance.allows(_LEVELS[s.sensitivity_rank], s.scope)
        }
        ordered = sorted((e for e in best if e in visible), key=lambda e: (-best[e], e))[:limit]
        out = [
            SiloedHit(
                element_id=e,
                score=best[e],
                context=tuple(sorted(n for n in neighbours.get(e, ()) if n in visible)),
            )
            for e in ordered
        ]
        timings["filter"] = (time.perf_counter() - started) * 1000
        return out, timings
