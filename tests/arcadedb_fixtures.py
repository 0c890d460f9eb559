"""A real ArcadeDB server for the test modules that need one, and connectors on it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from connectors.arcadedb.connector import ArcadeDBConnector
from uda.config import ConnectorSpec, Profile
from uda.services.arcadedb import ArcadeDBService
from uda.services.base import ServiceInfo


@contextmanager
def running_arcadedb(folder: Path) -> Iterator[tuple[ArcadeDBService, ServiceInfo]]:
    """A real ArcadeDB server in `folder`, stopped at the end whatever happens."""
    service = ArcadeDBService(folder)
    try:
        info = service.up()
        yield service, info
    finally:
        service.down()


def remote(info: ServiceInfo, database: str | None = None, **kwargs: Any) -> ArcadeDBConnector:
    """A connector over HTTP to the server, on its own database unless one is named."""
    return ArcadeDBConnector(
        url=f"http://{info.host}:{info.port}",
        database=database or f"t_{uuid.uuid4().hex[:12]}",
        user=info.user or "root",
        password=info.password,
        **kwargs,
    )


def server_profile(
    root: Path,
    dsn: str,
    arcadedb: ServiceInfo,
    *,
    database: str,
    exact: bool,
    schema: str | None = None,
) -> Profile:
    """The server profile over running servers: PostgreSQL (a schema of its own if given)
    and ArcadeDB (the named database)."""
    postgres: dict[str, str | bool] = {"dsn": dsn, "exact": exact}
    if schema is not None:
        postgres["schema"] = schema
    return Profile(
        name="server",
        root=root,
        connectors=(
            ConnectorSpec(name="postgres", options=postgres),
            ConnectorSpec(
                name="arcadedb-graph",
                options={
                    "url": f"http://{arcadedb.host}:{arcadedb.port}",
                    "database": database,
                    "user": arcadedb.user or "root",
                    "password": arcadedb.password,
                },
            ),
        ),
    )
