"""`uda serve` processes over real servers, for the tests of several service processes."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks.serving import stop
from uda.services.base import free_port


def wait(condition: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll `condition` until it holds; fail naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds:.0f} s: {what}")
        time.sleep(0.2)


def up(url: str) -> bool:
    """Whether the service at `url` says it is ready."""
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@dataclass(frozen=True)
class Served:
    """A running `uda serve`: its process, base URL and log file."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path


@contextlib.contextmanager
def serving(profile: Path, keys: Path, log: Path, *, workers: int) -> Iterator[Served]:
    """`uda serve` on `profile` with `workers` processes; stopped (SIGTERM) at the end.

    On the way out the service must have ended cleanly, with no traceback in its log.
    """
    port = free_port()
    command = [sys.executable, "-m", "uda.cli", "--profile", str(profile), "serve"]
    command += ["--keys", str(keys), "--port", str(port), "--workers", str(workers)]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)  # noqa: S603
    served = Served(process, f"http://127.0.0.1:{port}", log)
    try:
        wait(lambda: process.poll() is not None or up(served.url), 180, "uda serve ready")
        assert process.poll() is None, log.read_text()[-3000:]
        yield served
    finally:
        stop(process, grace_s=60)
    # One process: uvicorn shuts down, then ends by the SIGTERM it was sent (-15), as Unix
    # programs do; several: the process manager exits 0 once its workers have.
    assert process.returncode in (0, -signal.SIGTERM), (
        f"exit {process.returncode}: {log.read_text()[-3000:]}"
    )
    output = log.read_text()
    assert "Traceback" not in output, output[-3000:]
    assert "Task was destroyed" not in output
