"""Resilience: `uda serve` under load while a backend is stopped, paused or restarted (issue 17).

For each scenario, on the server profile over loopback: `clients` concurrent callers search
for `seconds` through the HTTP service, each with an API key of its own clearance, while a
writer adds one document every half second. In the middle, a backend is taken away for
`fault_s` seconds:

- `graph store stopped`: ArcadeDB shut down, then started again (`uda services` does it);
- `graph store paused`: ArcadeDB stopped with SIGSTOP (a hung server), then SIGCONT;
- `system of record stopped`: PostgreSQL shut down, then started again.

What each scenario reports (and the targets judge):

- `errors`: searches that neither answered (200, whole or degraded) nor were refused fast
  with 503 because the system of record was away — a client timeout, a 5xx that is not
  503, a 503 without the system of record being away; the target is 0;
- latency of every search (p50, p99, max), and of the 503s alone, against the search
  deadline (`search_timeout_s`) plus 100 ms;
- `leaks`: results and context nodes the caller's clearance may not see, judged on the
  corpus's own clearances (not on what the answer says); the target is 0;
- `recovery_s`: from the moment the backend answers again to the end of the last answer
  that was still degraded or refused; the target is at most 5 s;
- writes acknowledged (200) and `lost` (acknowledged, then missing after `uda sync`), and
  whether `uda check` is clean at the end;
- the service's open files and threads, and the application's PostgreSQL sessions, just
  before the fault (pools warm) and at the end (growth is a leak of resources), and whether
  its log holds a traceback or an unclean end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from benchmarks.metrics import latency_summary, percentile
from benchmarks.serving import Service, served
from benchmarks.suites import Context, SuiteResult
from benchmarks.synthetic import LEVELS, SyntheticCorpus, SyntheticSpec
from benchmarks.systems import Servers, open_client
from uda.config import Profile
from uda.query.clearance import Clearance
from uda.query.deadlines import DEFAULT_SEARCH_TIMEOUT_S

DATASET = "synthetic"
LIMIT = 5
WRITE_EVERY_S = 0.5
HTTP_TIMEOUT_S = 30.0  # far beyond any deadline: a search that takes this long hung
RECOVERY_TARGET_S = 5.0
CALLERS: tuple[tuple[str, ...], ...] = (
    ("public",),
    ("internal",),
    ("confidential", "project:p1"),
    ("restricted", "project:*"),
)
NOISE = ("Traceback", "Event loop is closed", "Task was destroyed")

Fault = Literal["restart", "pause"]
Backend = Literal["arcadedb", "postgres"]


@dataclass(frozen=True)
class Scenario:
    name: str
    backend: Backend
    fault: Fault


SCENARIOS = (
    Scenario("graph store stopped", "arcadedb", "restart"),
    Scenario("graph store paused", "arcadedb", "pause"),
    Scenario("system of record stopped", "postgres", "restart"),
)


@dataclass
class Sample:
    """One search as a caller saw it (seconds since the scenario started)."""

    started: float
    ended: float
    status: int  # 0: no HTTP answer at all
    degraded: bool = False
    leaks: int = 0

    @property
    def whole(self) -> bool:
        return self.status == 200 and not self.degraded

    @property
    def ms(self) -> float:
        return (self.ended - self.started) * 1000


@dataclass
class Timeline:
    """When the fault began and ended, and when the backend answered again."""

    fault_at: float = float("inf")
    back_at: float = float("inf")  # the fault was undone (SIGCONT sent, start begun)
    ready_at: float = float("inf")  # the backend answers again
    writes: list[tuple[str, int]] = field(default_factory=list[tuple[str, int]])
    warm: dict[str, float] = field(default_factory=dict[str, float])


def run(ctx: Context, result: SuiteResult) -> None:
    """Every scenario in turn, on servers of the suite's own (they are stopped and started)."""
    preset = ctx.preset
    if "server" not in ctx.profiles:
        result.status, result.reason = "skipped", "the server profile is not in --profiles"
        return
    try:
        import httpx  # noqa: F401 - the load generator's client
    except ImportError as exc:  # pragma: no cover - a core dependency
        result.status, result.reason = "skipped", f"httpx missing: {exc}"
        return
    root = ctx.work / "resilience"
    servers = Servers(root)  # its own: they are stopped and started under the load
    try:
        services = {"postgres": servers.postgres, "arcadedb": servers.arcadedb}
        corpus = SyntheticCorpus(spec=SyntheticSpec(chunks=preset.resilience_chunks, queries=32))
        for scenario in SCENARIOS:
            profile = servers.profile(f"resilience {scenario.name}")
            truth = _ingest(ctx, profile, corpus)
            ctx.log(f"resilience: {scenario.name}, {preset.resilience_clients} clients")
            with served(profile, CALLERS) as service:
                figures = _scenario(ctx, scenario, service, truth, corpus.queries, services)
                figures.update(_after(ctx, profile, service, figures.pop("_written")))
                if figures["log_noise"]:
                    result.notes.append(f"{scenario.name}: {_first_noise(service.log)}")
            result.add(
                dataset=DATASET,
                system="uda",
                method=f"resilience: {scenario.name}",
                profile="server",
                metrics=figures,
                params={
                    "clients": preset.resilience_clients,
                    "seconds": preset.resilience_seconds,
                    "fault_s": preset.resilience_fault_s,
                    "chunks": corpus.n_chunks,
                    "search_timeout_s": DEFAULT_SEARCH_TIMEOUT_S,
                    "backend": scenario.backend,
                    "fault": scenario.fault,
                },
            )
    finally:
        servers.close()


