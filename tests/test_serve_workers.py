"""`uda serve --workers N`: several processes over one server profile, the same answers.

How many workers a profile allows is decided by its stores: only stores that several
processes may share (servers, SQLite files) can be served by more than one process; the
embedded profile's Chroma and networkx live in one process's memory.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
from pathlib import Path

import httpx
import pytest
from http_fixtures import INTERNAL_CORE, QUESTION, Keys, corpus
from serve_fixtures import serving, up, wait

import uda
from connectors.arcadedb import ArcadeDBConnector
from connectors.chroma import ChromaConnector
from connectors.networkx_graph import NetworkXConnector
from connectors.sqlite import SQLiteConnector
from uda.cli import main
from uda.config import ConnectorSpec, Profile, embedded_profile
from uda.embedding import Embedder
from uda.errors import ConfigError
from uda.http.serve import in_process_stores, usable_cores, worker_count
from uda.http.wire import API_KEY_HEADER

# -- how many workers -------------------------------------------------------------------------


def _server_like_profile(root: Path) -> Profile:
    """Stores that are servers (nothing connects: the count is decided from the profile)."""
    return Profile(
        name="server",
        root=root,
        connectors=(
            ConnectorSpec(name="postgres", options={"dsn": "postgresql://127.0.0.1:1/none"}),
            ConnectorSpec(name="arcadedb-graph", options={"url": "http://127.0.0.1:1"}),
            ConnectorSpec(name="chroma", options={"host": "127.0.0.1", "port": 1}),
        ),
    )


@pytest.mark.unit
def test_stores_say_whether_processes_can_share_them(tmp_path: Path) -> None:
    assert SQLiteConnector(tmp_path / "s").shared_across_processes
    assert not NetworkXConnector(tmp_path / "g").shared_across_processes
    assert not ChromaConnector(tmp_path / "c").shared_across_processes
    assert ChromaConnector(host="127.0.0.1", port=1).shared_across_processes
    assert ArcadeDBConnector(url="http://127.0.0.1:1").shared_across_processes
    assert not ArcadeDBConnector(tmp_path / "a").shared_across_processes
    assert in_process_stores(embedded_profile(tmp_path)) == ["chroma", "networkx"]
    assert in_process_stores(_server_like_profile(tmp_path)) == []


@pytest.mark.unit
def test_auto_is_every_core_for_servers_and_one_for_in_process_stores(tmp_path: Path) -> None:
    assert worker_count("auto", _server_like_profile(tmp_path)) == usable_cores()
    assert worker_count("auto", embedded_profile(tmp_path)) == 1
    assert worker_count("3", _server_like_profile(tmp_path)) == 3
    assert worker_count("1", embedded_profile(tmp_path)) == 1


@pytest.mark.unit
def test_more_than_one_worker_over_in_process_stores_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        worker_count("2", embedded_profile(tmp_path))
    assert caught.value.field == "--workers"
    message = str(caught.value)
    assert "chroma" in message
    assert "networkx" in message
    assert "server profile" in message


@pytest.mark.unit
@pytest.mark.parametrize("asked", ["0", "-1", "65", "two", "", "1.5"])
def test_a_worker_count_that_is_not_one_is_named(tmp_path: Path, asked: str) -> None:
    with pytest.raises(ConfigError, match="--workers") as caught:
        worker_count(asked, _server_like_profile(tmp_path))
    assert caught.value.field == "--workers"


@pytest.mark.unit
def test_the_cli_refuses_workers_on_the_embedded_profile_before_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--path", str(tmp_path), "serve", "--insecure-public", "--workers", "2"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--workers 2" in err
    assert "Traceback" not in err


@pytest.mark.unit
def test_workers_share_the_cores_out_through_the_embedding_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from uda.embedding.base import THREADS_ENV, embed_threads

    monkeypatch.setenv(THREADS_ENV, "1")
    assert embed_threads() == 1
    monkeypatch.setenv(THREADS_ENV, "")
    assert embed_threads() == min(os.cpu_count() or 1, 4)
    for unusable in ("0", "-2", "many", "1.5"):
        monkeypatch.setenv(THREADS_ENV, unusable)
        with pytest.raises(ConfigError) as caught:
            embed_threads()
        assert caught.value.field == THREADS_ENV


@pytest.mark.unit
def test_idle_model_threads_spin_unless_told_not_to(monkeypatch: pytest.MonkeyPatch) -> None:
    from uda.embedding.base import SPINNING_ENV, embed_spinning

    monkeypatch.delenv(SPINNING_ENV, raising=False)
    assert embed_spinning()
    monkeypatch.setenv(SPINNING_ENV, "0")
    assert not embed_spinning()
    monkeypatch.setenv(SPINNING_ENV, "yes")
    with pytest.raises(ConfigError) as caught:
        embed_spinning()
    assert caught.value.field == SPINNING_ENV


# -- two real workers over real servers ---------------------------------------------------------


def _spawned_workers(pid: int) -> list[int]:
    """The worker processes uvicorn started for the service `pid` (not its helpers)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    workers = []
    for child in map(int, children):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        if b"spawn_main" in command:
            workers.append(child)
    return workers


