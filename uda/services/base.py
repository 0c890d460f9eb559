"""The shape every managed server shares: up, down, status, with state on disk.

A service keeps its data and a `service.json` (port, pid, generated credentials; mode 0600)
under `<root>/<name>/`. `up()` is idempotent (a running server is reused), `down()` too.
Each service also says how `uda services` treats it (whether `up` starts it unasked, which
connector of the server profile reads it and with which options), so that
`uda.services.manage` knows services only through this class.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import socket
from abc import ABC, abstractmethod
from collections.abc import Generator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar


@dataclass(frozen=True, kw_only=True)
class ServiceInfo:
    """Where a running server listens and how to log in."""

    name: str
    host: str
    port: int
    pid: int | None = None
    user: str | None = None
    password: str | None = None
    database: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data (credentials included: keep it private)."""
        return asdict(self)

    @classmethod
    def from_state(cls, name: str, state: Mapping[str, Any]) -> ServiceInfo:
        """The info a service's state file records (`service.json`)."""
        return cls(
            name=name,
            host=str(state["host"]),
            port=int(state["port"]),
            pid=state.get("pid"),
            user=state.get("user"),
            password=state.get("password"),
            database=state.get("database"),
        )


class ManagedService(ABC):
    """A server process UDA starts and stops itself.

    A subclass sets the class attributes below and implements `connector_options`, besides
    the server's lifecycle.

    Attributes:
        name: the service's name, on the command line and as its folder under the root.
        started_by_default: whether `uda services up` starts it without being asked.
        connector: the connector (a name in `connectors.registry.BUILTIN`) that reads this
            server; `uda services up` writes one `[[connectors]]` table for it.

    Args:
        root: the folder under which every service keeps its data (`<root>/<name>/`).
    """

    name: ClassVar[str]
    started_by_default: ClassVar[bool]
    connector: ClassVar[str]

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.home = self.root / self.name

    def up(self) -> ServiceInfo:
        """Start the server (or find it running) and return where it listens."""
        with self._locked():
            running = self.status()
            return running if running is not None else self._bring_up()

    @classmethod
    @abstractmethod
    def connector_options(cls, info: ServiceInfo) -> dict[str, str | int]:
        """The options of `connector` for this running server, in the profile's order.

        A class method: the profile is written from the servers' infos alone, and the keys
        keep their order in `server.toml`.

        Args:
            info: where the server listens and how to log in (from `up()` or `status()`).

        Returns:
            Option name to value (without the connector's `name`), as TOML scalars.
        """

    @abstractmethod
    def _bring_up(self) -> ServiceInfo:
        """Start the server; called under the service's lock when it is not running."""

    @abstractmethod
    def down(self) -> None:
        """Stop the server if it runs; keep its data."""

    @abstractmethod
    def status(self) -> ServiceInfo | None:
        """The running server, or None."""

    def destroy(self) -> None:
        """Stop the server and delete its data (every database it held is gone)."""
        self.down()
        shutil.rmtree(self.home, ignore_errors=True)

    # -- helpers for implementations ------------------------------------------------------
    @contextmanager
    def _locked(self) -> Generator[None]:
        """One `up`/`down` at a time per service folder, across processes."""
        self.home.mkdir(parents=True, exist_ok=True)
        with (self.home / ".lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    @property
    def state_file(self) -> Path:
        """Where the service's port, pid and credentials are kept."""
        return self.home / "service.json"

    def load_state(self) -> dict[str, Any] | None:
        """The saved state, if any."""
        if not self.state_file.exists():
            return None
        loaded: dict[str, Any] = json.loads(self.state_file.read_text())
        return loaded

    def save_state(self, state: dict[str, Any]) -> None:
        """Save state readable by the owner only (it holds a password)."""
        self.home.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(state, out, indent=2)
        os.replace(tmp, self.state_file)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def new_password() -> str:
    """A generated password (URL-safe, 24 characters)."""
    return secrets.token_urlsafe(18)


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid exists."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reuse_port(port: object, host: str = "127.0.0.1") -> int:
    """The port used last time when it is still free (stable addresses), else a new one."""
    if port:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            # Connections of the last run linger in TIME_WAIT; the server binds past them.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, int(str(port))))
            except OSError:
                return free_port(host)
            return int(str(port))
    return free_port(host)


def log_tail(log: Path, lines: int = 20) -> str:
    """The last lines of a server log (a folder means its `server.log`), for error messages."""
    if log.is_dir():
        log = log / "server.log"
    try:
        tail = log.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "\n--- server log ---\n" + "\n".join(tail) if tail else ""
