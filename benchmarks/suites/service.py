"""Service: `uda serve` under loopback load, one process and every core (issue 18).

Per profile of the run, SciFact passages (the preset's `service_docs`: the SciFact suite's
passages first, whose vectors the run has by then, then the others in corpus order) are
written once through the public client (`client.ingest`, with the run's embedder), then the
service is started on them (`benchmarks.serving.served`) and loaded over loopback:

- the embedded profile runs the service's default (one process: its stores are not shared
  by several processes);
- the server profile runs twice: `--workers 1`, then the default (a process per core), so
  the rows show what more workers buy.

After a warm-up (`service_warmup_s`, at the highest concurrency, not counted), each step of
`service_concurrency` runs that many callers for `service_seconds`. A caller loops: POST
/v1/search `{"query": q, "limit": 10}` with its API key, `q` the next SciFact query text of
one cycle shared by every caller (all 1,109 query texts, test and train). Each row reports
the answers (200), QPS (answers / the step's wall time, until the last request returned),
latency p50/p95/p99/max of every request, `errors` (any other status, a transport error or
no answer within 30 s), the mean results per answer, the CPU time of the service's whole
process tree per answer and in cores (`cpu_ms_per_answer`, `cpu_cores`: what an answer costs
and whether one core's worth of work bounds the service), the resident memory (VmRSS) of the
service's whole process tree after the step, before the first step and after the last, and
the most service processes seen. The query vector cache of each service process (4,096
texts) holds every query after its first pass: `query_passes` says how often the cycle
went round, so later passes measure the search without the query embedding.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.datasets import BeirSet, documents, read_beir, subset
from benchmarks.metrics import percentile
from benchmarks.serving import Service, served
from benchmarks.suites import Context, SuiteResult
from benchmarks.systems import ingest, make_profile, open_client, profile_name_of
from ontology import Document

DATASET = "scifact"
LIMIT = 10
HTTP_TIMEOUT_S = 30.0
CALLER: tuple[str, ...] = ("public",)  # every SciFact passage is public
# (profile, workers): None is the service's default (a process per core where every store
# can be shared, else one); the server profile also runs one process to compare.
WORKERS: dict[str, tuple[int | None, ...]] = {"embedded": (None,), "server": (1, None)}


@dataclass
class Step:
    """What one step of the load saw."""

    clients: int
    latencies_ms: list[float] = field(default_factory=list[float])
    answered: int = 0
    errors: int = 0
    results: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0  # CPU time (user + system) of the service's processes in the step
    first_error: str | None = None

    def failed(self, what: str) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = what


@dataclass
class Memory:
    """The service's process tree: its resident memory and the most processes seen."""

    pid: int
    processes: int = 0
    before_mb: float = 0.0  # after the warm-up, before the first step
    after_mb: float = 0.0  # after the last step
    tracebacks: int = 0  # in the service's log

    def rss_mb(self) -> float:
        """VmRSS of the service process and every descendant, in MB (shared pages count in
        every process that maps them)."""
        pids = process_tree(self.pid)
        self.processes = max(self.processes, len(pids))
        return sum(_vm_rss_kb(p) for p in pids) / 1024


