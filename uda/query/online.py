"""Stores that were offline when a client opened, connected by the first call that needs them.

A store other than the system of record that cannot connect at open is left out (searches
flag it as degraded; ingests leave its entries in the outbox). Searches and writes share
one `OfflineStores`, so whichever reaches the store first connects it, once, and both use it
from then on (docs/adr/0026-deadlines-and-degradation.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from connectors.base import Connector

log = logging.getLogger(__name__)


class OfflineStores:
    """The names of the stores still to connect, and a lock each so that one call does it."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._locks = {name: asyncio.Lock() for name in names}

    def __contains__(self, name: object) -> bool:
        return name in self._locks

    async def connected(self, connector: Connector) -> None:
        """Connect `connector` if it was offline (raising what `connect()` raises)."""
        lock = self._locks.get(connector.name)
        if lock is None:
            return
        async with lock:
            if connector.name not in self._locks:
                return  # a call that waited on the lock found it connected
            await connector.connect()
            del self._locks[connector.name]
        log.warning("%s is connected: searches and writes use it again", connector.name)


__all__ = ["OfflineStores"]
