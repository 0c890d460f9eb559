"""UDA under test: profiles (embedded, server), the servers behind them, ingest and searches.

The server profile is PostgreSQL+pgvector (system of record, HNSW vectors, lexical leg) and
an ArcadeDB server (graph), both started by `uda.services` into a temporary folder on the
first request and stopped in `Servers.close()`, which the runner calls in a `finally`. Each
corpus gets its own PostgreSQL schema and ArcadeDB database, so corpora never mix.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import uda
from ontology import Element, Relation
from uda.config import ConnectorSpec, Profile, embedded_profile
from uda.embedding import Embedder
from uda.query.results import SearchResponse

ProfileName = Literal["embedded", "server"]
PROFILES: tuple[ProfileName, ...] = ("embedded", "server")
PHASES = ("embed", "phase1", "phase2", "phase3", "total")
_NAME = re.compile(r"[^a-z0-9_]+")


class Servers:
    """PostgreSQL and ArcadeDB servers for the server profile, started on first use."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._postgres: Any = None
        self._arcadedb: Any = None
        self._dsn: str | None = None
        self._arcade: Any = None
        self._standbys: list[Any] = []
        self.start_seconds: float | None = None

    def _up(self) -> None:
        if self._dsn is not None:
            return
        from uda.services.arcadedb import ArcadeDBService
        from uda.services.postgres import PostgresService, dsn

        started = time.perf_counter()
        self._postgres = PostgresService(self.root)
        self._arcadedb = ArcadeDBService(self.root)
        self._dsn = dsn(self._postgres.up())
        self._arcade = self._arcadedb.up()
        self.start_seconds = time.perf_counter() - started

    @property
    def postgres(self) -> Any:
        """The PostgreSQL service (a `PostgresService`), started."""
        self._up()
        return self._postgres

    @property
    def arcadedb(self) -> Any:
        """The ArcadeDB service (an `ArcadeDBService`), started."""
        self._up()
        return self._arcadedb

    def standbys(self, count: int) -> list[Any]:
        """`count` hot standbys of the PostgreSQL server (`PostgresStandby`), started, and the
        primary waiting for one of them on each commit, as `uda services up --replicas`."""
        from uda.services import postgres_failover
        from uda.services.postgres_standby import PostgresStandby

        self._up()
        while len(self._standbys) < count:
            standby = PostgresStandby(self._postgres, len(self._standbys) + 1)
            standby.up()
            self._standbys.append(standby)
        postgres_failover.synchronise(self._postgres, self._standbys)
        return self._standbys[:count]

    def profile(self, corpus: str, *, exact: bool = False) -> Profile:
        """A server profile for one corpus (own schema and database), starting the servers."""
        self._up()
        name = _NAME.sub("_", corpus.lower()).strip("_")[:40] or "bench"
        arcade = self._arcade
        return Profile(
            name="server",
            root=self.root / "profiles" / name,
            connectors=(
                ConnectorSpec(
                    name="postgres",
                    options={"dsn": self._dsn, "exact": exact, "schema": f"b_{name}"},
                ),
                ConnectorSpec(
                    name="arcadedb-graph",
                    options={
                        "url": f"http://{arcade.host}:{arcade.port}",
                        "database": f"b_{name}",
                        "user": arcade.user or "root",
                        "password": arcade.password,
                    },
                ),
            ),
        )

    def close(self) -> None:
        """Stop both servers and delete their data (safe to call when never started)."""
        try:
            if self._arcadedb is not None:
                self._arcadedb.down()
            for standby in self._standbys:
                standby.destroy()
        finally:
            self._standbys = []
            if self._postgres is not None:
                self._postgres.destroy()
            self._dsn = None


def profile_name_of(name: str) -> ProfileName:
    """A run's profile name (`--profiles`) as the `ProfileName` it is."""
    if name == "embedded":
        return "embedded"
    if name == "server":
        return "server"
    raise ValueError(f"unknown profile {name!r}")


def make_profile(kind: ProfileName, corpus: str, root: Path, servers: Servers) -> Profile:
    """The embedded or server profile for one corpus."""
    if kind == "embedded":
        return embedded_profile(root / "embedded" / _NAME.sub("_", corpus.lower()))
    return servers.profile(corpus)


