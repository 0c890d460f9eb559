"""The hybrid logical clock: packing, monotonicity, merge, skew, threads, persistence."""

from __future__ import annotations

import itertools
import sys
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import uda
from ontology import Document
from uda.embedding import Embedder
from uda.hlc import (
    LOGICAL_BITS,
    LOGICAL_MASK,
    MAX_PHYSICAL_MS,
    HybridLogicalClock,
    from_datetime,
    pack,
    physical_ms,
    to_datetime,
    unpack,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_physical = st.integers(0, MAX_PHYSICAL_MS)
_logical = st.integers(0, LOGICAL_MASK)


def _ms(moment: datetime) -> int:
    """Exact milliseconds since the epoch, in integer arithmetic."""
    return (moment - EPOCH) // timedelta(milliseconds=1)


class SteppedClock:
    """A wall clock that returns scripted milliseconds, repeating the last one."""

    def __init__(self, *values: int) -> None:
        self.values = list(values)

    def __call__(self) -> int:
        return self.values.pop(0) if len(self.values) > 1 else self.values[0]


# -- packing --------------------------------------------------------------------------------
def test_layout_is_16_logical_bits() -> None:
    assert LOGICAL_BITS == 16
    assert LOGICAL_MASK == 0xFFFF
    assert pack(1, 0) == 1 << 16
    assert pack(0, 5) == 5
    assert pack(3, 7) == (3 << 16) | 7


@given(pt=_physical, lc=_logical)
def test_pack_unpack_round_trip(pt: int, lc: int) -> None:
    stamp = pack(pt, lc)
    assert unpack(stamp) == (pt, lc)
    assert physical_ms(stamp) == pt
    assert 0 <= stamp < 2**63  # a positive int64


@given(a=st.tuples(_physical, _logical), b=st.tuples(_physical, _logical))
def test_packed_order_equals_tuple_order(a: tuple[int, int], b: tuple[int, int]) -> None:
    pa_, pb = pack(*a), pack(*b)
    assert (pa_ < pb) == (a < b)
    assert (pa_ == pb) == (a == b)


@pytest.mark.parametrize(
    ("pt", "lc"), [(-1, 0), (MAX_PHYSICAL_MS + 1, 0), (0, -1), (0, LOGICAL_MASK + 1)]
)
def test_pack_rejects_out_of_range(pt: int, lc: int) -> None:
    with pytest.raises(ValueError, match="out of range"):
        pack(pt, lc)


# -- now() ----------------------------------------------------------------------------------
def test_now_uses_wall_clock_when_it_advances() -> None:
    clock = HybridLogicalClock(clock=SteppedClock(1000, 1005, 2000))
    assert clock.now() == pack(1000, 0)
    assert clock.now() == pack(1005, 0)
    assert clock.now() == pack(2000, 0)
    assert clock.last == pack(2000, 0)


def test_now_strictly_monotonic_when_clock_stands_still() -> None:
    clock = HybridLogicalClock(clock=lambda: 5000)
    stamps = [clock.now() for _ in range(100)]
    assert stamps == [pack(5000, i) for i in range(100)]


def test_now_strictly_monotonic_when_clock_goes_backwards() -> None:
    clock = HybridLogicalClock(clock=SteppedClock(10_000, 9_000, 5_000, 9_999, 10_000, 10_001))
    stamps = [clock.now() for _ in range(6)]
    assert stamps == [
        pack(10_000, 0),
        pack(10_000, 1),
        pack(10_000, 2),
        pack(10_000, 3),
        pack(10_000, 4),
        pack(10_001, 0),
    ]
    assert all(x < y for x, y in itertools.pairwise(stamps))


@given(walls=st.lists(st.integers(0, 10**12), min_size=1, max_size=200))
def test_now_strictly_monotonic_under_any_wall_clock(walls: list[int]) -> None:
    clock = HybridLogicalClock(clock=SteppedClock(*walls))
    stamps = [clock.now() for _ in walls]
    assert all(x < y for x, y in itertools.pairwise(stamps))
    # Never behind the wall clock it read.
    assert all(physical_ms(s) >= w for s, w in zip(stamps, walls, strict=True))


def test_now_never_at_or_below_last() -> None:
    last = pack(9_000, 41)
    clock = HybridLogicalClock(clock=lambda: 1_000, last=last)
    assert clock.now() == pack(9_000, 42)


def test_logical_overflow_borrows_next_millisecond() -> None:
    clock = HybridLogicalClock(clock=lambda: 1_000, last=pack(1_000, LOGICAL_MASK - 1))
    assert clock.now() == pack(1_000, LOGICAL_MASK)
    assert clock.now() == pack(1_001, 0)
    assert clock.now() == pack(1_001, 1)


def test_logical_overflow_by_issuing_65536_stamps_in_one_millisecond() -> None:
    clock = HybridLogicalClock(clock=lambda: 7)
    stamps = [clock.now() for _ in range(LOGICAL_MASK + 3)]
    assert len(set(stamps)) == len(stamps)
    assert stamps[LOGICAL_MASK] == pack(7, LOGICAL_MASK)
    assert stamps[LOGICAL_MASK + 1] == pack(8, 0)
    assert stamps[-1] == pack(8, 1)


# -- merge() and observe() ------------------------------------------------------------------
def test_merge_remote_ahead_returns_greater_than_remote() -> None:
    clock = HybridLogicalClock(clock=lambda: 1_000)
    clock.now()
    remote = pack(31_000, 7)  # 30 s ahead: within the default 60 s offset
    merged = clock.merge(remote)
    assert merged > remote
    assert merged == pack(31_000, 8)
    # Later stamps stay above the remote even though the wall clock lags it.
    assert clock.now() == pack(31_000, 9)


def test_merge_remote_behind_returns_greater_than_local() -> None:
    clock = HybridLogicalClock(clock=lambda: 50_000)
    local = clock.now()
    merged = clock.merge(pack(10_000, 3))
    assert merged > local
    assert merged == pack(50_000, 1)


def test_merge_at_exactly_max_offset_is_allowed() -> None:
    clock = HybridLogicalClock(clock=lambda: 1_000, max_offset_ms=500)
    assert clock.merge(pack(1_500, 0)) == pack(1_500, 1)


def test_merge_remote_too_far_ahead_raises_clock_skew() -> None:
    clock = HybridLogicalClock(clock=lambda: 1_000, max_offset_ms=60_000)
    before = clock.now()
    with pytest.raises(uda.ClockSkewError, match="ahead"):
        clock.merge(pack(1_000 + 60_001, 0))
    # The refused stamp did not drag the clock forward.
    assert clock.last == before
    assert clock.now() == pack(1_000, 1)
    assert issubclass(uda.ClockSkewError, uda.UDAError)


def test_observe_raises_floor_without_issuing() -> None:
    clock = HybridLogicalClock(clock=lambda: 100)
    clock.observe(pack(900, 4))
    assert clock.last == pack(900, 4)
    clock.observe(pack(10, 0))  # lower: ignored
    assert clock.last == pack(900, 4)
    assert clock.now() == pack(900, 5)


@given(
    walls=st.lists(st.integers(0, 10**9), min_size=1, max_size=50),
    remotes=st.lists(st.integers(0, 10**9), min_size=1, max_size=50),
)
def test_merge_and_now_interleaved_stay_monotonic(walls: list[int], remotes: list[int]) -> None:
    clock = HybridLogicalClock(clock=SteppedClock(*walls), max_offset_ms=10**10)
    issued: list[int] = []
    for remote_pt in remotes:
        remote = pack(remote_pt, 3)
        merged = clock.merge(remote)
        assert merged > remote
        issued += [merged, clock.now()]
    assert all(x < y for x, y in itertools.pairwise(issued))


# -- threads --------------------------------------------------------------------------------
@pytest.mark.parametrize("wall", [None, 123_456], ids=["wall-clock", "clock-standing-still"])
def test_now_is_thread_safe(wall: int | None) -> None:
    """Many threads: unique stamps, strictly increasing per thread, all distinct overall.

    A tiny GIL switch interval makes preemption inside `now()` likely, so a missing lock
    shows up as duplicate stamps; a clock that stands still forces every stamp through the
    logical counter (read-modify-write of the last stamp).
    """
    clock = HybridLogicalClock() if wall is None else HybridLogicalClock(clock=lambda: wall)
    threads_n, per_thread = 8, 4_000
    barrier = threading.Barrier(threads_n)
    results: list[list[int]] = [[] for _ in range(threads_n)]

    def work(slot: int) -> None:
        barrier.wait()
        out = results[slot]
        for _ in range(per_thread):
            out.append(clock.now())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(threads_n)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    for stamps in results:
        assert len(stamps) == per_thread
        assert all(x < y for x, y in itertools.pairwise(stamps))
    everything = [s for stamps in results for s in stamps]
    assert len(set(everything)) == threads_n * per_thread
    assert clock.last == max(everything)
    if wall is not None:
        # 32,000 stamps in one standing millisecond: no gaps, no repeats, one borrow.
        assert sorted(everything) == [
            pack(wall + i // (LOGICAL_MASK + 1), i % (LOGICAL_MASK + 1))
            for i in range(threads_n * per_thread)
        ]


# -- datetimes ------------------------------------------------------------------------------
def test_to_datetime_is_utc_physical_part() -> None:
    stamp = pack(1_700_000_000_123, 99)
    moment = to_datetime(stamp)
    assert moment == datetime(2023, 11, 14, 22, 13, 20, 123_000, tzinfo=UTC)
    assert moment.utcoffset() == timedelta(0)


def test_from_datetime_is_largest_stamp_of_the_millisecond() -> None:
    moment = datetime(2023, 11, 14, 22, 13, 20, 123_456, tzinfo=UTC)
    stamp = from_datetime(moment)
    assert stamp == pack(1_700_000_000_123, LOGICAL_MASK)
    # Every stamp within that millisecond is <= it; the next millisecond's first is not.
    assert pack(1_700_000_000_123, 0) <= stamp < pack(1_700_000_000_124, 0)


def test_from_datetime_naive_is_utc_and_aware_is_converted() -> None:
    naive = datetime(2024, 2, 29, 12, 0, 0)
    aware = datetime(2024, 2, 29, 14, 0, 0, tzinfo=timezone(timedelta(hours=2)))
    expected = pack(_ms(naive.replace(tzinfo=UTC)), LOGICAL_MASK)
    assert from_datetime(naive) == expected
    assert from_datetime(aware) == expected


def test_from_datetime_exact_millisecond_regression() -> None:
    """2004-09-09T19:17:50.011Z is 1094757470011 ms; float arithmetic gives ...010.9999."""
    moment = datetime(2004, 9, 9, 19, 17, 50, 11_000, tzinfo=UTC)
    assert _ms(moment) == 1_094_757_470_011
    assert from_datetime(moment) == pack(1_094_757_470_011, LOGICAL_MASK)


@given(
    ms=st.integers(0, _ms(datetime(2200, 1, 1, tzinfo=UTC))),
    lc=_logical,
)
def test_datetime_round_trip_keeps_the_stamp_included(ms: int, lc: int) -> None:
    """`as_of=to_datetime(stamp)` must include `stamp` itself (its whole millisecond)."""
    stamp = pack(ms, lc)
    moment = to_datetime(stamp)
    assert _ms(moment) == ms
    assert from_datetime(moment) == pack(ms, LOGICAL_MASK)
    assert from_datetime(moment) >= stamp


# -- persistence across client restarts -----------------------------------------------------
def _doc(element_id: str, text: str) -> Document:
    return Document(element_id=element_id, name=element_id, text=text)


def test_hlc_persists_across_client_restarts(tmp_path: Path, embedder: Embedder) -> None:
    path = tmp_path / "uda"
    late_ms = 4_000_000_000_000  # year 2096: every stored stamp is far ahead of "early"
    early_ms = 1_000_000  # 1970

    with uda.connect(
        path=path, embedder=embedder, clock=HybridLogicalClock(clock=lambda: late_ms)
    ) as client:
        first = client.ingest([_doc("doc-a", "Kafka consumer group rebalancing protocol.")])
        second = client.ingest(
            [_doc("doc-b", "Postgres vacuum and transaction id wraparound.")],
            [("doc-b", "relatedTo", "doc-a")],
        )
        stored = client.search(
            "Kafka consumer group rebalancing", limit=5, clearance_scope=["internal"]
        )
    assert first.hlc is not None
    assert second.hlc is not None
    assert physical_ms(first.hlc) == late_ms
    assert second.hlc > first.hlc
    stored_hlcs = {r.element_id: r.properties["hlc"] for r in stored.results}
    assert stored_hlcs["doc-a"] <= first.hlc

    early = HybridLogicalClock(clock=lambda: early_ms)
    with uda.connect(path=path, embedder=embedder, clock=early) as client:
        # The restarted client observed the stored stamps before issuing anything.
        assert early.last >= second.hlc
        third = client.ingest([_doc("doc-c", "Kafka consumer lag monitoring dashboards.")])
        updated = client.ingest([_doc("doc-a", "Kafka consumer group rebalancing, revised.")])
        res = client.search("Kafka consumer group", limit=5, clearance_scope=["internal"])
    assert third.hlc is not None
    assert updated.hlc is not None
    assert third.hlc > second.hlc > first.hlc
    assert updated.hlc > third.hlc
    by_id = {r.element_id: r for r in res.results}
    assert by_id["doc-c"].properties["hlc"] > second.hlc
    assert by_id["doc-a"].properties["hlc"] > third.hlc
    assert by_id["doc-a"].properties["version"] == 2
    # Every stamp handed out now is above everything the earlier session stored.
    assert min(r.properties["hlc"] for r in res.results if r.element_id != "doc-b") > second.hlc

    # A third session with the real wall clock still issues above the 2096 stamps.
    with uda.connect(path=path, embedder=embedder) as client:
        fourth = client.ingest([_doc("doc-d", "Redis eviction policies.")])
    assert fourth.hlc is not None
    assert fourth.hlc > updated.hlc
