"""Deadlines, degraded answers and circuit breakers: a search answers in bounded time.

Every backend call of a search runs under a deadline: its connector's (the profile's
`call_timeout_s`, or a per-connector one), never past what is left of the search's own
(`search_timeout_s`, or the request's `timeout`). What happens when a call fails or misses
its deadline depends on what the backend is for (docs/adr/0026-deadlines-and-degradation.md):

- an optional leg (a vector store, the lexical leg, the graph) is left out and the answer
  says so: a `Degradation` on the plan, shown on every surface;
- the system of record is never optional: without it clearance cannot be enforced, so the
  search fails at once with `BackendUnavailableError` (HTTP 503, CLI exit 3).

A transient failure (`TransientBackendError`: a dropped connection, a serialization
failure, a 503) is tried again with backoff and jitter within the call's deadline
(`uda.query.retries`) before it counts as a failure.

A circuit breaker per backend skips one that failed `failures` times in a row, so a dead
backend costs nothing per search, and lets one call through after `cool_down_s` to probe it:
a success closes the breaker, the next searches use the backend again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from uda.errors import BackendUnavailableError, UserError
from uda.query.retries import Retries, retrying

log = logging.getLogger(__name__)

T = TypeVar("T")
# "replica": a copy of a store passed over (a standby behind or down): the answer is whole,
# another server gave it (connectors.postgres.replicas).
Leg = Literal["semantic", "lexical", "graph", "replica"]

DEFAULT_CALL_TIMEOUT_S = 2.0
DEFAULT_SEARCH_TIMEOUT_S = 5.0
DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_WRITE_TIMEOUT_S = 60.0


@dataclass(frozen=True, kw_only=True)
class Degradation:
    """A backend left out of an answer: which, for which leg, and why."""

    backend: str
    leg: Leg
    reason: str

    @property
    def incomplete(self) -> bool:
        """Whether the answer lacks what this backend would have given.

        Not so for a standby passed over: another server answered in its place.
        """
        return self.leg != "replica"

    def to_dict(self) -> dict[str, str]:
        """The plain form every surface shows."""
        return {"backend": self.backend, "leg": self.leg, "reason": self.reason}

    def describe(self) -> str:
        """One line for people: what is missing from the answer."""
        missing = {
            "semantic": "results without this vector store's matches",
            "lexical": "results without exact-word matches",
            "graph": "results without graph context and centrality",
            "replica": "complete and current results, from another server",
        }[self.leg]
        return f"{self.backend} ({self.leg}): {self.reason}; {missing}"


@dataclass(frozen=True, kw_only=True)
class Deadlines:
    """How long a search and each backend call may take (seconds)."""

    call_s: float = DEFAULT_CALL_TIMEOUT_S
    search_s: float = DEFAULT_SEARCH_TIMEOUT_S
    connect_s: float = DEFAULT_CONNECT_TIMEOUT_S
    """How long a client waits at start for a store other than the system of record."""
    write_s: float = DEFAULT_WRITE_TIMEOUT_S
    """How long one page of an ingest may take to land in a derived store."""
    per_connector: Mapping[str, float] = field(default_factory=dict[str, float])

    def call_for(self, backend: str) -> float:
        """The deadline of one call to `backend`, before the search's own is applied."""
        return self.per_connector.get(backend, self.call_s)


class Budget:
    """The deadlines of one search, counted from its start.

    Optional calls stop a `reserve` short of the search's end, so that a hung optional
    backend cannot eat the time the system of record needs to finish the answer; the
    system of record gets at least that reserve, whatever the optional legs took.
    """

    def __init__(self, deadlines: Deadlines, *, search_s: float | None = None) -> None:
        self._deadlines = deadlines
        self.search_s = deadlines.search_s if search_s is None else search_s
        self._end = time.monotonic() + self.search_s
        self.reserve_s = min(deadlines.call_s, self.search_s / 4)

    def for_call(self, backend: str, *, required: bool = False) -> float:
        """What a call to `backend` may take now: its deadline, within what is left."""
        left = self._end - time.monotonic()
        left = max(left, self.reserve_s) if required else left - self.reserve_s
        return max(0.0, min(self._deadlines.call_for(backend), left))


@dataclass(kw_only=True)
class _Circuit:
    failures: int = 0
    opened_at: float | None = None
    probing: bool = False


