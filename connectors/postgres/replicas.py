"""Search reads on hot standbys, never staler than the search: PostgreSQL's own replication.

With `standbys` in its options the PostgreSQL connector keeps a pool per standby and sends
the reads of a search there (the vector and lexical legs, states and clearances, structured
pages, aggregates); writes, the write path's own reads and saved queries stay on the primary
(docs/adr/0032-reads-on-standbys.md).

Replication is asynchronous, so a standby may not yet have replayed a write the primary has
acknowledged: a reclassified element, a revoked scope, the ingest the same agent just made.
A read goes to a standby only once it has replayed the primary's WAL up to the *fence*: the
primary's WAL position read after the search began. Everything acknowledged before the
search began lies below it, so no copy answers with an older clearance than the primary
would. One fence serves every read of every search begun before it was read (the same
fence read, in flight, is shared); a standby's replayed position, once seen past a fence,
is not asked again for it. Reads on an idle store thus cost no extra round trip; after
writes, one short query to the primary per search and one per standby.

A standby that is behind the fence is passed over for this read; one that cannot be
reached is passed over for `STANDBY_COOL_DOWN_S`. The primary answers if no standby can,
so the answer is complete and current either way, and the search is told (`notice`): it
lists the standby among its degraded backends.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from connectors.contract.reads import notice, read_started

T = TypeVar("T")
Work = Callable[[AsyncConnection[Any]], Awaitable[T]]

# A standby that could not be reached is not tried again for this long; then one read
# probes it, and it is used again at once if it answers.
STANDBY_COOL_DOWN_S = 5.0
# How long a read waits for a standby's connection before the primary answers instead.
STANDBY_CONNECT_S = 1.0

# WAL positions as byte offsets: pg_lsn subtracted from '0/0' is numeric, exact in a bigint.
PRIMARY_POSITION = b"SELECT (pg_current_wal_lsn() - '0/0')::bigint"
REPLAYED_POSITION = b"SELECT (pg_last_wal_replay_lsn() - '0/0')::bigint"


class StandbyUnreachable(Exception):
    """The standby could not give a working connection (down, refusing, or lost)."""


@dataclass(kw_only=True)
class Standby:
    """One hot standby: its pool and what this process knows of it."""

    label: str
    pool: AsyncConnectionPool[AsyncConnection[Any]]
    replayed: int = -1
    """The highest replayed WAL position seen (replay only moves forward)."""
    down_until: float = 0.0
    reads: int = 0

    @asynccontextmanager
    async def connection(self) -> AsyncGenerator[AsyncConnection[Any]]:
        """A pooled connection; losing the standby raises `StandbyUnreachable`."""
        used: AsyncConnection[Any] | None = None
        try:
            async with self.pool.connection(timeout=STANDBY_CONNECT_S) as conn:
                used = conn
                yield conn
        except PoolTimeout as exc:
            raise StandbyUnreachable(f"no connection within {STANDBY_CONNECT_S:g} s") from exc
        except psycopg.OperationalError as exc:
            if used is None or used.broken:
                raise StandbyUnreachable(str(exc).strip() or type(exc).__name__) from exc
            raise


@dataclass(kw_only=True)
class ReadRouter:
    """Picks where each search read runs: a standby past the fence, else the primary."""

    standbys: Sequence[Standby]
    primary_reads: int = 0
    _fence: asyncio.Future[int] | None = None
    _fence_at: float = float("-inf")
    _turn: itertools.count[int] = field(default_factory=itertools.count)

    async def read(
        self,
        work: Work[T],
        *,
        primary: Callable[[Work[T]], Awaitable[T]],
        position: Callable[[], Awaitable[int]],
    ) -> T:
        """`work` on a standby that has replayed the fence, else through `primary`.

        `position` reads the primary's WAL position (the fence); if it fails, the read
        fails: without a fence no standby can be trusted, and the primary is not there.
        """
        fence = await self._current_fence(position)
        for standby in self._rotation():
            try:
                async with standby.connection() as conn:
                    if standby.replayed < fence:
                        replayed = await _replayed(conn)
                        if replayed is None:
                            # Not in recovery: a promoted standby, or the primary listed
                            # among the copies (a profile that lists every node). It is not
                            # asked again for a while; nothing is missing from the answer.
                            standby.down_until = time.monotonic() + STANDBY_COOL_DOWN_S
                            continue
                        standby.replayed = replayed
                    if standby.replayed >= fence:
                        standby.reads += 1
                        return await work(conn)
                notice(standby.label, "behind the primary: read on another server")
            except StandbyUnreachable as exc:
                standby.down_until = time.monotonic() + STANDBY_COOL_DOWN_S
                notice(standby.label, f"unreachable ({exc}): read on another server")
        self.primary_reads += 1
        return await primary(work)

    def counts(self) -> dict[str, int]:
        """Reads served so far by each server (`primary` and each standby's label)."""
        return {"primary": self.primary_reads, **{s.label: s.reads for s in self.standbys}}

    async def close(self) -> None:
        """Close every standby's pool."""
        await asyncio.gather(*(s.pool.close() for s in self.standbys))

    def _rotation(self) -> list[Standby]:
        """The standbys to try, in turn from a rotating start; those cooling down left out."""
        now = time.monotonic()
        start = next(self._turn) % len(self.standbys) if self.standbys else 0
        turned = [*self.standbys[start:], *self.standbys[:start]]
        return [s for s in turned if s.down_until <= now]

    async def _current_fence(self, position: Callable[[], Awaitable[int]]) -> int:
        """A primary position read after the current search began: shared while in flight."""
        fence = self._fence
        if fence is None or self._fence_at < read_started() or _failed(fence):
            # Stamped before the query is sent: the position it reads is at least as new.
            self._fence_at = time.monotonic()
            fence = self._fence = asyncio.ensure_future(position())
            fence.add_done_callback(_retrieved)
        # A caller that gives up (its deadline) must not cancel the read others wait for.
        return await asyncio.shield(fence)


async def _replayed(conn: AsyncConnection[Any]) -> int | None:
    """How far this standby has replayed; None if the server is not in recovery."""
    cur = await conn.execute(REPLAYED_POSITION)
    row = await cur.fetchone()
    return None if row is None or row[0] is None else int(row[0])


def _failed(fence: asyncio.Future[int]) -> bool:
    return fence.done() and (fence.cancelled() or fence.exception() is not None)


def _retrieved(fence: asyncio.Future[int]) -> None:
    """The callers that await a failed fence report it; no warning if none is left."""
    if not fence.cancelled():
        fence.exception()


__all__ = [
    "PRIMARY_POSITION",
    "STANDBY_CONNECT_S",
    "STANDBY_COOL_DOWN_S",
    "ReadRouter",
    "Standby",
    "StandbyUnreachable",
]
