"""`uda services up | down | status`: the server profile's servers, from installed packages.

`up` starts PostgreSQL (+pgvector), ArcadeDB and, on request, a Chroma server on loopback,
each with generated credentials and its data under one folder, then writes `server.toml`
there: a profile that `uda --profile <folder>/server.toml ...` and `uda.connect()` use.
With `replicas`, PostgreSQL gets that many hot standbys (`uda.services.postgres_standby`),
listed in the profile for the connector to read from (`connectors.postgres.replicas`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from uda.services import postgres_failover
from uda.services.arcadedb import ArcadeDBService
from uda.services.base import ManagedService, ServiceInfo
from uda.services.chroma import ChromaService
from uda.services.postgres import PostgresService, dsn

# Every service `uda services` knows, in the order `down`, `status` and the profile list them.
# Their modules load only the standard library and the error types: importing all is cheap.
SERVICES: tuple[type[ManagedService], ...] = (PostgresService, ArcadeDBService, ChromaService)
DEFAULT: tuple[str, ...] = tuple(cls.name for cls in SERVICES if cls.started_by_default)
PROFILE_NAME = "server.toml"

_BY_NAME: dict[str, type[ManagedService]] = {cls.name: cls for cls in SERVICES}


def service(name: str, root: Path) -> ManagedService:
    """The managed service `name`, keeping its data under `root`.

    Raises:
        KeyError: no service has this name.
    """
    return _BY_NAME[name](root)


def _toml(value: str | int | Sequence[str]) -> str:
    # JSON string escapes are valid TOML basic-string escapes, JSON integers TOML ones, and
    # a JSON array of strings a TOML array.
    return json.dumps(value if isinstance(value, str | int) else list(value))


def profile_text(infos: dict[str, ServiceInfo], standby_infos: Sequence[ServiceInfo] = ()) -> str:
    """The `server` profile for these running services, keyed by service name.

    `standby_infos` are PostgreSQL's hot standbys: the connector reads there.
    """
    lines = [
        "# Written by `uda services up`; holds credentials: keep it private.",
        "[uda]",
        'profile = "server"',
        "",
    ]
    # Registry order, not the order of `infos`: the same servers always give the same file.
    for cls in SERVICES:
        info = infos.get(cls.name)
        if info is None:
            continue
        options: dict[str, str | int | Sequence[str]] = {**cls.connector_options(info)}
        if cls is PostgresService and standby_infos:
            # Every node in both: whichever is the primary after a failover, the profile
            # still holds (`uda.services.postgres_failover`).
            every = [info, *standby_infos]
            options["dsn"] = postgres_failover.primary_dsn(every)
            options["standbys"] = [dsn(node) for node in every]
        lines += [
            "[[connectors]]",
            f"name = {_toml(cls.connector)}",
            *(f"{key} = {_toml(value)}" for key, value in options.items()),
            "",
        ]
    return "\n".join(lines)


def write_profile(
    root: Path, infos: dict[str, ServiceInfo], standby_infos: Sequence[ServiceInfo] = ()
) -> Path:
    """Write `<root>/server.toml` readable by the owner only; returns its path."""
    import os

    root.mkdir(parents=True, exist_ok=True)
    target = root / PROFILE_NAME
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(profile_text(infos, standby_infos))
    return target


def up(
    root: Path, names: tuple[str, ...] = DEFAULT, *, replicas: int | None = None
) -> tuple[dict[str, ServiceInfo], list[ServiceInfo], Path]:
    """Start (or find running) each service and write the profile.

    With PostgreSQL, `replicas` hot standbys are started too (None: as many as were
    made before; `uda.services.postgres_failover.bring_up`).
    """
    infos: dict[str, ServiceInfo] = {}
    standby_infos: list[ServiceInfo] = []
    for name in names:
        if name == "postgres":
            infos[name], standby_infos = postgres_failover.bring_up(root, replicas)
        else:
            infos[name] = service(name, root).up()
    return infos, standby_infos, write_profile(root, infos, standby_infos)


def down(root: Path, *, purge: bool = False) -> list[str]:
    """Stop every service that has state under `root`; returns their names.

    With `purge`, delete their data too (and the profile that pointed at it).
    """
    stopped: list[str] = []
    # Standbys first: stopped after their primary, they would keep asking it for WAL.
    for standby in postgres_failover.standbys(root):
        if purge:
            standby.destroy()
        else:
            standby.down()
        stopped.append(standby.home.name)
    for cls in SERVICES:
        if (root / cls.name).exists():
            managed = cls(root)
            if purge:
                managed.destroy()
            else:
                managed.down()
            stopped.append(cls.name)
    if purge:
        (root / PROFILE_NAME).unlink(missing_ok=True)
    return stopped


def status(root: Path) -> dict[str, ServiceInfo | None]:
    """Each known service with state under `root`: running (its info) or stopped (None)."""
    found = {cls.name: cls(root).status() for cls in SERVICES if (root / cls.name).exists()}
    return found | {
        standby.home.name: standby.status() for standby in postgres_failover.standbys(root)
    }
