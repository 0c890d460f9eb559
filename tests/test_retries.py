"""Transient failures are tried again, with backoff and jitter, within the call's deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_deadlines import FaultyGraphDouble, FaultyVectorDouble, _planner, _request

from connectors.contract.records import Subgraph
from uda.errors import ConnectorError, TransientBackendError
from uda.query.retries import Retries, retrying


class Flaky:
    """A call that fails `failures` times with `error`, then answers."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "answer"


TRANSIENT = TransientBackendError("pg", "OperationalError: server closed the connection")
QUICK = Retries(attempts=3, base_s=0.001, cap_s=0.002)


async def test_a_transient_failure_is_tried_again_until_it_passes() -> None:
    call = Flaky(2, TRANSIENT)
    assert await retrying(call, QUICK) == "answer"
    assert call.calls == 3


async def test_other_failures_are_not_tried_again() -> None:
    call = Flaky(1, ConnectorError("pg", "syntax error"))
    with pytest.raises(ConnectorError, match="syntax error"):
        await retrying(call, QUICK)
    assert call.calls == 1


async def test_retries_stop_after_the_attempts() -> None:
    call = Flaky(5, TRANSIENT)
    with pytest.raises(TransientBackendError):
        await retrying(call, QUICK)
    assert call.calls == 3


class OneSecond(Retries):
    def delay(self, retry: int, draw: object = None) -> float:
        return 1.0


async def test_no_retry_starts_whose_delay_reaches_the_deadline() -> None:
    call = Flaky(5, TRANSIENT)
    started = time.monotonic()
    with pytest.raises(TransientBackendError):
        await retrying(call, OneSecond(attempts=10), until=time.monotonic() + 0.5)
    assert time.monotonic() - started < 0.5
    assert call.calls == 1
    assert await retrying(Flaky(1, TRANSIENT), OneSecond(attempts=10), until=None) == "answer"


def test_delays_grow_exponentially_under_a_cap_with_full_jitter() -> None:
    retries = Retries(attempts=6, base_s=0.05, cap_s=0.3)
    bounds = [retries.delay(n, draw=lambda low, high: high) for n in range(1, 6)]
    assert bounds == pytest.approx([0.05, 0.1, 0.2, 0.3, 0.3])
    assert all(retries.delay(3, draw=lambda low, high: low) == 0.0 for _ in range(3))
    drawn = [retries.delay(2) for _ in range(200)]
    assert all(0.0 <= d <= 0.1 for d in drawn)
    assert len(set(drawn)) > 100  # drawn, not fixed: clients that failed together spread out


class DroppingGraphDouble(FaultyGraphDouble):
    """Test double of a graph store whose connection drops once, then answers."""

    def __init__(self) -> None:
        super().__init__()
        self.drops = 1

    async def expand(
        self,
        element_ids: Sequence[str],
        depth: int,
        relations: Sequence[str] | None,
        as_of: int | None,
        backward_hops: int | None = None,
    ) -> Subgraph:
        if self.drops:
            self.drops -= 1
            self.expand_calls.append(len(element_ids))
            raise TransientBackendError(self.name, "RemoteProtocolError: server disconnected")
        return await super().expand(element_ids, depth, relations, as_of, backward_hops)


async def test_a_dropped_connection_costs_a_retry_not_a_degraded_answer(tmp_path: Path) -> None:
    graph = DroppingGraphDouble()
    planner, sor = await _planner(tmp_path, [FaultyVectorDouble("vec"), graph])
    try:
        response = await planner.search(_request(["internal"]))
        assert response.degraded == []
        assert len(graph.expand_calls) == 2
        assert any(r.context_nodes for r in response.results)
        assert planner.breakers.state("graph-double") == "closed"
    finally:
        await planner.close()
        await sor.close()


async def test_retries_never_outlast_the_deadline(tmp_path: Path) -> None:
    graph = DroppingGraphDouble()
    graph.drops = 10**6  # never comes back
    planner, sor = await _planner(tmp_path, [FaultyVectorDouble("vec"), graph])
    try:
        started = time.monotonic()
        response = await asyncio.wait_for(planner.search(_request(["internal"])), 5.0)
        assert time.monotonic() - started < 1.5 + 1.0
        assert [d.leg for d in response.degraded] == ["graph"]
        assert "TransientBackendError" in response.degraded[0].reason
        assert len(graph.expand_calls) == Retries().attempts
    finally:
        await planner.close()
        await sor.close()
