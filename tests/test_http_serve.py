"""The real `uda serve`: it refuses to start without authentication, and a subprocess
answers over HTTP exactly like the in-process client.

The in-process service is tested in test_http.py and test_http_problems.py; the corpus and the
keys are tests/http_fixtures.py's.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
from http_fixtures import INTERNAL_CORE, QUESTION, Keys, corpus

import uda
from uda.cli.commands import main as serve_main
from uda.embedding import Embedder
from uda.http.remote import RemoteSearchResponse

# -- the real `uda serve` ----------------------------------------------------------------------


def test_serve_refuses_to_start_without_authentication(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert serve_main(["--path", str(tmp_path), "serve"]) == 2
    assert "no authentication configured" in capsys.readouterr().err
    missing = "UDA_TEST_SECRET_THAT_IS_NOT_SET"
    assert serve_main(["--path", str(tmp_path), "serve", "--token-secret-env", missing]) == 2
    assert missing in capsys.readouterr().err
    (tmp_path / "keys.toml").write_text('[[keys]]\nname = "x"\nsha256 = "abc"\n')
    args = ["--path", str(tmp_path), "serve", "--keys", str(tmp_path / "keys.toml")]
    assert serve_main(args) == 2
    assert "sha256" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_up(url: str, process: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "uda serve exited early"
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"uda serve did not become ready within {seconds} s")


@pytest.mark.slow
def test_uda_serve_answers_like_the_in_process_client(tmp_path: Path, embedder: Embedder) -> None:
    store, keys = tmp_path / "uda", Keys()
    (tmp_path / "keys.toml").write_text(keys.toml())
    questions = [QUESTION, "ledger of attempts", "roadmap for the core project"]
    with uda.connect(path=store, embedder=embedder) as local:
        report = local.ingest(*corpus())
        assert report.hlc is not None
        # A fixed `as_of` makes decay, and so every column, independent of the wall clock.
        expected = [
            local.search(q, limit=5, clearance_scope=INTERNAL_CORE, as_of=report.hlc).to_arrow()
            for q in questions
        ]
    port = _free_port()
    command = [sys.executable, "-m", "uda.cli", "--path", str(store), "serve"]
    command += [
        "--port",
        str(port),
        "--keys",
        str(tmp_path / "keys.toml"),
        "--log-level",
        "info",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)  # noqa: S603
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, process, seconds=120)
        with uda.connect(url, api_key=keys.internal) as remote:
            for question, table in zip(questions, expected, strict=True):
                got = remote.search(
                    question, limit=5, clearance_scope=INTERNAL_CORE, as_of=report.hlc
                )
                assert isinstance(got, RemoteSearchResponse)
                rows, want = got.to_arrow().to_pylist(), table.to_pylist()
                assert [r["element_id"] for r in rows] == [r["element_id"] for r in want]
                assert [r["score"] for r in rows] == [r["score"] for r in want]
                assert got.to_arrow().equals(table)
            assert remote.search(QUESTION, clearance_scope=["restricted"]).clearance["capped"]
        denied = httpx.post(url + "/v1/search", json={"query": "q"}, timeout=10)
        assert denied.status_code == 401
        assert "server" not in denied.headers
    finally:
        process.terminate()
        code = process.wait(timeout=60)
        log.close()
    # uvicorn shuts down gracefully (the lifespan closes the stores), then re-raises SIGTERM.
    output = (tmp_path / "serve.log").read_text()
    assert code in {0, -signal.SIGTERM}, output[-2000:]
    assert "Application shutdown complete" in output, output[-2000:]
    for noise in ("Traceback", "Event loop is closed", "Task was destroyed"):
        assert noise not in output, output[-2000:]


def test_table_equality_is_strict() -> None:
    """`pa.Table.equals` (used above) sees a changed score: the comparisons can fail."""
    table = pa.table({"score": [1.0, 0.5]})
    assert not table.equals(pa.table({"score": [1.0, 0.5000001]}))
