"""A hot standby of a local PostgreSQL primary: PostgreSQL's own streaming replication.

The first `up()` copies the running primary with `pg_basebackup` (`-X stream`, `-R`: the copy
gets `standby.signal` and the primary's address in `postgresql.auto.conf`), then starts it on
a port of its own. From then on the primary streams its write-ahead log to it; it answers
reads (`hot_standby`, PostgreSQL's default) and refuses writes. Roles, passwords, the
database and its extensions are the primary's: they are data, and replicated.

It runs like the primary (`uda.services.postgres`): as an unprivileged account when UDA runs
as root, from the same binaries, with its data under its own service folder
(`<root>/postgres-standby-<n>/`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from uda.errors import ConnectorError
from uda.services.base import ServiceInfo
from uda.services.postgres import ADMIN_USER, HOST, PostgresService


class PostgresStandby(PostgresService):
    """Hot standby number `index` of `primary` (which must be running on its first `up()`).

    Args:
        primary: the primary's service (its folder holds its address and admin password).
        index: which standby (1, 2, ...): its folder is `<primary root>/postgres-standby-<n>`.
    """

    started_by_default = False

    def __init__(self, primary: PostgresService, index: int) -> None:
        super().__init__(primary.root, run_as=primary.run_as)
        if index < 1:
            raise ValueError("standby index starts at 1")
        self.primary = primary
        self.index = index
        self.home = self.root / f"postgres-standby-{index}"

    def _bring_up(self) -> ServiceInfo:
        """Start the standby, copying the primary first if it has no data yet."""
        state = self.load_state() or {}
        made = state.get("data_dir") and (Path(state["data_dir"]) / "PG_VERSION").exists()
        if not made and self.primary.status() is None:
            raise ConnectorError(self.name, "the primary must be running to make a standby")
        return super()._bring_up()

    def _identity(self, previous: Mapping[str, Any]) -> dict[str, Any]:
        """The primary's: roles and passwords are data, replicated with the rest."""
        del previous
        primary = self.primary.load_state() or {}
        keys = ("host", "user", "password", "database", "admin_user", "admin_password")
        return {**{key: primary[key] for key in keys}, "primary_port": primary["port"]}

    def _make_data(
        self,
        account: Any,  # the primary module's account record, or None
        bin_dir: Path,
        base: Path,
        data: Path,
        state: Mapping[str, Any],
    ) -> None:
        """`pg_basebackup` of the running primary into `data`, set up to follow it."""
        del base
        if data.exists():  # a copy that died half-way: start it again
            shutil.rmtree(data)
        data.mkdir(mode=0o700, parents=True)
        if account is not None:
            os.chown(data, account.uid, account.gid)
        # The connection string, password included, is what `-R` writes for the standby to
        # reconnect with (postgresql.auto.conf, readable by the server's account only).
        conninfo = " ".join(
            f"{key}={quoted(str(value))}"
            for key, value in (
                ("host", HOST),
                ("port", int(state["primary_port"])),
                ("user", ADMIN_USER),
                ("password", state["admin_password"]),
                ("application_name", f"standby{self.index}"),
            )
        )
        self._pg(
            account,
            [
                str(bin_dir / "pg_basebackup"),
                *("-D", str(data), "-d", conninfo),
                *("-X", "stream", "-R", "--checkpoint=fast", "--no-password"),
            ],
            what="pg_basebackup",
            data=data,
        )

    def _bootstrap(self, state: Mapping[str, Any]) -> None:
        """Nothing: roles, database and extensions come with the copy (and it is read-only)."""
        del state


def quoted(value: str) -> str:
    """A libpq connection-string value: single-quoted, backslashes and quotes escaped."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


__all__ = ["PostgresStandby", "quoted"]