# -- set-up ------------------------------------------------------------------------------
def _ingest(
    ctx: Context, profile: Profile, corpus: SyntheticCorpus
) -> dict[str, tuple[int, str | None]]:
    """The corpus written with the packaged model; every element's rank and scope."""
    truth = dict(corpus.context_clearance())
    with open_client(profile, ctx.embedder) as client:
        client.ingest(corpus.context_nodes())
        for batch in corpus.batches():
            client.ingest(batch.elements, batch.relations)
    for i in range(corpus.n_assets):
        truth[corpus.asset_id(i)] = (int(corpus.rank[i]), corpus.scope_of(i))
    return truth


# -- the scenario --------------------------------------------------------------------------
def _scenario(
    ctx: Context,
    scenario: Scenario,
    service: Service,
    truth: dict[str, tuple[int, str | None]],
    queries: Sequence[str],
    services: dict[str, Any],
) -> dict[str, Any]:
    preset = ctx.preset
    postgres = services["postgres"]
    timeline = Timeline()
    samples = asyncio.run(
        _load(
            scenario,
            service,
            truth,
            queries,
            Outage(scenario, services[scenario.backend]),
            lambda: _resources(service, postgres),
            clients=preset.resilience_clients,
            seconds=preset.resilience_seconds,
            fault_s=preset.resilience_fault_s,
            timeline=timeline,
            log=ctx.log,
        )
    )
    figures = _figures(scenario, samples, timeline)
    # Warm (pools grown under the load) just before the fault, against the end.
    resources_after = _resources(service, postgres)
    for key, before in timeline.warm.items():
        figures[f"{key}_before"] = before
        figures[f"{key}_growth"] = resources_after[key] - before
    figures["_written"] = timeline.writes
    ctx.log(
        f"resilience: {scenario.name}: {figures['searches']:.0f} searches, "
        f"{figures['errors']:.0f} errors, p99 {figures['wall_p99_ms']:.0f} ms, "
        f"recovery {figures['recovery_s']:.1f} s"
    )
    return figures


