"""Replicas: searches over PostgreSQL hot standbys, and replication lag under ingest (issue 19).

Server profile only. The run's PostgreSQL gets two hot standbys and waits for one of them on
every commit, as `uda services up --replicas 2` sets it up (docs/adr/0033-failover.md).

- **Lag during a bulk ingest**: the service suite's SciFact passages are ingested through the
  public client while a thread reads `pg_stat_replication` on the primary every
  `LAG_EVERY_S`: how far each standby's replay is behind the primary's WAL (bytes) and
  PostgreSQL's own `replay_lag` (ms). The ingest's passages/s are reported beside it (the
  synchronous quorum is part of what a write costs), and the schema's bytes on disk per
  chunk (every table and index: what each copy holds).
- **Search QPS with 0, 1 and 2 standbys under the same load**: `uda serve` (its default
  workers) on the same store, its profile listing no standby, one, then two; the service
  suite's load (`benchmarks.suites.service.load`: a warm-up, then each concurrency of the
  preset). Each row says how the transactions of its setting (warm-up and every step)
  spread over the servers (`pg_stat_database.xact_commit` before and after, on every
  node): where the reads went; and the CPU each server spent per answered search
  (user + system time of its process tree, from /proc): the primary, each standby,
  ArcadeDB, `uda serve` and the load generator.

On one machine every standby competes with the primary and the service for the same cores;
the rows show what that costs here, not what separate machines would give (docs/scale.md).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchmarks.datasets import read_beir
from benchmarks.metrics import percentile
from benchmarks.serving import served
from benchmarks.suites import Context, SuiteResult
from benchmarks.suites.service import (
    CALLER,
    DATASET,
    LIMIT,
    cpu_seconds,
    load,
    passages,
    process_tree,
    query_texts,
    step_figures,
)
from benchmarks.systems import ingest, open_client
from uda.config import ConnectorSpec, Profile

STANDBY_COUNTS = (0, 1, 2)
LAG_EVERY_S = 0.05
_LAG_SQL = (
    "SELECT (pg_current_wal_lsn() - replay_lsn)::bigint, "
    "extract(epoch FROM replay_lag) * 1000 FROM pg_stat_replication"
)
_COMMITS_SQL = "SELECT sum(xact_commit)::bigint FROM pg_stat_database"


@dataclass
class LagSampler:
    """Reads the standbys' lag on the primary in a thread until stopped."""

    primary: Any
    bytes_behind: list[float] = field(default_factory=list[float])
    replay_ms: list[float] = field(default_factory=list[float])
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> LagSampler:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _sample(self) -> None:
        from uda.services.postgres_failover import admin_rows

        while not self._stop.wait(LAG_EVERY_S):
            for behind, lag_ms in admin_rows(self.primary, _LAG_SQL):
                if behind is not None:
                    self.bytes_behind.append(float(behind))
                if lag_ms is not None:
                    self.replay_ms.append(float(lag_ms))


