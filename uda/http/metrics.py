"""Prometheus metrics, written by hand: request counts and latencies, search phase latencies.

The text exposition format (version 0.0.4) is small enough that a client library would add
more than it saves. Labels are bounded: a route is its template (`/v1/elements/{element_id}`),
never the raw path, so that ids do not become label values; requests that match no route
share one label.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Mapping, Sequence

from uda.query.deadlines import Degradation

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Request latencies span a health probe (sub-millisecond) to a cold search (seconds).
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
PHASE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Labels, extra: Iterable[tuple[str, str]] = ()) -> str:
    pairs = [*labels, *extra]
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}"


def _number(value: float) -> str:
    return repr(float(value)) if value != int(value) else str(int(value))


class Counter:
    """A monotonically increasing count per label set."""

    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help = name, help_text
        self._values: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def inc(self, labels: Mapping[str, str], amount: float = 1.0) -> None:
        """Add `amount` to the count of this label set."""
        key = tuple(sorted(labels.items()))
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, labels: Mapping[str, str]) -> float:
        """The current count of this label set (0 if never counted)."""
        return self._values.get(tuple(sorted(labels.items())), 0.0)

    def render(self) -> list[str]:
        """The exposition lines of this counter."""
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        with self._lock:
            items = sorted(self._values.items())
        lines += [f"{self.name}{_labels(k)} {_number(v)}" for k, v in items]
        return lines


class Histogram:
    """Observations in cumulative buckets, with their sum and count, per label set."""

    def __init__(self, name: str, help_text: str, buckets: Sequence[float]) -> None:
        self.name, self.help = name, help_text
        self.buckets = tuple(sorted(buckets))
        self._series: dict[Labels, tuple[list[int], list[float]]] = {}
        self._lock = threading.Lock()

    def observe(self, labels: Mapping[str, str], value: float) -> None:
        """Record one observation (in the unit of the metric's name)."""
        key = tuple(sorted(labels.items()))
        with self._lock:
            counts, total = self._series.setdefault(key, ([0] * len(self.buckets), [0.0, 0.0]))
            index = bisect.bisect_left(self.buckets, value)
            if index < len(counts):
                counts[index] += 1
            total[0] += value
            total[1] += 1

    def count(self, labels: Mapping[str, str]) -> int:
        """How many observations this label set has."""
        series = self._series.get(tuple(sorted(labels.items())))
        return 0 if series is None else int(series[1][1])

    def render(self) -> list[str]:
        """The exposition lines of this histogram (cumulative `le` buckets, `+Inf` last)."""
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        with self._lock:
            items = sorted((k, (list(c), list(t))) for k, (c, t) in self._series.items())
        for key, (counts, (total, number)) in items:
            running = 0
            for bound, count in zip(self.buckets, counts, strict=True):
                running += count
                le = (("le", _number(bound)),)
                lines.append(f"{self.name}_bucket{_labels(key, le)} {running}")
            lines.append(f"{self.name}_bucket{_labels(key, (('le', '+Inf'),))} {int(number)}")
            lines.append(f"{self.name}_sum{_labels(key)} {_number(total)}")
            lines.append(f"{self.name}_count{_labels(key)} {int(number)}")
        return lines


class Metrics:
    """The service's metrics; one instance per app."""

    def __init__(self) -> None:
        self.requests = Counter(
            "uda_http_requests_total", "HTTP requests by route, method and status."
        )
        self.latency = Histogram(
            "uda_http_request_duration_seconds",
            "HTTP request latency by route and method, until the last byte was sent.",
            REQUEST_BUCKETS,
        )
        self.degraded = Counter(
            "uda_search_degraded_total",
            "Searches answered without a backend (failed or too late), by backend and leg.",
        )
        self.phases = Histogram(
            "uda_search_phase_duration_seconds",
            "Search latency per planner phase (embed, phase1, phase2, phase3, total).",
            PHASE_BUCKETS,
        )

    def record_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one finished request and its latency."""
        self.requests.inc({"route": route, "method": method, "status": str(status)})
        self.latency.observe({"route": route, "method": method}, seconds)

    def record_degraded(self, degraded: Iterable[Degradation]) -> None:
        """Count the backends a search answered without."""
        for d in degraded:
            self.degraded.inc({"backend": d.backend, "leg": d.leg})

    def record_phases(self, timings_ms: Mapping[str, float]) -> None:
        """Record the phase timings a plan collected (milliseconds, as `Plan.timings_ms`)."""
        for phase, ms in timings_ms.items():
            self.phases.observe({"phase": phase}, ms / 1000)

    def render(
        self,
        circuits: Mapping[str, str] | None = None,
        reads: Mapping[str, Mapping[str, int]] | None = None,
    ) -> str:
        """Every metric in the text exposition format.

        With the backends' circuit states, and where their search reads went (`reads`:
        backend, then server, to count).
        """
        lines: list[str] = []
        for metric in (self.requests, self.latency, self.phases, self.degraded):
            lines += metric.render()
        lines += [
            "# HELP uda_backend_circuit_open Whether a backend's circuit breaker skips it "
            "(1 open, 0.5 half open: one probe call, 0 closed).",
            "# TYPE uda_backend_circuit_open gauge",
        ]
        for backend, state in sorted((circuits or {}).items()):
            value = {"open": 1.0, "half_open": 0.5}.get(state, 0.0)
            lines.append(
                f"uda_backend_circuit_open{_labels((('backend', backend),))} {_number(value)}"
            )
        lines += [
            "# HELP uda_search_reads_total Search reads each server of a replicated backend "
            "served (the primary, or a standby that had replayed what the search must see).",
            "# TYPE uda_search_reads_total counter",
        ]
        for backend, servers in sorted((reads or {}).items()):
            for server, count in sorted(servers.items()):
                labels = _labels((("backend", backend), ("server", server)))
                lines.append(f"uda_search_reads_total{labels} {_number(count)}")
        return "\n".join(lines) + "\n"