async def _load(
    scenario: Scenario,
    service: Service,
    truth: dict[str, tuple[int, str | None]],
    queries: Sequence[str],
    outage: Outage,
    snapshot: Callable[[], dict[str, float]],
    *,
    clients: int,
    seconds: float,
    fault_s: float,
    timeline: Timeline,
    log: Callable[[str], None],
) -> list[Sample]:
    import httpx

    started = time.monotonic()
    over = asyncio.Event()  # set by `chaos` once the run is long enough on both counts
    samples: list[Sample] = []
    limits = httpx.Limits(max_connections=clients + 2, max_keepalive_connections=clients + 2)
    async with httpx.AsyncClient(
        base_url=service.base_url, timeout=HTTP_TIMEOUT_S, limits=limits
    ) as http:

        async def caller(n: int) -> None:
            clearance = CALLERS[n % len(CALLERS)]
            headers = {"X-API-Key": service.keys[clearance]}
            allowed = Clearance.parse(list(clearance))
            i = n
            while not over.is_set():
                body = {"query": queries[i % len(queries)], "limit": LIMIT}
                i += clients
                at = time.monotonic() - started
                try:
                    response = await http.post("/v1/search", json=body, headers=headers)
                except httpx.HTTPError:
                    samples.append(Sample(at, time.monotonic() - started, 0))
                    continue
                sample = Sample(at, time.monotonic() - started, response.status_code)
                if response.status_code == 200:
                    answer = response.json()
                    sample.degraded = bool(answer.get("degraded"))
                    sample.leaks = _leaks(answer, allowed, truth)
                samples.append(sample)

        async def writer() -> None:
            headers = {"X-API-Key": service.writer_key}
            n = 0
            while not over.is_set():
                n += 1
                element_id = f"resilience-{scenario.backend}-{scenario.fault}-{n}"
                body = {
                    "elements": [
                        {
                            "element_type": "Document",
                            "element_id": element_id,
                            "name": f"written under load {n}",
                            "text": f"a note written while the backends come and go, number {n}",
                            "sensitivity": "public",
                        }
                    ]
                }
                try:
                    response = await http.post("/v1/ingest", json=body, headers=headers)
                    status = response.status_code
                except httpx.HTTPError:
                    status = 0
                timeline.writes.append((element_id, status))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(over.wait(), WRITE_EVERY_S)

        async def chaos() -> None:
            await asyncio.sleep((seconds - fault_s) / 2)
            timeline.warm = await asyncio.to_thread(snapshot)
            timeline.fault_at = time.monotonic() - started
            log(f"  {scenario.backend}: {scenario.fault} at {timeline.fault_at:.1f} s")
            await asyncio.to_thread(outage.begin)
            await asyncio.sleep(fault_s)
            timeline.back_at = time.monotonic() - started
            await asyncio.to_thread(outage.end)
            timeline.ready_at = time.monotonic() - started
            log(f"  {scenario.backend}: back at {timeline.ready_at:.1f} s")
            # Long enough after the return to see the recovery, whatever the restart took.
            until = max(started + seconds, time.monotonic() + 2 * RECOVERY_TARGET_S)
            await asyncio.sleep(until - time.monotonic())
            over.set()

        await asyncio.gather(chaos(), writer(), *(caller(n) for n in range(clients)))
    return samples


class Outage:
    """Takes one backend away and brings it back, as the scenario says."""

    def __init__(self, scenario: Scenario, service: Any) -> None:
        self._fault = scenario.fault
        self._service = service
        self._paused: int | None = None

    def begin(self) -> None:
        if self._fault == "restart":
            self._service.down()
            return
        info = self._service.status()
        self._paused = int(info.pid)
        os.kill(self._paused, signal.SIGSTOP)

    def end(self) -> None:
        """Returns once the backend answers again."""
        if self._paused is not None:
            os.kill(self._paused, signal.SIGCONT)
            self._paused = None
        else:
            self._service.up()


def _leaks(
    answer: dict[str, Any], allowed: Clearance, truth: dict[str, tuple[int, str | None]]
) -> int:
    """Results and context nodes `allowed` may not see, by the corpus's own clearances."""
    ids: list[str] = []
    for result in answer.get("results", []):
        ids.append(result["element_id"])
        ids += [node["element_id"] for node in result.get("context_nodes", [])]
    return sum(not _visible(allowed, truth.get(eid, (len(LEVELS), None))) for eid in ids)


def _visible(allowed: Clearance, clearance: tuple[int, str | None]) -> bool:
    rank, scope = clearance
    if rank > allowed.level.rank:
        return False
    return scope is None or allowed.all_projects or scope in allowed.projects