def run(ctx: Context, result: SuiteResult) -> None:
    """Lag under ingest, then the service's load with 0, 1 and 2 standbys."""
    if "server" not in ctx.profiles:
        result.status, result.reason = "skipped", "needs the server profile"
        return
    folder = ctx.data / DATASET
    if not (folder / "corpus.jsonl").exists():
        result.status, result.reason = "skipped", f"no SciFact data under {folder.name}/"
        return
    docs = passages(read_beir(folder), ctx)
    queries = query_texts(folder / "queries.jsonl")
    primary = ctx.servers.postgres
    standbys = ctx.servers.standbys(max(STANDBY_COUNTS))
    profile = ctx.servers.profile("replicas")
    ctx.log(f"replicas: ingest {len(docs)} passages, {len(standbys)} synchronous standbys")
    with LagSampler(primary) as lag, open_client(profile, ctx.embedder) as client:
        stats = ingest(client, docs, progress=ctx.log)
    stored = _schema_bytes(primary, profile)
    result.add(
        dataset=DATASET,
        system="uda",
        method=f"replication lag during ingest, {len(standbys)} standbys",
        profile="server",
        metrics={
            "passages_per_s": stats.elements / stats.seconds if stats.seconds else 0.0,
            **_spread("lag_bytes", lag.bytes_behind),
            **_spread("replay_lag_ms", lag.replay_ms),
            "samples": float(len(lag.bytes_behind)),
            "bytes_per_chunk": stored / stats.chunks if stats.chunks else 0.0,
        },
        params={"docs": len(docs), "chunks": stats.chunks, "every_s": LAG_EVERY_S},
    )
    nodes = [primary, *standbys]
    for count in STANDBY_COUNTS:
        routed = _with_standbys(profile, standbys[:count])
        ctx.log(f"replicas: uda serve with {count} standbys")
        before = _commits(nodes)
        with served(routed, (CALLER,)) as service:
            groups = _groups(nodes, ctx, service.process.pid)
            cpu_before = _cpu(groups)
            steps, memory = asyncio.run(load(ctx, service, queries))
            cpu_used = {k: v - cpu_before[k] for k, v in _cpu(groups).items()}
        spread = [after - earlier for after, earlier in zip(_commits(nodes), before, strict=True)]
        answered = sum(step.answered for step, _ in steps)
        cpu_figures = {
            f"cpu_ms_per_search_{name}": seconds * 1000 / answered
            for name, seconds in cpu_used.items()
        }
        for step, rss in steps:
            figures = step_figures(step, rss, memory, len(queries))
            ctx.log(
                f"  {step.clients:>3} clients: {figures['qps']:.1f} q/s, p99 "
                f"{figures['p99_ms']:.0f} ms, {step.errors} errors"
            )
            result.add(
                dataset=DATASET,
                system="uda",
                method=f"service over {count} standbys: {step.clients} clients",
                profile="server",
                metrics={
                    **figures,
                    **{f"transactions_{_node_name(i)}": float(n) for i, n in enumerate(spread)},
                    **cpu_figures,
                },
                params={
                    "standbys": count,
                    "clients": step.clients,
                    "seconds": ctx.preset.service_seconds,
                    "docs": len(docs),
                    "limit": LIMIT,
                    "cores": os.cpu_count(),
                },
            )


def _spread(name: str, values: Sequence[float]) -> dict[str, float]:
    """p50, p95 and max of `values` as `<name>_p50`...; nothing when nothing was sampled."""
    if not values:
        return {}
    return {
        f"{name}_p50": percentile(values, 50),
        f"{name}_p95": percentile(values, 95),
        f"{name}_max": max(values),
    }


def _with_standbys(profile: Profile, standbys: Sequence[Any]) -> Profile:
    """`profile` with its PostgreSQL connector reading on `standbys`."""
    from uda.services.postgres import dsn

    dsns = [dsn(s.status()) for s in standbys]
    specs = tuple(
        ConnectorSpec(name=spec.name, options={**spec.options, "standbys": dsns})
        if spec.name == "postgres" and dsns
        else spec
        for spec in profile.connectors
    )
    return replace(profile, connectors=specs, root=profile.root / f"standbys-{len(dsns)}")


def _commits(nodes: Sequence[Any]) -> list[int]:
    """Transactions committed so far on each node (read-only ones included)."""
    from uda.services.postgres_failover import admin_rows

    time.sleep(0.6)  # statistics reach pg_stat_database within half a second
    return [int(admin_rows(node, _COMMITS_SQL)[0][0] or 0) for node in nodes]


def _groups(
    nodes: Sequence[Any], ctx: Context, serve_pid: int
) -> dict[str, Callable[[], list[int]]]:
    """Each process group whose CPU is counted, as a function giving its pids now."""

    def server(node: Any) -> Callable[[], list[int]]:
        return lambda: _pids(node.status())

    groups = {_node_name(i): server(node) for i, node in enumerate(nodes)}
    groups["arcadedb"] = lambda: _pids(ctx.servers.arcadedb.status())
    groups["serve"] = lambda: process_tree(serve_pid)
    groups["load"] = lambda: [os.getpid()]
    return groups


def _pids(info: Any) -> list[int]:
    return [] if info is None or not info.pid else process_tree(int(info.pid))


def _cpu(groups: dict[str, Callable[[], list[int]]]) -> dict[str, float]:
    """CPU seconds (user + system) each group's processes have used so far."""
    return {name: cpu_seconds(pids()) for name, pids in groups.items()}


def _schema_bytes(primary: Any, profile: Profile) -> float:
    """Bytes on disk of the profile's PostgreSQL schema: every table with its indexes."""
    from uda.services.postgres import DATABASE
    from uda.services.postgres_failover import admin_rows

    schema = next(s.options["schema"] for s in profile.connectors if s.name == "postgres")
    rows = admin_rows(
        primary,
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
        DATABASE,
        (schema,),
    )
    return float(rows[0][0])


def _node_name(index: int) -> str:
    return "primary" if index == 0 else f"standby{index}"


__all__ = ["STANDBY_COUNTS", "run"]
