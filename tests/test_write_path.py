"""The write path: idempotent upserts, skipped unchanged content, and crash recovery.

The crash test kills a real ingest process with SIGKILL at different moments and checks that
running the ingest again leaves every store consistent with the system of record.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import chromadb
import pytest

import uda
from connectors.contract.system_of_record import (
    UNREAD,
    LazyJSON,
    StateHead,
    StoredState,
    head_from_row,
    state_from_row,
)
from ontology import Document, Person, Relation, Repository
from uda.embedding import Embedder

N_DOCS = 120


def test_a_state_read_from_a_row_is_the_constructors_state() -> None:
    """`state_from_row` bypasses the dataclass __init__ for speed; it must build the same."""
    row = ("d1", 2, 77, 90, "Document", "Doc", 1, "project:x", 5, 0, "h", '{"a": 1}', "{}", 2, None)
    built = StoredState(
        element_id="d1",
        version=2,
        hlc=77,
        valid_to=90,
        element_type="Document",
        name="Doc",
        sensitivity_rank=1,
        scope="project:x",
        timestamp_ms=5,
        tombstone=False,
        content_hash="h",
        payload=LazyJSON('{"a": 1}'),
        filter_values=LazyJSON("{}"),
        latest_sensitivity_rank=2,
        latest_scope=None,
    )
    read = state_from_row(row)
    assert read == built  # field by field; the JSON columns compare as mappings
    assert vars(read).keys() == vars(built).keys()
    assert read.tombstone is False


def test_a_head_read_from_a_row_is_the_constructors_head() -> None:
    """`head_from_row` bypasses the dataclass __init__ too; it must build the same."""
    row = ("d1", 2, 77, "Document", "Doc", 1, "project:x", 5, 1, '{"a": 1}', 2, None)
    built = StateHead(
        element_id="d1",
        version=2,
        hlc=77,
        element_type="Document",
        name="Doc",
        sensitivity_rank=1,
        scope="project:x",
        timestamp_ms=5,
        tombstone=True,
        filter_values=LazyJSON('{"a": 1}'),
        latest_sensitivity_rank=2,
        latest_scope=None,
    )
    read = head_from_row(row)
    assert read == built
    assert vars(read).keys() == vars(built).keys()
    assert read.tombstone is True
    assert head_from_row((*row[:9], None, *row[10:])).filter_values is UNREAD


def corpus() -> tuple[list[object], list[Relation]]:
    repo = Repository(element_id="repo", name="repo", sensitivity="public")
    person = Person(element_id="ada", name="Ada", sensitivity="public")
    docs = [
        Document(
            element_id=f"doc-{i:03d}",
            name=f"Document {i}",
            text=f"Paragraph one of document {i} about topic {i % 7}.\n\n"
            f"Paragraph two mentions widget {i * 3} and gadget {i % 5}.",
            sensitivity="public",
            timestamp="2026-01-01T00:00:00Z",
        )
        for i in range(N_DOCS)
    ]
    relations = [
        Relation(source_id=d.element_id, relation="partOf", target_id="repo") for d in docs
    ]
    relations += [
        Relation(source_id=d.element_id, relation="authoredBy", target_id="ada") for d in docs[::3]
    ]
    return [repo, person, *docs], relations


def store_contents(root: Path) -> dict[str, object]:
    """Read every store directly with its own library (the client is closed)."""
    sor = sqlite3.connect(root / "uda.sqlite3")
    chunk_ids = {r[0] for r in sor.execute("SELECT chunk_id FROM chunks")}
    text_ids = [r[0] for r in sor.execute("SELECT chunk_id FROM text_chunks")]
    # Chunks with postings (every chunk here has words), and no postings without a chunk.
    posted = {doc for (doc,) in sor.execute("SELECT DISTINCT doc FROM text_postings_rows")}
    rowids = {rowid for (rowid,) in sor.execute("SELECT rowid FROM text_chunks")}
    fts_rows = len(posted & rowids) - len(posted - rowids)
    edges = {
        tuple(r) for r in sor.execute("SELECT source_id, relation, target_id, valid_to FROM edges")
    }
    states = sor.execute("SELECT count(*) FROM states").fetchone()[0]
    versions = sor.execute("SELECT max(version) FROM states").fetchone()[0]
    pending = sor.execute("SELECT count(*) FROM outbox").fetchone()[0]
    sor.close()
    chroma = chromadb.PersistentClient(path=str(root / "chroma"))
    collection = chroma.get_collection("uda_chunks")
    vector_ids = collection.get(include=[])["ids"]
    graph = json.loads((root / "graph" / "graph.json").read_text())
    graph_edges = {(s, r, t, vt) for s, r, t, _, vt in graph["edges"]}
    return {
        "chunk_ids": chunk_ids,
        "vector_ids": vector_ids,
        "text_ids": text_ids,
        "fts_rows": fts_rows,
        "edges": edges,
        "graph_edges": graph_edges,
        "states": states,
        "max_version": versions,
        "pending": pending,
    }


def assert_consistent(root: Path) -> dict[str, object]:
    contents = store_contents(root)
    chunk_ids = contents["chunk_ids"]
    assert contents["pending"] == 0
    assert sorted(contents["vector_ids"]) == sorted(chunk_ids)  # no loss, no duplicate
    assert sorted(contents["text_ids"]) == sorted(chunk_ids)
    assert contents["fts_rows"] == len(chunk_ids)
    assert contents["graph_edges"] == contents["edges"]
    return contents


def test_ingest_twice_is_idempotent(tmp_path: Path, embedder: Embedder) -> None:
    elements, relations = corpus()
    with uda.connect(path=tmp_path, embedder=embedder) as client:
        first = client.ingest(elements, relations)
        second = client.ingest(elements, relations)
    assert (first.written, first.edges) == (N_DOCS + 2, len(relations))
    assert (second.written, second.unchanged, second.edges) == (0, N_DOCS + 2, 0)
    contents = assert_consistent(tmp_path)
    assert contents["states"] == N_DOCS + 2
    assert contents["max_version"] == 1


def test_changed_element_gets_new_version_and_stores_follow(
    tmp_path: Path, embedder: Embedder
) -> None:
    elements, relations = corpus()
    with uda.connect(path=tmp_path, embedder=embedder) as client:
        client.ingest(elements, relations)
        changed = Document(
            element_id="doc-005",
            name="Document 5",
            text="Entirely new words.",
            sensitivity="public",
        )
        report = client.ingest([changed])
        assert report.written == 1
        res = client.search("entirely new words", limit=3, clearance_scope=["public"])
        assert res.results[0].element_id == "doc-005"
        assert res.results[0].properties["version"] == 2
    contents = assert_consistent(tmp_path)
    assert contents["states"] == N_DOCS + 3


def test_delete_is_a_tombstone_in_every_store(tmp_path: Path, embedder: Embedder) -> None:
    elements, relations = corpus()
    with uda.connect(path=tmp_path, embedder=embedder) as client:
        client.ingest(elements, relations)
        report = client.delete(["doc-007", "no-such-id"])
        assert (report.deleted, report.not_found) == (1, 1)
        res = client.search("document 7 topic 0 widget 21", limit=20, clearance_scope=["public"])
        assert "doc-007" not in [r.element_id for r in res.results]
        # Its edges are closed, so it is no one's context node any more.
        res = client.search("Document 9", limit=5, clearance_scope=["public"], expand_depth=2)
        assert all(n["element_id"] != "doc-007" for r in res.results for n in r.context_nodes)
        # A deleted element is no endpoint for new relations.
        with pytest.raises(uda.MissingElementError, match="doc-007"):
            client.ingest(relations=[("doc-007", "partOf", "repo")])
    contents = assert_consistent(tmp_path)
    closed = [e for e in contents["edges"] if "doc-007" in e[:3:2]]
    assert len(closed) == 1  # its partOf edge (only every third document has an author)
    assert all(e[3] != (1 << 63) - 1 for e in closed)


INGEST_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    import uda
    from test_write_path import corpus
    elements, relations = corpus()
    with uda.connect(path={root!r}) as client:
        # Small batches: many commits, so a kill lands between and inside them.
        for start in range(0, len(elements), 10):
            client.ingest(elements[start:start + 10])
        client.ingest(relations=relations)
    print("done")
    """
)


