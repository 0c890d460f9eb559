"""A real `uda embed-server` process for the tests of the HTTP embedder and of the server.

The server runs the packaged model in its own process on a loopback port; `start_server`
yields it and stops it at the end, failing if its log holds a traceback.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from uda.embedding.http import OpenAICompatibleEmbedder
from uda.query.retries import Retries

MODEL = "all-MiniLM-L6-v2"
KEY_VARIABLE = "UDA_TEST_EMBED_KEY"
FAST = Retries(base_s=0.01, cap_s=0.05)  # the tests' backoff: the policy, not its length


def free_port() -> int:
    """A loopback port nobody listens on (for now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True, kw_only=True)
class EmbedServer:
    """A running `uda embed-server` process."""

    url: str  # the API's base, .../v1
    root: str

    def counter(self, name: str) -> int:
        """A counter of the server's /metrics."""
        text = httpx.get(f"{self.root}/metrics", timeout=10).text
        for line in text.splitlines():
            if line.startswith(f"uda_embed_{name}_total "):
                return int(line.split()[1])
        raise AssertionError(f"no uda_embed_{name}_total in {text!r}")


def start_server(
    log: Path, *extra: str, env: dict[str, str] | None = None
) -> Iterator[EmbedServer]:
    port = free_port()
    command = [sys.executable, "-m", "uda.cli", "embed-server", "--port", str(port), *extra]
    with log.open("wb") as out:
        process = subprocess.Popen(  # noqa: S603 - our own command
            command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert process.poll() is None, log.read_text()[-2000:]
            try:
                if httpx.get(f"{root}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "uda embed-server did not start"
            time.sleep(0.2)
        yield EmbedServer(url=f"{root}/v1", root=root)
    finally:
        process.terminate()
        process.wait(timeout=60)
    assert "Traceback" not in log.read_text(), log.read_text()[-2000:]


def http_embedder(url: str, **options: Any) -> OpenAICompatibleEmbedder:
    """The HTTP embedder for `url`, with the tests' short backoff."""
    return OpenAICompatibleEmbedder(url, MODEL, retries=FAST, **options)
