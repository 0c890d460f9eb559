"""`uda services up | down | status`: the server profile's servers, from installed packages.

`up` starts PostgreSQL (+pgvector), ArcadeDB and, on request, a Chroma server on loopback,
each with generated credentials and its data under one folder, then writes `server.toml`
there: a profile that `uda --profile <folder>/server.toml ...` and `uda.connect()` use.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from uda.services.base import ManagedService, ServiceInfo

SERVICES: dict[str, str] = {
    "postgres": "uda.services.postgres:PostgresService",
    "arcadedb": "uda.services.arcadedb:ArcadeDBService",
    "chroma": "uda.services.chroma:ChromaService",
}
DEFAULT = ("postgres", "arcadedb")
PROFILE_NAME = "server.toml"


def service(name: str, root: Path) -> ManagedService:
    """The managed service `name`, keeping its data under `root`."""
    module_name, _, attribute = SERVICES[name].partition(":")
    cls: type[ManagedService] = getattr(importlib.import_module(module_name), attribute)
    return cls(root)


def _toml(value: str | int) -> str:
    # JSON string escapes are valid TOML basic-string escapes.
    return json.dumps(value)


def profile_text(infos: dict[str, ServiceInfo]) -> str:
    """The `server` profile for these running services."""
    lines = [
        "# Written by `uda services up`; holds credentials: keep it private.",
        "[uda]",
        'profile = "server"',
        "",
    ]
    if "postgres" in infos:
        from uda.services.postgres import dsn

        lines += [
            "[[connectors]]",
            'name = "postgres"',
            f"dsn = {_toml(dsn(infos['postgres']))}",
            "",
        ]
    if "arcadedb" in infos:
        info = infos["arcadedb"]
        lines += [
            "[[connectors]]",
            'name = "arcadedb-graph"',
            f"url = {_toml(f'http://{info.host}:{info.port}')}",
            f"database = {_toml(info.database or 'uda')}",
            f"user = {_toml(info.user or 'root')}",
            f"password = {_toml(info.password or '')}",
            "",
        ]
    if "chroma" in infos:
        info = infos["chroma"]
        lines += [
            "[[connectors]]",
            'name = "chroma"',
            f"host = {_toml(info.host)}",
            f"port = {info.port}",
            "",
        ]
    return "\n".join(lines)


def write_profile(root: Path, infos: dict[str, ServiceInfo]) -> Path:
    """Write `<root>/server.toml` readable by the owner only; returns its path."""
    import os

    root.mkdir(parents=True, exist_ok=True)
    target = root / PROFILE_NAME
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(profile_text(infos))
    return target


def up(root: Path, names: tuple[str, ...] = DEFAULT) -> tuple[dict[str, ServiceInfo], Path]:
    """Start (or find running) each service and write the profile."""
    infos = {name: service(name, root).up() for name in names}
    return infos, write_profile(root, infos)


def down(root: Path, *, purge: bool = False) -> list[str]:
    """Stop every service that has state under `root`; returns their names.

    With `purge`, delete their data too (and the profile that pointed at it).
    """
    stopped: list[str] = []
    for name in SERVICES:
        if (root / name).exists():
            managed = service(name, root)
            if purge:
                managed.destroy()
            else:
                managed.down()
            stopped.append(name)
    if purge:
        (root / PROFILE_NAME).unlink(missing_ok=True)
    return stopped


def status(root: Path) -> dict[str, ServiceInfo | None]:
    """Each known service with state under `root`: running (its info) or stopped (None)."""
    return {name: service(name, root).status() for name in SERVICES if (root / name).exists()}