def run(ctx: Context, result: SuiteResult) -> None:
    """Every profile of the run: ingest once, then each worker setting under every load."""
    folder = ctx.data / "scifact"
    if not (folder / "corpus.jsonl").exists():
        result.status, result.reason = "skipped", f"no SciFact data under {folder.name}/"
        return
    preset = ctx.preset
    docs = passages(read_beir(folder), ctx)
    queries = query_texts(folder / "queries.jsonl")
    result.notes.append(
        f"service: {len(docs)} SciFact passages, {len(queries)} query texts cycled, "
        f"{os.cpu_count()} cores"
    )
    for profile_name in ctx.profiles:
        profile = make_profile(profile_name_of(profile_name), "service", ctx.work, ctx.servers)
        ctx.log(f"service ({profile_name}): ingest {len(docs)} passages")
        with open_client(profile, ctx.embedder) as client:
            stats = ingest(client, docs, progress=ctx.log)
        for workers in WORKERS[profile_name]:
            shown = "default" if workers is None else str(workers)
            ctx.log(f"service ({profile_name}): uda serve, workers {shown}")
            with served(profile, (CALLER,), workers=workers) as service:
                steps, memory = asyncio.run(load(ctx, service, queries))
                if service.process.poll() is not None:
                    raise RuntimeError(f"uda serve ended under load: {_tail(service.log)}")
            # Read once it stopped: a traceback on the way out counts too.
            memory.tracebacks = service.log.read_text(errors="replace").count("Traceback")
            if memory.tracebacks:
                result.notes.append(f"{profile_name}, workers {shown}: {_tail(service.log)}")
            for step, rss in steps:
                figures = step_figures(step, rss, memory, len(queries))
                if step.first_error is not None:
                    result.notes.append(
                        f"{profile_name}, workers {shown}, {step.clients} clients: "
                        f"{step.errors} errors, the first: {step.first_error}"
                    )
                ctx.log(
                    f"  {step.clients:>3} clients: {figures['qps']:.1f} q/s, p50 "
                    f"{figures['p50_ms']:.0f} ms, p99 {figures['p99_ms']:.0f} ms, "
                    f"{step.errors} errors, {figures['processes']:.0f} processes, "
                    f"{figures['rss_mb']:.0f} MB, CPU {figures['cpu_ms_per_answer']:.1f} ms "
                    f"an answer on {figures['cpu_cores']:.2f} cores"
                )
                suffix = "" if workers is None else f", --workers {workers}"
                result.add(
                    dataset=DATASET,
                    system="uda",
                    method=f"service: {step.clients} clients{suffix}",
                    profile=profile_name,
                    metrics=figures,
                    params={
                        "workers": workers,
                        "clients": step.clients,
                        "seconds": preset.service_seconds,
                        "warmup_s": preset.service_warmup_s,
                        "docs": len(docs),
                        "chunks": stats.chunks,
                        "queries": len(queries),
                        "limit": LIMIT,
                        "cores": os.cpu_count(),
                    },
                )


def passages(data: BeirSet, ctx: Context) -> list[Document]:
    """`service_docs` passages: the SciFact suite's first (the run has their vectors by
    then), then the others in corpus order."""
    preset = ctx.preset
    first = subset(data, queries=preset.scifact_queries, docs=preset.scifact_docs).corpus
    ids = [*first, *(d for d in data.corpus if d not in first)][: preset.service_docs]
    return documents(replace(data, corpus={d: data.corpus[d] for d in ids}))


def query_texts(path: Path) -> list[str]:
    """Every query text of the set (test and train), in file order."""
    texts: list[str] = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                text = str(json.loads(line)["text"]).strip()
                if text:
                    texts.append(text)
    if not texts:
        raise ValueError(f"no query texts in {path}")
    return texts


# -- the load -----------------------------------------------------------------------------
async def load(
    ctx: Context, service: Service, queries: Sequence[str]
) -> tuple[list[tuple[Step, float]], Memory]:
    """Warm-up, then every step of the preset; each step with the tree's RSS after it."""
    import httpx

    preset = ctx.preset
    most = max(preset.service_concurrency)
    cycle = itertools.cycle(queries)  # one cycle shared by every caller (one event loop)
    memory = Memory(service.process.pid)
    limits = httpx.Limits(max_connections=most + 2, max_keepalive_connections=most + 2)
    headers = {"X-API-Key": service.keys[CALLER]}
    steps: list[tuple[Step, float]] = []
    async with httpx.AsyncClient(
        base_url=service.base_url, timeout=HTTP_TIMEOUT_S, limits=limits, headers=headers
    ) as http:
        warm = await _step(http, cycle, most, preset.service_warmup_s)
        if not warm.answered:
            raise RuntimeError(f"uda serve answered no search: {warm.first_error}")
        memory.before_mb = memory.rss_mb()
        for clients in preset.service_concurrency:
            cpu_before = cpu_seconds(process_tree(memory.pid))
            step = await _step(http, cycle, clients, preset.service_seconds)
            step.cpu_s = cpu_seconds(process_tree(memory.pid)) - cpu_before
            if not step.answered:
                raise RuntimeError(
                    f"uda serve answered no search at {clients} clients: {step.first_error}"
                )
            steps.append((step, memory.rss_mb()))
    memory.after_mb = steps[-1][1]
    return steps, memory