def _committed_states(root: Path) -> int:
    db = root / "uda.sqlite3"
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(db, timeout=1)
        try:
            return conn.execute("SELECT count(*) FROM states").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0  # schema not created yet


@pytest.mark.slow
@pytest.mark.parametrize("kill_after_states", [1, 45, 95])
def test_killed_ingest_finishes_when_run_again(
    tmp_path: Path, embedder: Embedder, kill_after_states: int
) -> None:
    root = tmp_path / "store"
    script = INGEST_SCRIPT.format(tests=str(Path(__file__).parent), root=str(root))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.Popen(  # noqa: S603 - our own script, run by our own interpreter
        [sys.executable, "-c", script],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while _committed_states(root) < kill_after_states and proc.poll() is None:
        assert time.monotonic() < deadline, "the ingest process made no progress"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    interrupted = _committed_states(root)
    assert interrupted >= kill_after_states

    elements, relations = corpus()
    with uda.connect(path=root, embedder=embedder) as client:
        report = client.ingest(elements, relations)
        # Whatever was committed before the kill is not written again.
        assert report.unchanged >= interrupted
        stats = client.stats()
        res = client.search("gadget widget", limit=5, clearance_scope=["public"])
    assert stats["elements"] == N_DOCS + 2
    assert stats["pending"] == 0
    assert len(res) == 5
    contents = assert_consistent(root)
    assert contents["states"] == N_DOCS + 2  # nothing duplicated
    assert contents["max_version"] == 1


def test_changed_section_re_embeds_only_that_chunk(tmp_path: Path, embedder: Embedder) -> None:
    sections = ["# Install\n\nRun make.", "# Configure\n\nEdit uda.toml.", "# Use\n\nCall search."]
    doc = Document(element_id="guide", name="Guide", text="\n\n".join(sections))
    with uda.connect(path=tmp_path, embedder=embedder) as client:
        first = client.ingest([doc])
        assert (first.chunks, first.embedded) == (3, 3)
        sections[1] = "# Configure\n\nEdit uda.toml, then restart."
        changed = doc.model_copy(update={"text": "\n\n".join(sections)})
        second = client.ingest([changed])
        assert (second.written, second.chunks, second.embedded) == (1, 3, 1)
        # Renaming changes every embedded text (the name prefixes each chunk).
        renamed = changed.model_copy(update={"name": "User guide"})
        assert client.ingest([renamed]).embedded == 3
        res = client.search(
            "restart after editing the config", limit=1, clearance_scope=["internal"]
        )
        assert res.results[0].element_id == "guide"
        assert "restart" in (res.results[0].snippet or "")
