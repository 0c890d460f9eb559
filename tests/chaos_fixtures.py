"""The shared ground of the chaos tests (tests/test_chaos*.py): real PostgreSQL and ArcadeDB
servers, a profile on them with short deadlines, and ways to stop their processes.

`servers` (module-scoped: each test module starts servers of its own, as the tests stop and
kill them) and `profile` (a fresh schema and database per test) are fixtures: a test module
imports both (`profile` asks for `servers` by name) and lists them in its `__all__`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import uda
from ontology import Document
from uda.config import Profile, SearchDefaults
from uda.errors import BackendUnavailableError
from uda.query.deadlines import Deadlines
from uda.services.arcadedb import ArcadeDBService
from uda.services.base import ServiceInfo
from uda.services.postgres import PostgresService

DEADLINES = Deadlines(call_s=0.5, search_s=2.0, connect_s=2.0, write_s=2.0)
BOUND_S = DEADLINES.search_s + 1.5  # and a margin for a loaded machine
RECOVERY_S = 5.0  # the bound: whole answers again within 5 s of the return
PUBLIC = ["public"]
# Written while a backend is away.
LATE_NOTE = Document(element_id="late-note", name="late note", text="written during an outage")
EVERYONE = ["restricted", "project:*"]


@dataclasses.dataclass(frozen=True)
class Servers:
    """The real servers of the test module that started them, and how to find their processes."""

    url: str
    postgres: PostgresService
    arcadedb: ArcadeDBService

    @property
    def arcade(self) -> ServiceInfo:
        info = self.arcadedb.status()
        assert info is not None
        assert info.pid is not None
        return info

    def postmaster(self) -> int:
        state = self.postgres.load_state() or {}
        pid_file = Path(state["data_dir"]) / "postmaster.pid"
        return int(pid_file.read_text().split("\n", 1)[0])


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    pytest.importorskip("psycopg")
    pytest.importorskip("arcadedb_embedded")
    from arcadedb_fixtures import running_arcadedb
    from postgres_fixtures import running_postgres

    root = tmp_path_factory.mktemp("chaos")
    with running_postgres(root / "pg") as (pg, url), running_arcadedb(root / "arc") as (arc, _):
        yield Servers(url, pg, arc)


@pytest.fixture
def profile(servers: Servers, tmp_path: Path) -> Profile:
    from arcadedb_fixtures import server_profile

    unique = uuid.uuid4().hex[:10]
    base = server_profile(
        tmp_path,
        servers.url,
        servers.arcade,
        schema=f"s_{unique}",
        database=f"d_{unique}",
        exact=True,
    )
    return dataclasses.replace(base, search=SearchDefaults(deadlines=DEADLINES))


@contextmanager
def paused(pids: list[int]) -> Iterator[None]:
    """The processes stopped (as a hung server is), resumed at the end whatever happens.

    Stopped parent first (it starts no child after), resumed children first: a child that
    had exited just before is reaped by its parent once that runs, and is gone then.
    """
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in reversed(pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def cluster(postmaster: int) -> list[int]:
    """The postmaster and every process it started (each connection has its own)."""
    children: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == postmaster:
                children.append(int(entry.name))
    return [postmaster, *children]


def recovered(client: uda.Client) -> Any:
    """The first whole answer once the backend is back (failing after `RECOVERY_S`)."""
    deadline = time.monotonic() + RECOVERY_S
    while True:
        try:
            answer = client.search("payment retries", limit=5, clearance_scope=EVERYONE)
        except BackendUnavailableError:
            if time.monotonic() > deadline:
                raise
        else:
            if not answer.degraded or time.monotonic() > deadline:
                return answer
        time.sleep(0.2)


def visible(result: object, clearance: list[str]) -> bool:
    from uda.query.clearance import Clearance

    props = result.properties  # type: ignore[attr-defined]
    allowed = Clearance.parse(clearance)
    rank = {"public": 0, "internal": 1, "confidential": 2, "restricted": 3}[props["sensitivity"]]
    scope = props.get("scope")
    return rank <= allowed.level.rank and (
        scope is None or allowed.all_projects or scope in allowed.projects
    )