@pytest.mark.slow
def test_two_workers_answer_alike_share_writes_and_survive_a_lost_worker(
    server_profile_file: Path, embedder: Embedder, tmp_path: Path
) -> None:
    keys = Keys()
    (tmp_path / "keys.toml").write_text(keys.toml())
    with uda.connect(server_profile_file, embedder=embedder) as local:
        report = local.ingest(*corpus())
        assert report.hlc is not None
        as_of = report.hlc
        expected = local.search(QUESTION, limit=5, clearance_scope=INTERNAL_CORE, as_of=as_of)
    want = [(r.element_id, r.score) for r in expected.results]
    assert want

    with serving(
        server_profile_file, tmp_path / "keys.toml", tmp_path / "serve.log", workers=2
    ) as served:
        process, url = served.process, served.url
        wait(lambda: len(_spawned_workers(process.pid)) == 2, 60, "two workers")

        def search(_: int) -> list[tuple[str, float]]:
            body = {"query": QUESTION, "limit": 5, "as_of": as_of}
            # A new connection each time: the kernel spreads them over the workers.
            response = httpx.post(
                f"{url}/v1/search",
                json=body,
                headers={API_KEY_HEADER: keys.internal},
                timeout=60,
            )
            assert response.status_code == 200, response.text
            return [(r["element_id"], r["score"]) for r in response.json()["results"]]

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(search, range(32)))
        assert all(answer == want for answer in answers)

        # A write through one worker is seen by every worker (the stores are shared).
        note = {
            "element_type": "Document",
            "element_id": "doc:worker-note",
            "name": "Worker note",
            "text": "Zebra crossings are repainted every spring by the works department.",
            "sensitivity": "internal",
        }
        written = httpx.post(
            f"{url}/v1/ingest",
            json={"elements": [note]},
            headers={API_KEY_HEADER: keys.writer},
            timeout=60,
        )
        assert written.status_code == 200, written.text

        def finds_note(_: int) -> bool:
            response = httpx.post(
                f"{url}/v1/search",
                json={"query": "when are zebra crossings repainted", "limit": 3},
                headers={API_KEY_HEADER: keys.internal},
                timeout=60,
            )
            assert response.status_code == 200, response.text
            return any(r["element_id"] == "doc:worker-note" for r in response.json()["results"])

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            assert all(pool.map(finds_note, range(16)))

        # A worker killed is replaced; the service answers meanwhile and after.
        lost = _spawned_workers(process.pid)[0]
        os.kill(lost, signal.SIGKILL)
        assert search(0) == want
        wait(lambda: len(set(_spawned_workers(process.pid)) - {lost}) == 2, 90, "a new worker")
        wait(lambda: up(url), 60, "ready again")
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            assert all(answer == want for answer in pool.map(search, range(16)))


@pytest.mark.slow
def test_the_cli_searches_a_running_service_by_its_url(
    embedder: Embedder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`uda --profile http://... search`: the service answers, with the key from the env."""
    keys = Keys()
    (tmp_path / "keys.toml").write_text(keys.toml())
    store = tmp_path / "store"
    with uda.connect(path=store, embedder=embedder) as local:
        local.ingest(*corpus())
    with serving(store, tmp_path / "keys.toml", tmp_path / "serve.log", workers=1) as served:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("UDA_API_KEY", keys.public)
        argv = ["--profile", served.url, "search", QUESTION, "--format", "json"]
        assert main(argv) == 0
        answered = capsys.readouterr().out
        assert "doc:retries" in answered  # public, about the question
        assert "adr:retry" not in answered  # restricted: the key's grant decides
        for other in (
            ["aggregate", "--group-by", "element_type", "--format", "json"],
            ["fields", "partOf."],
            ["export", "--where", '{"element_type": "Document"}', "--output", "docs.csv"],
        ):
            assert main(["--profile", served.url, *other]) == 0, other
        assert "Document" in capsys.readouterr().out
        assert (tmp_path / "docs.csv").read_text().count("doc:") >= 1
        monkeypatch.setenv("UDA_API_KEY", "not-a-key")
        assert main(argv) == 2  # refused by the service: the caller's mistake
        assert capsys.readouterr().err == "uda: error: unknown API key\n"


@pytest.mark.unit
def test_the_service_runs_on_the_c_event_loop_and_http_parser() -> None:
    # `uda serve` leaves uvicorn's loop and parser on "auto": uvloop and httptools when the
    # http extra installed them, else pure-Python asyncio and h11 at about half the speed.
    import uvicorn.config

    async def app(scope: object, receive: object, send: object) -> None:
        return None

    config = uvicorn.config.Config(app=app)
    config.load()
    assert config.http_protocol_class.__name__ == "HttpToolsProtocol"
    loop_factory = config.get_loop_factory()
    assert loop_factory is not None
    assert loop_factory.__module__.startswith("uvloop")
