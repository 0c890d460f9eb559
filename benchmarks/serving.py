"""`uda serve` in a process of its own, for the suites that load it over loopback.

`served(profile, callers)` writes the profile as TOML and a keys file with one API key per
clearance (and one writer), starts the service on a free port, waits until `/readyz`
answers, and stops it at the end (SIGTERM, then SIGKILL after 30 s). Its output goes to a
log file the suite can read (tracebacks, unclean ends). `workers=N` asks for N processes
(`uda serve --workers N`); None leaves the service its default.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from uda.config import Profile


@dataclass
class Service:
    """A running `uda serve`: its process, address, API keys and log."""

    process: subprocess.Popen[bytes]
    base_url: str
    keys: dict[tuple[str, ...], str]
    """An API key per clearance given to `served`."""
    writer_key: str
    """A key that may write (public clearance)."""
    log: Path


@contextlib.contextmanager
def served(
    profile: Profile, callers: Sequence[tuple[str, ...]], *, workers: int | None = None
) -> Iterator[Service]:
    """`uda serve` on `profile`, with a key per clearance in `callers`, stopped at the end.

    `workers` (when not None) is passed as `--workers`; None keeps the service's default.
    """
    from uda.http.auth import key_entry_toml, new_api_key
    from uda.services.base import free_port

    folder = profile.root
    folder.mkdir(parents=True, exist_ok=True)
    profile_file = folder / "profile.toml"
    profile_file.write_text(profile_toml(profile))
    keys = {caller: new_api_key() for caller in callers}
    writer_key = new_api_key()
    entries = [key_entry_toml(f"c{i}", keys[c], c) for i, c in enumerate(callers)]
    entries.append(key_entry_toml("writer", writer_key, ["public"], can_write=True))
    keys_file = folder / "keys.toml"
    keys_file.write_text("\n".join(entries))
    port = free_port()
    log = folder / "serve.log"
    command = [sys.executable, "-c", "from uda.cli import main; raise SystemExit(main())"]
    command += ["--profile", str(profile_file), "serve", "--keys", str(keys_file)]
    command += ["--port", str(port), "--log-level", "warning"]
    if workers is not None:
        command += ["--workers", str(workers)]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)  # noqa: S603
    service = Service(process, f"http://127.0.0.1:{port}", keys, writer_key, log)
    try:
        _wait_ready(service)
        yield service
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes], grace_s: float = 30.0) -> None:
    """SIGTERM, then SIGKILL if it has not ended within `grace_s`; reaped either way."""
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def profile_toml(profile: Profile) -> str:
    """The profile's data root and connectors as a profile file."""
    lines = ["[uda]", f"path = {json.dumps(str(profile.root / 'data'))}", ""]
    for spec in profile.connectors:
        lines += ["[[connectors]]", f"name = {json.dumps(spec.name)}"]
        lines += [f"{key} = {json.dumps(value)}" for key, value in spec.options.items()]
        lines.append("")
    return "\n".join(lines)


def _wait_ready(service: Service, timeout: float = 120.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if service.process.poll() is not None:
            raise RuntimeError(f"uda serve exited: {service.log.read_text()[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{service.base_url}/readyz", timeout=2).status_code == 200:
                return
        time.sleep(0.5)
    raise RuntimeError(f"uda serve not ready after {timeout:.0f} s")


__all__ = ["Service", "profile_toml", "served", "stop"]
