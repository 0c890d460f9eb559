"""The graph's shape as each clearance sees it, read again when this client wrote or it is old.

The shape is one statement over every current edge a clearance may see (milliseconds at
thousands of edges, seconds at millions), kept per clearance: what a caller may not see
never changes how its search ranks. A search waits for its shape only when it is not known
yet or this client has written since (then the answer follows the store as written), and
at most `WAIT_S`; an old shape is read again in the background while searches go on with
it. A failed read keeps the last shape (none: the `context` mode) and is tried again after
`RETRY_S`. At most `KEPT` clearances are kept, the least recently used dropped first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from connectors.base import RelationalCapable
from connectors.contract.graph_shape import GraphShape, ShapeClearance
from ontology import knowledge_asset_types

REFRESH_S = 300.0
RETRY_S = 30.0
WAIT_S = 2.0
KEPT = 64
_log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class _Entry:
    """One clearance's shape and the state of its reads."""

    shape: GraphShape | None = None
    due: float = 0.0  # monotonic time after which the shape is read again
    wanted: bool = True  # never read, or this client wrote since
    tried: bool = False  # a read has finished (well or not)
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class GraphShapes:
    """The system of record's graph shape per clearance, for the planner's automatic mode."""

    def __init__(self, system_of_record: RelationalCapable, refresh_s: float = REFRESH_S) -> None:
        self._sor = system_of_record
        self._refresh_s = refresh_s
        self._entries: OrderedDict[ShapeClearance, _Entry] = OrderedDict()

    def current(self, clearance: ShapeClearance) -> GraphShape | None:
        """The shape last read for `clearance` (None: not read yet, or every read failed)."""
        entry = self._entries.get(clearance)
        return None if entry is None else entry.shape

    def stale(self) -> None:
        """This client wrote: the next search of every clearance reads its shape first."""
        for entry in self._entries.values():
            entry.wanted = True

    async def for_search(self, clearance: ShapeClearance) -> GraphShape | None:
        """The shape a search of `clearance` should use: read first when wanted."""
        entry = self._entry(clearance)
        must_wait = entry.wanted or (entry.shape is None and not entry.tried)
        if must_wait or time.monotonic() >= entry.due:
            if entry.task is None or entry.task.done():
                entry.wanted = False
                entry.due = time.monotonic() + self._refresh_s
                entry.task = asyncio.get_running_loop().create_task(self._read(entry, clearance))
            if must_wait:
                # Too slow: the read goes on in the background, this search uses what is known.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(entry.task), WAIT_S)
        return entry.shape

    async def read(self, clearance: ShapeClearance) -> GraphShape:
        """Read `clearance`'s shape now (`uda stats`), and keep it."""
        shape = await self._sor.graph_shape(knowledge_asset_types(), clearance)
        self._entry(clearance).shape = shape
        return shape

    async def close(self) -> None:
        """Stop the reads still running: a closing planner leaves nothing behind."""
        for entry in self._entries.values():
            if entry.task is not None and not entry.task.done():
                entry.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await entry.task

    def _entry(self, clearance: ShapeClearance) -> _Entry:
        entry = self._entries.get(clearance)
        if entry is None:
            entry = self._entries[clearance] = _Entry()
            while len(self._entries) > KEPT:
                self._entries.popitem(last=False)
        self._entries.move_to_end(clearance)
        return entry

    async def _read(self, entry: _Entry, clearance: ShapeClearance) -> None:
        try:
            entry.shape = await self._sor.graph_shape(knowledge_asset_types(), clearance)
        except Exception:
            _log.warning("reading the graph's shape failed; trying again later", exc_info=True)
            entry.due = time.monotonic() + RETRY_S
        finally:
            entry.tried = True


__all__ = ["KEPT", "REFRESH_S", "RETRY_S", "WAIT_S", "GraphShapes"]
