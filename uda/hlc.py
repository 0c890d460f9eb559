"""Hybrid logical clock (Kulkarni et al., 2014), packed into one sortable int64.

48 bits of physical milliseconds since the Unix epoch, 16 bits of logical counter. `now()` is
strictly monotonic even when the wall clock steps back; `merge()` folds in a remote stamp so
that causality is kept across processes; a remote stamp further ahead than `max_offset_ms` is
refused instead of dragging the clock into the future.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from uda.errors import ClockSkewError

LOGICAL_BITS = 16
LOGICAL_MASK = (1 << LOGICAL_BITS) - 1
MAX_PHYSICAL_MS = (1 << 47) - 1  # keeps the packed value a positive int64


def pack(physical_ms: int, logical: int) -> int:
    """Pack physical milliseconds and a logical counter into one int64."""
    if not 0 <= physical_ms <= MAX_PHYSICAL_MS:
        raise ValueError(f"physical time {physical_ms} ms is out of range")
    if not 0 <= logical <= LOGICAL_MASK:
        raise ValueError(f"logical counter {logical} is out of range")
    return (physical_ms << LOGICAL_BITS) | logical


def unpack(stamp: int) -> tuple[int, int]:
    """Split a packed stamp into (physical milliseconds, logical counter)."""
    return stamp >> LOGICAL_BITS, stamp & LOGICAL_MASK


def physical_ms(stamp: int) -> int:
    """The physical part of a stamp, in milliseconds since the epoch."""
    return stamp >> LOGICAL_BITS


def to_datetime(stamp: int) -> datetime:
    """The physical part of a stamp as an aware UTC datetime."""
    return datetime.fromtimestamp(physical_ms(stamp) / 1000, tz=UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_ms(moment: datetime) -> int:
    """Milliseconds since the epoch, exactly (integer arithmetic; naive means UTC).

    `int(moment.timestamp() * 1000)` loses a millisecond for some instants to float rounding.
    """
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def from_datetime(moment: datetime) -> int:
    """The largest stamp within `moment`'s millisecond: `as_of` a datetime includes it whole."""
    return pack(epoch_ms(moment), LOGICAL_MASK)


def wall_clock_ms() -> int:
    """The system's wall clock in milliseconds."""
    return time.time_ns() // 1_000_000


class HybridLogicalClock:
    """A thread-safe hybrid logical clock.

    Args:
        clock: source of physical milliseconds (injectable for tests).
        max_offset_ms: how far ahead of the local wall clock a merged remote stamp may be.
        last: a stamp already issued (for example persisted before a restart); the clock
            never issues anything at or below it.
    """

    def __init__(
        self,
        clock: Callable[[], int] = wall_clock_ms,
        *,
        max_offset_ms: int = 60_000,
        last: int = 0,
    ) -> None:
        self._clock = clock
        self._max_offset_ms = max_offset_ms
        self._lock = threading.Lock()
        self._last = last

    @property
    def last(self) -> int:
        """The last stamp issued or merged."""
        return self._last

    def now(self) -> int:
        """Issue a new stamp, strictly greater than every stamp issued or merged before."""
        with self._lock:
            self._last = self._advance(self._clock(), self._last)
            return self._last

    def merge(self, remote: int) -> int:
        """Fold in a stamp received from elsewhere and issue one above both.

        Raises:
            ClockSkewError: `remote` is more than `max_offset_ms` ahead of the wall clock.
        """
        with self._lock:
            wall = self._clock()
            remote_pt, _ = unpack(remote)
            if remote_pt - wall > self._max_offset_ms:
                raise ClockSkewError(
                    f"remote HLC is {remote_pt - wall} ms ahead of the local clock "
                    f"(allowed {self._max_offset_ms} ms)"
                )
            self._last = self._advance(wall, max(self._last, remote))
            return self._last

    def observe(self, stamp: int) -> None:
        """Make sure later stamps exceed `stamp` (a trusted one, e.g. read back from disk)."""
        with self._lock:
            self._last = max(self._last, stamp)

    @staticmethod
    def _advance(wall_ms: int, floor: int) -> int:
        floor_pt, floor_logical = unpack(floor)
        if wall_ms > floor_pt:
            return pack(wall_ms, 0)
        if floor_logical < LOGICAL_MASK:
            return pack(floor_pt, floor_logical + 1)
        # The logical counter is exhausted within this millisecond: borrow the next one.
        return pack(floor_pt + 1, 0)