async def _step(http: Any, cycle: Iterator[str], clients: int, seconds: float) -> Step:
    """`clients` callers searching until `seconds` have passed (the last requests finish)."""
    import httpx

    step = Step(clients)
    started = time.perf_counter()
    deadline = started + seconds

    async def caller() -> None:
        while time.perf_counter() < deadline:
            body = {"query": next(cycle), "limit": LIMIT}
            sent = time.perf_counter()
            try:
                response = await http.post("/v1/search", json=body)
            except httpx.HTTPError as exc:
                step.latencies_ms.append((time.perf_counter() - sent) * 1000)
                step.failed(f"{type(exc).__name__}: {exc}")
                continue
            step.latencies_ms.append((time.perf_counter() - sent) * 1000)
            if response.status_code != 200:
                step.failed(f"HTTP {response.status_code}: {response.text[:300]}")
                continue
            step.answered += 1
            step.results += len(response.json().get("results", []))

    await asyncio.gather(*(caller() for _ in range(clients)))
    step.wall_s = time.perf_counter() - started
    return step


def step_figures(step: Step, rss_mb: float, memory: Memory, n_queries: int) -> dict[str, float]:
    walls = step.latencies_ms
    requests = step.answered + step.errors
    return {
        "answered": float(step.answered),
        "errors": float(step.errors),
        "qps": step.answered / step.wall_s if step.wall_s else 0.0,
        "p50_ms": percentile(walls, 50),
        "p95_ms": percentile(walls, 95),
        "p99_ms": percentile(walls, 99),
        "max_ms": max(walls),
        "results_mean": step.results / step.answered if step.answered else 0.0,
        "wall_s": step.wall_s,
        # What an answer costs the machine, and how many cores the service kept busy: a
        # service held by one core's worth of work (the GIL) shows ~1 here at any load.
        "cpu_ms_per_answer": step.cpu_s * 1000 / step.answered if step.answered else 0.0,
        "cpu_cores": step.cpu_s / step.wall_s if step.wall_s else 0.0,
        "query_passes": requests / n_queries,
        "rss_mb": rss_mb,
        "rss_before_mb": memory.before_mb,
        "rss_after_mb": memory.after_mb,
        "processes": float(memory.processes),
        "log_tracebacks": float(memory.tracebacks),
    }


# -- the process tree -----------------------------------------------------------------------
def process_tree(pid: int) -> list[int]:
    """`pid` and every descendant still running (from /proc/<pid>/task/*/children)."""
    found = [pid]
    i = 0
    while i < len(found):
        try:  # listing the tasks of a process that ends meanwhile raises (Python 3.11)
            tasks = list(Path(f"/proc/{found[i]}/task").glob("*/children"))
        except OSError:
            tasks = []
        for children in tasks:
            try:
                found += [int(c) for c in children.read_text().split()]
            except OSError:  # the task ended meanwhile
                continue
        i += 1
    return found


def cpu_seconds(pids: Sequence[int]) -> float:
    """CPU seconds (user + system) these processes have used so far (ended ones count 0)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def _vm_rss_kb(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # the process ended meanwhile
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _tail(log: Path, chars: int = 2000) -> str:
    return log.read_text(errors="replace")[-chars:]


__all__ = [
    "WORKERS",
    "cpu_seconds",
    "load",
    "passages",
    "process_tree",
    "query_texts",
    "run",
    "step_figures",
]
