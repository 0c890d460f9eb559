"""A primary and its hot standbys as one replicated PostgreSQL: roles, failover, rejoin.

The nodes are folders under the services root: `postgres` (the first primary) and
`postgres-standby-<n>`. Which one is the primary is not written down anywhere but in the
data itself, where PostgreSQL keeps it: a running server is a standby while it is in
recovery, and a stopped one while its data holds `standby.signal`. So a promotion needs no
bookkeeping to stay true, and nothing here can disagree with the servers.

- **Synchronous replication** (`synchronise`): the primary waits, before it acknowledges a
  commit, until at least one standby has the commit's WAL on disk (`ANY 1 (...)` over the
  other nodes). Promoting the standby that received the most WAL then loses nothing that
  was acknowledged. With no standby left running, waiting would stop every write, so the
  list is left empty until one rejoins.
- **Failover** (`promote`): with the primary gone, the standby that received the most WAL is
  promoted (`pg_promote`), the other standbys follow it, and it waits for them as above.
- **Rejoin** (`rejoin`): the former primary is rewound to the new primary's history with
  `pg_rewind` (data checksums are on: PostgreSQL 18's `initdb` default) and started as its
  standby. `uda services up` does this by itself for a node that would otherwise start as
  a second primary.

Clients need no new profile after a failover: `uda services up` writes the primary's DSN
with every node's address and `target_session_attrs=read-write` (libpq connects to the one
that accepts writes), and lists every node among the standbys (the connector skips the one
that is not in recovery).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from uda.errors import ConnectorError, UserError
from uda.services.base import ServiceInfo
from uda.services.postgres import ADMIN_USER, APP_USER, DATABASE, HOST, PostgresService
from uda.services.postgres_standby import PostgresStandby, quoted

_PROMOTE_WAIT_S = 60
WAL_KEPT = "1GB"


def standbys(root: Path) -> list[PostgresStandby]:
    """The `postgres-standby-<n>` nodes that have a folder under `root`, by number."""
    primary = PostgresService(root)
    numbers = sorted(
        int(match.group(1))
        for folder in (root.iterdir() if root.is_dir() else ())
        if (match := re.fullmatch(r"postgres-standby-(\d+)", folder.name))
    )
    return [PostgresStandby(primary, number) for number in numbers]


def nodes(root: Path) -> list[PostgresService]:
    """Every PostgreSQL node under `root`: the first primary's folder, then the standbys'."""
    return [PostgresService(root), *standbys(root)]


def application_name(node: PostgresService) -> str:
    """The name a node streams under (what `synchronous_standby_names` lists)."""
    return node.home.name.replace("postgres-standby-", "standby")


@dataclass(frozen=True, kw_only=True)
class NodeState:
    """A node as its server reports it (`info` None: not running)."""

    node: PostgresService
    info: ServiceInfo | None
    in_recovery: bool
    received: int
    """WAL received (a standby) or written (a primary), as a byte position; -1 if stopped."""


def survey(root: Path) -> list[NodeState]:
    """Every node with data, running or not, and what its server says of itself."""
    found: list[NodeState] = []
    for node in nodes(root):
        state = node.load_state()
        if state is None:
            continue
        info = node.status()
        if info is None:
            found.append(
                NodeState(node=node, info=None, in_recovery=_signalled(state), received=-1)
            )
            continue
        row = _admin(
            node,
            "SELECT pg_is_in_recovery(), (CASE WHEN pg_is_in_recovery() "
            "THEN coalesce(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()) "
            "ELSE pg_current_wal_lsn() END - '0/0')::bigint",
        )
        found.append(
            NodeState(node=node, info=info, in_recovery=bool(row[0]), received=int(row[1] or 0))
        )
    return found


def running_primary(root: Path) -> NodeState | None:
    """The running node that accepts writes, if any."""
    primaries = [s for s in survey(root) if s.info is not None and not s.in_recovery]
    if len(primaries) > 1:
        names = ", ".join(s.node.home.name for s in primaries)
        raise ConnectorError("postgres", f"two servers accept writes ({names}): stop one")
    return primaries[0] if primaries else None


def synchronise(primary: PostgresService, followers: Sequence[PostgresService]) -> None:
    """Make `primary` acknowledge a commit only once a follower has it on disk.

    No followers: acknowledge alone (waiting for none would stop every write).
    """
    names = ", ".join(f'"{application_name(f)}"' for f in followers)
    _admin(
        primary,
        "ALTER SYSTEM SET synchronous_standby_names = " + _literal(f"ANY 1 ({names})")
        if followers
        else "ALTER SYSTEM RESET synchronous_standby_names",
    )
    # If this primary is lost and comes back, `pg_rewind` reads its own WAL back to the
    # last checkpoint before the histories parted; by default the crash recovery it runs
    # first may already have recycled that WAL. A checkpoint comes at least every
    # `max_wal_size` (1 GB by default) of WAL: keep as much.
    _admin(primary, f"ALTER SYSTEM SET wal_keep_size = {_literal(WAL_KEPT)}")
    _admin(primary, "SELECT pg_reload_conf()")


def promote(root: Path, number: int | None = None) -> NodeState:
    """Make a standby the primary; the others follow it. Returns the new primary.

    Args:
        root: the services root.
        number: which standby (`postgres-standby-<n>`; 0 is the first primary's folder); by
            default the running standby that received the most WAL.

    Raises:
        UserError: a primary is still running (two would split the data), or no standby
            is running (or the one asked for is not).
    """
    surveyed = survey(root)
    alive = [s for s in surveyed if s.info is not None and not s.in_recovery]
    if alive:
        name = alive[0].node.home.name
        raise UserError(
            f"the primary ({name}) is running: promote a standby only when the primary is "
            "lost, or two servers would accept writes",
            field="promote",
            value=name,
        )
    candidates = [s for s in surveyed if s.info is not None and s.in_recovery]
    if number is not None:
        candidates = [s for s in candidates if _number(s.node) == number]
    if not candidates:
        raise UserError(
            "no running standby to promote"
            + ("" if number is None else f" (standby {number} is not running)"),
            field="standby",
            value=number,
        )
    chosen = max(candidates, key=lambda s: s.received)
    _admin(chosen.node, f"SELECT pg_promote(true, {_PROMOTE_WAIT_S})")
    followers = [s.node for s in surveyed if s.info is not None and s.in_recovery]
    followers = [node for node in followers if node is not chosen.node]
    for follower in followers:
        _follow(follower, chosen.node)
    synchronise(chosen.node, followers)
    return chosen


def rejoin(root: Path, node: PostgresService) -> ServiceInfo:
    """Start a former primary as a standby of the running primary (`pg_rewind` first)."""
    primary = running_primary(root)
    if primary is None:
        raise UserError(
            f"{node.home.name} can rejoin only a running primary: start one first",
            field="rejoin",
            value=node.home.name,
        )
    node.down()
    state = node.load_state()
    if state is None:
        raise UserError(f"{node.home.name} has no data to rejoin with", field="rejoin", value=None)
    data = Path(state["data_dir"])
    node._pg(  # pyright: ignore[reportPrivateUsage]
        node._account(),  # pyright: ignore[reportPrivateUsage]
        [
            str(Path(state["bin_dir"]) / "pg_rewind"),
            *("-D", str(data), "--source-server", _conninfo(primary.node, node)),
            "--write-recovery-conf",
        ],
        what="pg_rewind",
        data=data,
    )
    info = node.up()
    followers = [s.node for s in survey(root) if s.info is not None and s.in_recovery]
    synchronise(primary.node, followers)
    return info


def bring_up(root: Path, replicas: int | None = None) -> tuple[ServiceInfo, list[ServiceInfo]]:
    """Start the replicated PostgreSQL: its primary, then `replicas` numbered standbys.

    The primary is the running node that accepts writes, else the node whose data says it
    is one (after a failover with every server stopped, two may: the newer timeline wins).
    A former primary among the others rejoins as a standby instead of starting as a second
    primary. `replicas` None keeps the standbys made before; new ones are copied from the
    primary; numbered standbys beyond `replicas` are deleted (copies only). The primary
    then waits for one of its standbys on every commit (`synchronise`).

    Returns:
        The primary's info and its standbys' (the first primary's folder among them after
        a failover).
    """
    made = standbys(root)
    wanted = len(made) if replicas is None else replicas
    if wanted < 0:
        raise UserError("replicas must be 0 or more", field="replicas", value=replicas)
    running = running_primary(root)
    primary = running.node if running is not None else _primary_by_data(root)
    primary_info = primary.up()
    kept: list[PostgresService] = []
    for node in nodes(root):
        state = node.load_state()
        if node.home == primary.home or state is None or _number(node) > wanted:
            continue
        if node.status() is None and not _signalled(state):
            rejoin(root, node)
        else:
            node.up()
        kept.append(node)
    numbers = {_number(node) for node in [primary, *kept]}
    for number in range(1, wanted + 1):
        if number not in numbers:
            fresh = PostgresStandby(primary, number)
            fresh.up()
            kept.append(fresh)
    synchronise(primary, kept)
    for extra in made:
        if extra.index > wanted and extra.home != primary.home:
            extra.destroy()
    infos = [node.status() for node in sorted(kept, key=_number)]
    return primary_info, [info for info in infos if info is not None]


def primary_dsn(infos: Sequence[ServiceInfo]) -> str:
    """The application role's DSN over every node: libpq picks the one that takes writes."""
    first = infos[0]
    user = quote(first.user or APP_USER, safe="")
    password = quote(first.password or "", safe="")
    hosts = ",".join(f"{info.host}:{info.port}" for info in infos)
    database = quote(first.database or DATABASE, safe="")
    return f"postgresql://{user}:{password}@{hosts}/{database}?target_session_attrs=read-write"


# -- helpers ---------------------------------------------------------------------------
def _signalled(state: dict[str, Any]) -> bool:
    """Whether a stopped node's data says it starts as a standby."""
    return (Path(state["data_dir"]) / "standby.signal").exists()


def _primary_by_data(root: Path) -> PostgresService:
    """The stopped node that would start as a primary (the newest timeline among several)."""
    claimants = [
        node
        for node in nodes(root)
        if (state := node.load_state()) is not None and not _signalled(state)
    ]
    if not claimants:
        return PostgresService(root)  # nothing made yet: the first primary's folder
    return max(claimants, key=_timeline)


def _timeline(node: PostgresService) -> int:
    """The node's timeline (each promotion starts a new one), from `pg_controldata`."""
    state = node.load_state() or {}
    data = Path(state["data_dir"])
    if not (data / "PG_VERSION").exists():
        return -1
    out = node._pg(  # pyright: ignore[reportPrivateUsage]
        node._account(),  # pyright: ignore[reportPrivateUsage]
        [str(Path(state["bin_dir"]) / "pg_controldata"), "-D", str(data)],
        what="pg_controldata",
        data=data,
    )
    found = re.search(r"Latest checkpoint's TimeLineID:\s+(\d+)", out)
    return int(found.group(1)) if found else -1


def _number(node: PostgresService) -> int:
    return node.index if isinstance(node, PostgresStandby) else 0


def _admin(node: PostgresService, statement: str) -> tuple[Any, ...]:
    """Run one statement as the superuser on `node`; its first row."""
    rows = admin_rows(node, statement)
    return rows[0] if rows else ()


def admin_rows(
    node: PostgresService,
    statement: str,
    database: str = "postgres",
    params: Sequence[Any] | None = None,
) -> list[tuple[Any, ...]]:
    """Rows of one fixed statement run as the superuser on `node`'s `database`.

    Values go in `params`, never into the statement.
    """
    import psycopg

    state = node.load_state() or {}
    try:
        with psycopg.connect(
            host=state["host"],
            port=state["port"],
            user=ADMIN_USER,
            password=state["admin_password"],
            dbname=database,
            connect_timeout=10,
            autocommit=True,
        ) as conn:
            cur = conn.execute(statement.encode(), params)
            rows = cur.fetchall() if cur.description else []
    except psycopg.Error as exc:
        raise ConnectorError("postgres", f"{node.home.name}: {exc}") from exc
    return [tuple(row) for row in rows]


def _conninfo(primary: PostgresService, follower: PostgresService) -> str:
    """How `follower` reaches `primary` to stream from it (as the superuser)."""
    state = primary.load_state() or {}
    return " ".join(
        f"{key}={quoted(str(value))}"
        for key, value in (
            ("host", HOST),
            ("port", int(state["port"])),
            ("user", ADMIN_USER),
            ("password", state["admin_password"]),
            ("dbname", "postgres"),
            ("application_name", application_name(follower)),
        )
    )


def _follow(follower: PostgresService, primary: PostgresService) -> None:
    """Point a running standby at a new primary (it follows the new timeline by itself)."""
    _admin(
        follower, "ALTER SYSTEM SET primary_conninfo = " + _literal(_conninfo(primary, follower))
    )
    _admin(follower, "SELECT pg_reload_conf()")
    deadline = time.monotonic() + _PROMOTE_WAIT_S
    while (
        _admin(follower, "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'")[0]
        == 0
    ):
        if time.monotonic() > deadline:
            raise ConnectorError("postgres", f"{follower.home.name} did not follow the new primary")
        time.sleep(0.1)


def _literal(value: str) -> str:
    """A SQL string literal (ALTER SYSTEM takes no parameters)."""
    return "'" + value.replace("'", "''") + "'"


__all__ = [
    "NodeState",
    "admin_rows",
    "application_name",
    "bring_up",
    "nodes",
    "primary_dsn",
    "promote",
    "rejoin",
    "running_primary",
    "standbys",
    "survey",
    "synchronise",
]