@dataclass(kw_only=True)
class IngestStats:
    """What an ingest into UDA cost."""

    seconds: float = 0.0
    elements: int = 0
    relations: int = 0
    chunks: int = 0
    embedded: int = 0

    def to_dict(self) -> dict[str, float]:
        """Plain figures, with rates."""
        return {
            "seconds": self.seconds,
            "elements": float(self.elements),
            "relations": float(self.relations),
            "chunks": float(self.chunks),
            "embedded": float(self.embedded),
            "chunks_per_s": self.chunks / self.seconds if self.seconds else 0.0,
        }


def ingest(
    client: uda.Client,
    elements: Sequence[Element],
    relations: Sequence[Relation] = (),
    *,
    batch: int = 500,
    progress: Callable[[str], None] | None = None,
) -> IngestStats:
    """Ingest elements (in batches), then relations (their endpoints exist by then)."""
    stats = IngestStats()
    started = time.perf_counter()
    for start in range(0, len(elements), batch):
        report = client.ingest(elements[start : start + batch])
        stats.chunks += report.chunks
        stats.embedded += report.embedded
        stats.elements += report.written
        if progress and start and start % (batch * 10) == 0:
            progress(f"  ingested {start}/{len(elements)} elements")
    for start in range(0, len(relations), batch * 4):
        report = client.ingest(relations=relations[start : start + batch * 4])
        stats.relations += report.edges
    stats.seconds = time.perf_counter() - started
    return stats


@dataclass(kw_only=True)
class Timed:
    """Per-search timings: the client's wall time and the planner's phases."""

    wall_ms: list[float] = field(default_factory=list[float])
    phases: dict[str, list[float]] = field(default_factory=dict[str, list[float]])

    def add(self, wall_ms: float, response: SearchResponse) -> None:
        """Record one search."""
        self.wall_ms.append(wall_ms)
        for phase, value in plan_timings(response).items():
            self.phases.setdefault(phase, []).append(value)

    def excluding_embed(self) -> list[float]:
        """Planner totals minus the query embedding, per search."""
        totals = self.phases.get("total", [])
        embeds = self.phases.get("embed", [0.0] * len(totals))
        return [t - e for t, e in zip(totals, embeds, strict=True)]


def plan_timings(response: SearchResponse) -> Mapping[str, float]:
    """The planner's phase timings of a response (`plan.timings_ms`)."""
    plan = getattr(response, "plan", None)
    if plan is None:
        plan = response.explain().plan
    return plan.timings_ms


def search_run(
    client: uda.Client,
    queries: Mapping[str, str],
    *,
    limit: int,
    clearance: Sequence[str] = (),
    to_doc: Callable[[str], str | None] = lambda e: e,
    timed: Timed | None = None,
    **options: Any,
) -> dict[str, list[str]]:
    """Rank every query; element ids are mapped to dataset ids by `to_doc` (None: dropped)."""
    run: dict[str, list[str]] = {}
    for qid, text in queries.items():
        started = time.perf_counter()
        response = client.search(text, limit=limit, clearance_scope=list(clearance), **options)
        wall = (time.perf_counter() - started) * 1000
        if timed is not None:
            timed.add(wall, response)
        ranked = [to_doc(r.element_id) for r in response.results]
        run[qid] = [d for d in ranked if d is not None]
    return run


def strip_prefix(prefix: str) -> Callable[[str], str | None]:
    """An id mapper that keeps ids with `prefix` (without it) and drops the others."""

    def mapper(element_id: str) -> str | None:
        return element_id[len(prefix) :] if element_id.startswith(prefix) else None

    return mapper


def open_client(profile: Profile, embedder: Embedder) -> uda.Client:
    """A sync client on a profile with the run's embedder."""
    return uda.Client(profile, embedder=embedder)


def phase_summary(timed: Timed, summarise: Callable[[Sequence[float]], dict[str, float]]) -> dict:
    """Latency summaries: client wall, planner total, excluding embedding, and per phase."""
    out: dict[str, Any] = {"wall": summarise(timed.wall_ms)}
    for phase in PHASES:
        if timed.phases.get(phase):
            out[phase] = summarise(timed.phases[phase])
    if timed.phases.get("total"):
        out["total_excl_embed"] = summarise(timed.excluding_embed())
    return out


def chunked(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