def _figures(scenario: Scenario, samples: list[Sample], timeline: Timeline) -> dict[str, Any]:
    away = scenario.backend == "postgres"
    in_fault = [s for s in samples if timeline.fault_at <= s.started < timeline.ready_at]
    refused = [s for s in samples if s.status == 503]
    errors = [
        s
        for s in samples
        if s.status not in (200, 503)
        or (s.status == 503 and not (away and timeline.fault_at <= s.ended))
    ]
    # Recovery: the last answer not whole among those that started once it was back.
    after = [s for s in samples if s.started >= timeline.ready_at]
    late = [s.ended for s in after if not s.whole]
    recovery_s = max(late) - timeline.ready_at if late else 0.0
    # No whole answer after the return at all: the whole rest of the run.
    last = max((s.ended for s in samples), default=timeline.ready_at)
    first_whole = min((s.ended for s in after if s.whole), default=last)
    walls = [s.ms for s in samples]
    summary = latency_summary(walls)
    figures: dict[str, Any] = {f"wall_{k}": v for k, v in summary.items() if k != "n"}
    figures |= {
        "wall_p99_ms": _p99(walls),
        "wall_max_ms": max(walls, default=0.0),
        "searches": float(len(samples)),
        "whole": float(sum(s.whole for s in samples)),
        "degraded": float(sum(s.status == 200 and s.degraded for s in samples)),
        "unavailable_503": float(len(refused)),
        "errors": float(len(errors)),
        "leaks": float(sum(s.leaks for s in samples)),
        "fault_p99_ms": _p99([s.ms for s in in_fault]),
        "unavailable_p99_ms": _p99([s.ms for s in refused]),
        "deadline_ms": DEFAULT_SEARCH_TIMEOUT_S * 1000,
        "restart_s": timeline.ready_at - timeline.back_at,
        "first_whole_s": first_whole - timeline.ready_at,
        "recovery_s": recovery_s,
        "qps": len(samples) / max(max((s.ended for s in samples), default=1.0), 1e-9),
    }
    return figures


def _p99(values_ms: Sequence[float]) -> float:
    return percentile(values_ms, 99) if values_ms else 0.0


# -- after the load -------------------------------------------------------------------------
def _after(
    ctx: Context, profile: Profile, service: Service, writes: list[tuple[str, int]]
) -> dict[str, float]:
    """Nothing lost: every acknowledged write is there once the stores have caught up."""
    acknowledged = [eid for eid, status in writes if status == 200]
    prefix = acknowledged[0].rsplit("-", 1)[0] if acknowledged else "-"
    with open_client(profile, ctx.embedder) as client:
        client.sync()
        stored = set(client.element_ids(prefix))
        clean = client.check().clean
    noise = service.log.read_text(errors="replace")
    return {
        "writes": float(len(writes)),
        "writes_acknowledged": float(len(acknowledged)),
        "lost": float(sum(eid not in stored for eid in acknowledged)),
        "check_clean": 1.0 if clean else 0.0,
        "log_noise": float(sum(noise.count(marker) for marker in NOISE)),
    }


def _first_noise(log: Path, lines: int = 40) -> str:
    """The service log from its first traceback or warning of an unclean end."""
    text = log.read_text(errors="replace").splitlines()
    start = next(i for i, line in enumerate(text) if any(m in line for m in NOISE))
    return "\n".join(text[max(0, start - 3) : start + lines])


def _resources(service: Service, postgres: Any) -> dict[str, float]:
    """The service's open files and threads, and the application's PostgreSQL sessions."""
    pid = service.process.pid
    files = len(os.listdir(f"/proc/{pid}/fd"))
    threads = len(os.listdir(f"/proc/{pid}/task"))
    return {
        "open_files": float(files),
        "threads": float(threads),
        "pg_sessions": _sessions(postgres),
    }


def _sessions(postgres: Any) -> float:
    import psycopg

    state = postgres.load_state() or {}
    with psycopg.connect(
        host=state["host"],
        port=state["port"],
        user=state["admin_user"],
        password=state["admin_password"],
        dbname=state["database"],
        autocommit=True,
        connect_timeout=5,
    ) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = %s", (state["user"],)
        ).fetchone()
    return float(row[0]) if row else 0.0


__all__ = ["SCENARIOS", "run"]
