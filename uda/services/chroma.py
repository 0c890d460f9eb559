"""A Chroma server (`chroma run`) started from the installed `chromadb` package, on loopback.

`up()` starts the `chroma` executable of the running virtual environment as a background
process in its own session, records its pid and port in `service.json`, and returns once the
server's heartbeat answers. The port of the last run is reused while it is free, so that a
profile written earlier keeps working. `down()` sends SIGTERM to the server's process group
and SIGKILL after a timeout; the data under `<root>/chroma/data` stays.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from uda.errors import ConnectorError, UserError
from uda.services.base import ManagedService, ServiceInfo, log_tail, pid_alive, reuse_port

HOST = "127.0.0.1"
HEARTBEAT = "/api/v2/heartbeat"
_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 15.0
_POLL_S = 0.1


class ChromaService(ManagedService):
    """A local Chroma server from the `chromadb` package of this environment.

    Args:
        root: the folder under which every service keeps its data (`<root>/chroma/`).
        start_timeout: seconds to wait for the heartbeat after starting the server.
        stop_timeout: seconds between SIGTERM and SIGKILL when stopping it.
    """

    name = "chroma"
    # A second vector store: PostgreSQL already serves vectors, so only `--with-chroma` starts it.
    started_by_default = False
    connector = "chroma"

    def __init__(
        self,
        root: str | Path,
        *,
        start_timeout: float = _START_TIMEOUT_S,
        stop_timeout: float = _STOP_TIMEOUT_S,
    ) -> None:
        super().__init__(root)
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        # The server this object started: waited for on stop, so that it leaves no zombie.
        self._process: subprocess.Popen[bytes] | None = None

    @classmethod
    def connector_options(cls, info: ServiceInfo) -> dict[str, str | int]:
        """The `chroma` connector's HTTP host and port (the server has no login)."""
        return {"host": info.host, "port": info.port}

    @property
    def data_dir(self) -> Path:
        """Where the server keeps its collections."""
        return self.home / "data"

    @property
    def log_file(self) -> Path:
        """The server's standard output and error."""
        return self.home / "chroma.log"

    # -- the ManagedService contract ------------------------------------------------------
    def _bring_up(self) -> ServiceInfo:
        """Start the stopped server; returns once its heartbeat answers.

        Raises:
            UserError: the `chroma` executable is not installed beside this interpreter.
            ConnectorError: the server exited or did not answer in time (with its log tail).
        """
        executable = chroma_executable()
        state = self.load_state() or {}
        port = reuse_port(state.get("port"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [
            str(executable),
            "run",
            "--path",
            str(self.data_dir),
            "--host",
            HOST,
            "--port",
            str(port),
        ]
        env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
        try:
            with self.log_file.open("ab") as log:
                process = subprocess.Popen(  # noqa: S603 - our own executable, argument list
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,  # its own process group: stopped as a whole
                )
        except OSError as exc:
            raise ConnectorError(self.name, f"could not start {executable}: {exc}") from exc
        self._process = process
        self.save_state({"host": HOST, "port": port, "pid": process.pid})
        self._await_heartbeat(process, port)
        return ServiceInfo(name=self.name, host=HOST, port=port, pid=process.pid)

    def down(self) -> None:
        """Stop the server if it runs (SIGTERM, then SIGKILL after the timeout); keep its data."""
        with self._locked():
            state = self.load_state()
            if state is None:
                return
            pid = _int_or_none(state.get("pid"))
            if pid is not None and self._running(pid):
                self._stop(pid)
            self.save_state({**state, "pid": None})

    def status(self) -> ServiceInfo | None:
        """The running server, or None (a dead pid or a silent port both count as stopped)."""
        state = self.load_state()
        if not state:
            return None
        pid = _int_or_none(state.get("pid"))
        port = _int_or_none(state.get("port"))
        host = str(state.get("host") or HOST)
        if pid is None or port is None or not self._running(pid) or not heartbeat(host, port):
            return None
        return ServiceInfo(name=self.name, host=host, port=port, pid=pid)

    # -- internals --------------------------------------------------------------------------
    def _await_heartbeat(self, process: subprocess.Popen[bytes], port: int) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            code = process.poll()
            if code is not None:
                self._process = None
                raise ConnectorError(
                    self.name, f"the server exited with code {code}{log_tail(self.log_file)}"
                )
            if heartbeat(HOST, port):
                return
            time.sleep(_POLL_S)
        self._stop(process.pid)
        raise ConnectorError(
            self.name,
            f"no heartbeat on {HOST}:{port} after {self.start_timeout:.0f} s"
            f"{log_tail(self.log_file)}",
        )

    def _running(self, pid: int) -> bool:
        if self._process is not None and self._process.pid == pid:
            return self._process.poll() is None
        return pid_alive(pid) and _is_chroma_server(pid)

    def _stop(self, pid: int) -> None:
        """SIGTERM to the server's process group, SIGKILL when it outlives the timeout."""
        _signal_group(pid, signal.SIGTERM)
        if not self._wait_gone(pid, self.stop_timeout):
            _signal_group(pid, signal.SIGKILL)
            self._wait_gone(pid, self.stop_timeout)
        self._process = None

    def _wait_gone(self, pid: int, timeout: float) -> bool:
        process = self._process if self._process is not None and self._process.pid == pid else None
        if process is not None:
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return False
            return True
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self._running(pid):
                return True
            time.sleep(_POLL_S)
        return not self._running(pid)


# -- helpers ---------------------------------------------------------------------------
def chroma_executable() -> Path:
    """The `chroma` command installed beside the running interpreter.

    Raises:
        UserError: it is missing (with the install hint).
    """
    executable = Path(sys.executable).with_name("chroma")
    if not executable.exists():
        raise UserError(
            f"the chroma service needs the `chroma` command beside {sys.executable}: "
            "pip install chromadb",
            field="service",
            value="chroma",
        )
    return executable


def heartbeat(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether a Chroma server answers its heartbeat at `host:port`."""
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", HEARTBEAT)
        response = connection.getresponse()
        body = response.read()
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()
    return response.status == 200 and b"heartbeat" in body


def _is_chroma_server(pid: int) -> bool:
    """Whether `pid` is a live `chroma run` (not a zombie, not a recycled pid)."""
    proc = Path("/proc") / str(pid)
    if not proc.exists():  # no procfs: trust the pid
        return True
    try:
        stat = (proc / "stat").read_text()
        argv = (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if stat.rpartition(")")[2].split()[:1] == ["Z"]:
        return False
    return any(Path(arg.decode(errors="replace")).name == "chroma" for arg in argv) and (
        b"run" in argv
    )


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)  # started with start_new_session: its pgid is its pid
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | str) and str(value).isdigit() else None


__all__ = ["ChromaService", "chroma_executable", "heartbeat"]