class Breakers:
    """One circuit breaker per backend.

    Args:
        failures: consecutive failures that open a backend's circuit.
        cool_down_s: how long an open circuit skips its backend before one probe call.
        clock: seconds, monotonic (a test may pass its own).
    """

    def __init__(
        self,
        *,
        failures: int = 3,
        cool_down_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._threshold = failures
        self._cool_down_s = cool_down_s
        self._clock = clock
        self._circuits: dict[str, _Circuit] = {}

    def allows(self, backend: str) -> bool:
        """Whether a call to `backend` may go out now (a closed circuit, or the one probe)."""
        circuit = self._circuits.get(backend)
        if circuit is None or circuit.opened_at is None:
            return True
        if circuit.probing or self._clock() - circuit.opened_at < self._cool_down_s:
            return False
        circuit.probing = True  # half open: this call is the probe
        return True

    def succeeded(self, backend: str) -> None:
        """A call answered: the circuit closes."""
        circuit = self._circuits.get(backend)
        if circuit is not None and (circuit.failures or circuit.opened_at is not None):
            if circuit.opened_at is not None:
                log.warning("%s answers again: circuit closed", backend)
            self._circuits[backend] = _Circuit()

    def failed(self, backend: str) -> None:
        """A call failed or missed its deadline: counted; the threshold opens the circuit."""
        circuit = self._circuits.setdefault(backend, _Circuit())
        circuit.failures += 1
        if circuit.probing or circuit.failures >= self._threshold:
            if circuit.opened_at is None:
                log.warning("%s failed %d times: circuit open", backend, circuit.failures)
            circuit.opened_at = self._clock()
            circuit.probing = False

    def state(self, backend: str) -> Literal["closed", "open", "half_open"]:
        """The circuit's state, for metrics."""
        circuit = self._circuits.get(backend)
        if circuit is None or circuit.opened_at is None:
            return "closed"
        return "half_open" if circuit.probing else "open"

    def states(self) -> dict[str, str]:
        """Every backend seen so far and its circuit's state."""
        return {backend: self.state(backend) for backend in sorted(self._circuits)}


class Guard:
    """Runs one search's backend calls under its budget, retries and the shared breakers.

    Each call is given as a function that makes it (`lambda: store.fetch(ids)`), so that a
    transient failure can be tried again and a skipped call is never made.

    Args:
        budget: this search's deadlines.
        breakers: the planner's breakers (shared by its searches).
        degraded: where the optional calls that were left out are recorded.
        retries: how transient failures are tried again.
    """

    def __init__(
        self,
        budget: Budget,
        breakers: Breakers,
        degraded: list[Degradation],
        retries: Retries | None = None,
    ) -> None:
        self._budget = budget
        self._breakers = breakers
        self._retries = retries or Retries()
        self.degraded = degraded

    async def optional(self, backend: str, leg: Leg, call: Callable[[], Awaitable[T]]) -> T | None:
        """The call's answer, or None (recorded as degraded) when it fails or is too late.

        A mistake of the caller (`UserError`) is not a backend failure: it propagates.
        """
        outcome = await self._attempt(backend, call, required=False)
        if isinstance(outcome, _Answered):
            return outcome.value
        self.degraded.append(Degradation(backend=backend, leg=leg, reason=outcome))
        return None

    async def required(self, backend: str, call: Callable[[], Awaitable[T]]) -> T:
        """The call's answer; a failure or a missed deadline fails the search.

        Raises:
            BackendUnavailableError: naming the backend and why.
        """
        outcome = await self._attempt(backend, call, required=True)
        if isinstance(outcome, _Answered):
            return outcome.value
        raise BackendUnavailableError(backend, outcome)

    async def _attempt(
        self, backend: str, call: Callable[[], Awaitable[T]], *, required: bool
    ) -> _Answered[T] | str:
        if not self._breakers.allows(backend):
            return "skipped: it failed repeatedly (circuit open); probed again after a cool-down"
        timeout = self._budget.for_call(backend, required=required)
        until = time.monotonic() + timeout
        try:
            value = await bounded(
                retrying(call, self._retries, until=until, backend=backend), timeout
            )
        except TimeoutError:
            self._breakers.failed(backend)
            return f"no answer within {timeout:.1f} s"
        except UserError:
            raise
        except Exception as exc:  # any backend failure: left out (optional) or fatal (required)
            self._breakers.failed(backend)
            log.warning("%s failed: %s", backend, exc, exc_info=log.isEnabledFor(logging.DEBUG))
            return f"failed: {type(exc).__name__}: {_short(str(exc))}"
        self._breakers.succeeded(backend)
        return _Answered(value)


@dataclass(frozen=True)
class _Answered(Generic[T]):
    value: T


async def bounded(work: Awaitable[T], timeout: float) -> T:
    """`work`'s answer, or TimeoutError after `timeout` seconds.

    Not `wait_for`, which waits for the cancelled call to end: a driver may take long to
    cancel (psycopg asks a paused server to cancel the query, and waits). The late call is
    abandoned instead: it finishes cancelling on its own, quietly, and the caller goes on.
    """
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        abandon(task)  # the caller itself was cancelled
        raise
    if not done:
        abandon(task)
        raise TimeoutError
    return task.result()


async def required_within(
    backend: str,
    call: Callable[[], Awaitable[T]],
    timeout: float,
    retries: Retries | None = None,
) -> T:
    """A call to a backend nothing can be answered without, within `timeout` seconds.

    For calls outside a search's `Guard` (its stamp and secret, an aggregate's reads).
    Transient failures are tried again within the same time.

    Raises:
        BackendUnavailableError: it did not answer in time, or failed.
    """
    until = time.monotonic() + timeout
    try:
        return await bounded(
            retrying(call, retries or Retries(), until=until, backend=backend), timeout
        )
    except TimeoutError:
        raise BackendUnavailableError(backend, f"no answer within {timeout:.1f} s") from None
    except UserError:
        raise
    except Exception as exc:
        raise BackendUnavailableError(backend, f"failed: {type(exc).__name__}: {exc}") from exc


def abandon(task: asyncio.Future[Any]) -> None:
    """Cancel a call no one waits for any more, and keep its end out of the logs.

    A call that has ended already keeps its answer; its failure, if any, is retrieved, so
    that it is not reported as "never retrieved".
    """
    task.cancel()
    task.add_done_callback(_quiet)


def _quiet(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: not "never retrieved" at garbage collection


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_SEARCH_TIMEOUT_S",
    "DEFAULT_WRITE_TIMEOUT_S",
    "Breakers",
    "Budget",
    "Deadlines",
    "Degradation",
    "Guard",
    "abandon",
    "bounded",
    "required_within",
]
