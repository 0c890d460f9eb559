"""The store's tuning as a long-running client knows it.

Read when the client opens and after it tunes; read again in the background every
`REFRESH_S` while searches go on, so that a service's workers follow a `uda tune` run
elsewhere within minutes, without a restart and without a read on any search's path. A
failed read keeps what was known.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from connectors.base import RelationalCapable
from uda.tuning.settings import Tuning

REFRESH_S = 300.0
_log = logging.getLogger(__name__)


class StoredTuning:
    """The last tuning read from `system_of_record` (None: never tuned, or not read yet)."""

    def __init__(self, system_of_record: RelationalCapable, refresh_s: float = REFRESH_S) -> None:
        self._sor = system_of_record
        self._refresh_s = refresh_s
        self._due = 0.0
        self._task: asyncio.Task[None] | None = None
        self.current: Tuning | None = None

    async def read(self) -> Tuning | None:
        """Read the store's tuning now, and keep it."""
        self.current = Tuning.from_json(await self._sor.tuning())
        self._due = time.monotonic() + self._refresh_s
        return self.current

    def keep(self, tuning: Tuning | None) -> None:
        """This client recorded `tuning` (None: forgot it): use it from now on."""
        self.current = tuning
        self._due = time.monotonic() + self._refresh_s

    def refresh_if_due(self) -> None:
        """Start a background read if the last one is old (never waits)."""
        if time.monotonic() < self._due or (self._task is not None and not self._task.done()):
            return
        self._due = time.monotonic() + self._refresh_s
        self._task = asyncio.get_running_loop().create_task(self._refresh())

    async def close(self) -> None:
        """Stop a read still running."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _refresh(self) -> None:
        try:
            await self.read()
        except Exception:
            _log.warning("reading the store's tuning failed; keeping the last", exc_info=True)


__all__ = ["REFRESH_S", "StoredTuning"]
