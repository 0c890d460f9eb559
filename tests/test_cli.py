"""The `uda` command, end to end on real stores: ingest, search formats, errors, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from uda.cli.commands import EXIT_BACKEND, EXIT_DIFFERENCES, EXIT_OK, EXIT_USAGE, main
from uda.embedding import Embedder


@pytest.fixture
def store(tmp_path: Path, embedder: Embedder) -> Path:
    # The embedder fixture loads the model once for the session; the CLI reuses it.
    return tmp_path / "store"


def run(store: Path, *args: str) -> int:
    return main(["--path", str(store), *args])


def test_ingest_then_search_table(
    repo: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(store, "ingest", str(repo)) == EXIT_OK
    summary = capsys.readouterr().out
    assert "payments: 4 elements written" in summary  # repository, README, ADR, runbook
    assert run(store, "search", "what happens when a payment is retried?") == EXIT_OK
    out = capsys.readouterr().out
    assert "Payments" in out
    assert "decision:" in out  # the README is governed by ADR-0001
    assert run(store, "search", "payment retries", "--clearance", "public") == EXIT_OK
    public = capsys.readouterr().out
    assert "Payments" in public  # the README is public by its front matter
    assert "Runbook" not in public  # internal by default
    assert "Use idempotency keys" not in public  # internal: neither a result nor context
    assert "decision:" not in public


def test_second_ingest_is_incremental_and_deletes_vanished_files(
    repo: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(store, "ingest", str(repo)) == EXIT_OK
    capsys.readouterr()
    assert run(store, "ingest", str(repo)) == EXIT_OK
    again = capsys.readouterr().out
    assert "0 elements written" in again
    assert "(0 embedded" in again
    (repo / "docs" / "runbook.md").unlink()
    assert run(store, "ingest", str(repo)) == EXIT_OK
    assert "1 deleted" in capsys.readouterr().out
    assert (
        run(store, "search", "payment provider times out, page on-call", "--format", "json")
        == EXIT_OK
    )
    ids = [r["element_id"] for r in json.loads(capsys.readouterr().out)["results"]]
    assert not any(i.endswith("runbook.md") for i in ids)


def test_json_and_arrow_formats(
    repo: Path, store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(store, "ingest", str(repo)) == EXIT_OK
    capsys.readouterr()
    assert run(store, "search", "idempotency", "--format", "json", "--explain") == EXIT_OK
    payload = json.loads(capsys.readouterr().out)
    assert payload["results"]
    assert payload["explain"]["plan"]["clearance"] == ["internal"]
    target = tmp_path / "out.arrow"
    assert (
        run(store, "search", "idempotency", "--format", "arrow", "--output", str(target)) == EXIT_OK
    )
    with pa.ipc.open_stream(target.read_bytes()) as reader:
        table = reader.read_all()
    from ontology import result_schema

    assert table.schema.equals(result_schema())
    assert table.num_rows >= 1


def test_filters_types_and_as_of(
    repo: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(store, "ingest", str(repo)) == EXIT_OK
    capsys.readouterr()
    assert (
        run(store, "search", "payments", "--filter", "element_type=Decision", "--format", "json")
        == EXIT_OK
    )
    types = {r["element_type"] for r in json.loads(capsys.readouterr().out)["results"]}
    assert types == {"Decision"}
    assert run(store, "search", "payments", "--as-of", "2000-01-01T00:00:00Z") == EXIT_OK
    assert "no results" in capsys.readouterr().out


def test_where_takes_a_filter_tree_inline_or_from_a_file(
    repo: Path, store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(store, "ingest", str(repo)) == EXIT_OK
    capsys.readouterr()

    def found(*args: str) -> set[str]:
        assert run(store, "search", "payments", "--format", "json", *args) == EXIT_OK
        return {r["element_id"] for r in json.loads(capsys.readouterr().out)["results"]}

    everything = found()
    runbook = {e for e in everything if e.endswith("runbook.md")}
    decisions = found("--filter", "element_type=Decision")
    assert runbook
    assert decisions
    tree = '{"$or": [{"element_type": "Decision"}, {"name": {"$like": "Runbook%"}}]}'
    inline = found("--where", tree)
    assert inline == runbook | decisions
    saved = tmp_path / "where.json"
    saved.write_text(tree)
    assert found("--where", f"@{saved}") == inline
    # ANDed with --filter: the runbook is a Document, so only it is left.
    assert found("--where", tree, "--filter", "element_type=Document") == runbook


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["search", " "], "query"),
        (["search", "x", "--limit", "0"], "limit"),
        (["search", "x", "--clearance", "secret"], "secret"),
        (["search", "x", "--filter", "colour=red"], "colour"),
        (["search", "x", "--filter", "nonsense"], "--filter"),
        (["search", "x", "--as-of", "yesterday"], "--as-of"),
        (["search", "x", "--where", "{not json"], "--where"),
        (["search", "x", "--where", "[1, 2]"], "JSON object"),
        (["search", "x", "--where", "@/no/such/file.json"], "--where"),
        (["search", "x", "--where", '{"$or": [{"stauts": "x"}]}'], "$or[0].stauts"),
        (["ingest", "/no/such/folder"], "not a folder"),
    ],
)
def test_errors_are_one_line_with_exit_2(
    store: Path, args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(store, *args) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("uda: error:")
    assert needle in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_check_sync_stats_and_ontology(
    repo: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(store, "ingest", str(repo)) == EXIT_OK
    assert run(store, "check") == EXIT_OK
    assert run(store, "sync") == EXIT_OK
    assert run(store, "stats") == EXIT_OK
    assert "elements" in capsys.readouterr().out
    # Damage the vector store behind UDA's back: check must say so and exit 1.
    import chromadb
    from chromadb.config import Settings

    collection = chromadb.PersistentClient(
        path=str(store / "chroma"), settings=Settings(anonymized_telemetry=False)
    ).get_collection("uda_chunks")
    victim = collection.get(limit=1)["ids"][0]
    collection.delete(ids=[victim])
    assert run(store, "check") == EXIT_DIFFERENCES
    assert victim in capsys.readouterr().out
    assert run(store, "sync") == EXIT_OK
    assert run(store, "check") == EXIT_OK
    capsys.readouterr()
    assert run(store, "ontology", "export") == EXIT_OK
    schema = json.loads(capsys.readouterr().out)
    assert "Decision" in schema["x-uda-element-types"]


def test_installed_command_help_teaches() -> None:
    exe = Path(sys.executable).with_name("uda")
    out = subprocess.run(  # noqa: S603 - the project's own installed entry point
        [str(exe), "search", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "examples:" in out
    assert "--clearance" in out
    assert "--format {table,json,arrow}" in out


def _states(db: Path) -> int:
    import sqlite3

    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=1) as conn:
            return conn.execute("SELECT count(*) FROM states").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


@pytest.mark.slow
@pytest.mark.parametrize("kill_after", [5, 60])
def test_killed_uda_ingest_rerun_leaves_check_clean(
    tmp_path: Path,
    embedder: Embedder,
    kill_after: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import os
    import signal
    import time

    source = tmp_path / "notes"
    source.mkdir()
    for i in range(120):
        (source / f"note-{i:03d}.md").write_text(
            f"# Note {i}\n\nThis note is about topic {i % 9} and widget {i * 7}.\n\n"
            f"## Details\n\nGadget {i % 4} needs attention in release {i % 5}.\n"
        )
    store = tmp_path / "store"
    exe = Path(sys.executable).with_name("uda")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(  # noqa: S603 - the project's own entry point
        [str(exe), "--path", str(store), "ingest", str(source), "--batch", "8"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while _states(store / "uda.sqlite3") < kill_after and proc.poll() is None:
        assert time.monotonic() < deadline, "the ingest made no progress"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert run(store, "ingest", str(source)) == EXIT_OK
    assert run(store, "check") == EXIT_OK
    capsys.readouterr()
    assert run(store, "stats") == EXIT_OK
    stats = capsys.readouterr().out
    assert "  elements: 121" in stats  # 120 notes and the repository, none twice
    assert "   pending: 0" in stats


def test_a_url_profile_is_a_remote_service_never_a_local_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--profile http://...` once became the folder `http:/host:port`: an empty local store."""
    monkeypatch.chdir(tmp_path)
    nobody = "http://127.0.0.1:9"  # the discard port: nothing answers there
    for command in ("stats", "check", "sync", "tune", "ingest"):
        argv = ["--profile", nobody, command, *(["."] if command == "ingest" else [])]
        assert main(argv) == EXIT_USAGE, command
        assert "not on a remote service" in capsys.readouterr().err
    assert main(["--profile", nobody, "search", "payments"]) == EXIT_BACKEND
    assert "127.0.0.1:9" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no store was made here
