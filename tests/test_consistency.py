"""`check` and `repair` against real backends damaged through their own libraries.

Each test builds a small store, closes the client, damages one store the way a crash or an
operator would (chromadb, sqlite3, the graph's JSON snapshot, the connector), reopens, and
requires `check` to name exactly the damage, `repair` to undo it, and search to work again.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import chromadb
import pytest
from chromadb.config import Settings
from test_write_path import INGEST_SCRIPT, assert_consistent

import uda
from connectors.contract.records import OPEN
from connectors.contract.system_of_record import OutboxItem, state_key
from connectors.networkx_graph import NetworkXConnector
from connectors.sqlite import postings
from connectors.sqlite.connector import SQLiteConnector
from connectors.tantivy import Label, LexicalIndexes
from ontology import Document, Person, Relation, Repository
from uda.embedding import Embedder
from uda.write.consistency import StoreReport

PUBLIC = ["public"]
VECTOR, TEXT, GRAPH = "vector:chroma", "text:sqlite", "graph:networkx"


def _doc(i: int, text: str | None = None) -> Document:
    return Document(
        element_id=f"doc-{i}",
        name=f"Note {i}",
        text=text or f"Note {i} describes the {['harbour', 'glacier', 'orchard'][i % 3]} {i}.",
        sensitivity="public",
    )


@pytest.fixture
def built(tmp_path: Path, embedder: Embedder) -> Path:
    """Ten notes in a repository, some by Ada; note 5 rewritten (v2), note 9 deleted."""
    docs = [_doc(i) for i in range(10)]
    relations = [
        Relation(source_id=d.element_id, relation="partOf", target_id="repo") for d in docs
    ]
    relations += [("doc-0", "authoredBy", "ada"), ("doc-3", "authoredBy", "ada")]
    with uda.connect(path=tmp_path, embedder=embedder) as client:
        client.ingest(
            [
                Repository(element_id="repo", name="repo", sensitivity="public"),
                Person(element_id="ada", name="Ada", sensitivity="public"),
                *docs,
            ],
            relations,
        )
        client.ingest([_doc(5, "Note 5 now tells of a lighthouse keeper.")])
        client.delete(["doc-9"])
    return tmp_path


def _chroma(root: Path) -> chromadb.Collection:
    client = chromadb.PersistentClient(
        path=str(root / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    return client.get_collection("uda_chunks")


def _only_damaged(report: uda.ConsistencyReport, damaged: str) -> None:
    assert not report.clean
    assert not report[damaged].clean
    assert all(s.clean for s in report.stores if s.store != damaged), str(report)


def test_a_fresh_store_checks_clean(built: Path, embedder: Embedder) -> None:
    with uda.connect(path=built, embedder=embedder) as client:
        report = client.check()
        repaired = client.repair()
    assert report.clean, str(report)
    assert {s.store for s in report.stores} == {VECTOR, TEXT, GRAPH}
    # 10 notes, one rewritten: 11 chunks; 12 elements; 12 edges (those of doc-9 closed).
    assert (report[VECTOR].checked, report[TEXT].checked) == (11, 11)
    assert (report[GRAPH].checked, report[GRAPH].checked_edges) == (12, 12)
    assert str(report).splitlines()[0] == "every store matches the system of record"
    assert f"{VECTOR}: clean (11 chunks)" in str(report)
    assert repaired.clean
    assert sum(repaired.enqueued.values()) == sum(repaired.deleted.values()) == 0


def _directory(root: Path) -> sqlite3.Connection:
    """The embedded Chroma store's chunk directory, opened the way an operator would."""
    return sqlite3.connect(root / "chroma" / "uda_chunks.directory.sqlite3", isolation_level=None)


def test_vector_store_damage_is_named_and_repaired(built: Path, embedder: Embedder) -> None:
    collection = _chroma(built)
    collection.delete(ids=["doc-1@1#0", "doc-2@1#0"])  # lost writes
    collection.add(  # a chunk the record never had (a vector only, as the store writes)
        ids=["ghost@1#0"], embeddings=[embedder.embed_documents(["ghost"])[0].tolist()]
    )
    # Searches filter on the directory: a missed delete, and an old version claiming to be
    # current, are damage there.
    db = _directory(built)
    retired_at = db.execute("SELECT valid_to FROM chunks WHERE chunk_id = 'doc-5@1#0'").fetchone()[
        0
    ]
    assert retired_at != OPEN
    db.execute("UPDATE chunks SET valid_to = 42 WHERE chunk_id = 'doc-4@1#0'")
    db.execute("UPDATE chunks SET valid_to = ? WHERE chunk_id = 'doc-5@1#0'", (OPEN,))
    db.close()

    semantic = {"semantic": 1, "lexical": 0}
    with uda.connect(path=built, embedder=embedder) as client:
        report = client.check()
        _only_damaged(report, VECTOR)
        vector = report[VECTOR]
        assert vector.missing == ("doc-1@1#0", "doc-2@1#0")
        assert vector.extra == ("ghost@1#0",)
        assert vector.stale == ("doc-4@1#0", "doc-5@1#0")
        assert (vector.pending, vector.differences) == (0, 5)
        text = str(report)
        assert "vector:chroma: 5 differences (11 chunks)" in text
        assert "missing chunks (in the record, not in the store): 2: doc-1@1#0, doc-2@1#0" in text
        # The stale row fails closed: the current note 4 cannot be found until the repair.
        res = client.search(
            "glacier 4", limit=10, clearance_scope=PUBLIC, weights=semantic, expand_depth=0
        )
        assert "doc-4" not in [r.element_id for r in res.results]

        repaired = client.repair(report)
        assert repaired.clean, str(repaired)
        assert repaired.enqueued[VECTOR] == 4  # one outbox entry per damaged state
        assert repaired.deleted[VECTOR] == 1
        assert repaired.applied[VECTOR] == 4
        assert client.check().clean
        for query, wanted in (("glacier 1", "doc-1"), ("glacier 4", "doc-4")):
            res = client.search(query, limit=3, clearance_scope=PUBLIC, weights=semantic)
            assert wanted in [r.element_id for r in res.results]

    db = _directory(built)
    valid_to = dict(db.execute("SELECT chunk_id, valid_to FROM chunks"))
    db.close()
    assert (valid_to["doc-4@1#0"], valid_to["doc-5@1#0"]) == (OPEN, retired_at)
    assert "ghost@1#0" not in valid_to
    assert set(collection.get(ids=["ghost@1#0", "doc-1@1#0"], include=[])["ids"]) == {"doc-1@1#0"}


def test_text_store_damage_is_named_and_repaired(built: Path, embedder: Embedder) -> None:
    db = sqlite3.connect(built / "uda.sqlite3", isolation_level=None)
    db.execute("DELETE FROM text_chunks WHERE chunk_id = 'doc-1@1#0'")
    db.execute("UPDATE text_chunks SET valid_to = 42 WHERE chunk_id = 'doc-4@1#0'")
    db.execute(
        "INSERT INTO text_chunks (chunk_id, element_id, version, element_type, sensitivity_rank,"
        " scope, valid_from, valid_to, filter_values, name, text, length) SELECT 'ghost@1#0',"
        " 'ghost', 1, element_type, sensitivity_rank, scope, valid_from, valid_to, filter_values,"
        " 'Ghost', 'ghost', 0 FROM text_chunks WHERE chunk_id = 'doc-0@1#0'"
    )
    # Index entries lost behind the table's back: the chunk is stored but cannot be found,
    # neither by the exhaustive path's postings nor by the engine's document (ADR 50, 60).
    doc_6, packed = db.execute(
        "SELECT rowid, term_freqs FROM text_chunks WHERE chunk_id = 'doc-6@1#0'"
    ).fetchone()
    postings.remove(db, [(doc_6, packed)])
    db.close()
    engine = LexicalIndexes(built / "uda.sqlite3.lexical")
    engine.open()
    engine.write([(Label(rank=0, scope=None), doc_6)], [], engine.generation or 0)
    engine.close()

    lexical = {"semantic": 0, "lexical": 1}
    with uda.connect(path=built, embedder=embedder) as client:
        report = client.check()
        _only_damaged(report, TEXT)
        text = report[TEXT]
        assert (text.missing, text.extra, text.stale) == (
            ("doc-1@1#0",),
            ("ghost@1#0",),
            ("doc-4@1#0",),
        )
        # 2 chunks' postings (doc-6's lost, doc-1's left without its chunk), 1 statistics row
        # (its label's count and length), 4 engine documents: doc-6's lost, doc-1's left
        # without its chunk, doc-4's still current, the ghost's never made.
        assert text.index_drift == 7
        assert "search index entries out of step with the chunks: 7" in str(report)
        res = client.search("harbour 6", limit=3, clearance_scope=PUBLIC, weights=lexical)
        assert "doc-6" not in [r.element_id for r in res.results]

        repaired = client.repair()
        assert repaired.clean, str(repaired)
        assert repaired.reindexed == (TEXT,)
        assert (repaired.enqueued[TEXT], repaired.deleted[TEXT]) == (2, 1)
        for query, wanted in (("harbour 6", "doc-6"), ("glacier 1", "doc-1")):
            res = client.search(query, limit=3, clearance_scope=PUBLIC, weights=lexical)
            assert wanted in [r.element_id for r in res.results]

    db = sqlite3.connect(built / "uda.sqlite3", isolation_level=None)
    assert db.execute(
        "SELECT count(*) FROM text_postings_rows WHERE doc = "
        "(SELECT rowid FROM text_chunks WHERE chunk_id = 'doc-6@1#0')"
    ).fetchone()[0]
    assert db.execute(
        "SELECT valid_to FROM text_chunks WHERE chunk_id = 'doc-4@1#0'"
    ).fetchone() == (OPEN,)
    db.close()


def test_graph_snapshot_damage_is_named_and_repaired(built: Path, embedder: Embedder) -> None:
    snapshot = built / "graph" / "graph.json"
    graph = json.loads(snapshot.read_text())
    # Ada's node and edges are lost; one edge lost, one reopened; a stray node and edge added.
    graph["nodes"] = [n for n in graph["nodes"] if n[0] != "ada"] + [["ghost", "Document"]]
    edges = [e for e in graph["edges"] if "ada" not in (e[0], e[2]) and e[0] != "doc-1"]
    for edge in edges:
        if edge[0] == "doc-9":
            edge[4] = OPEN  # the delete's closing of this edge never arrived
    graph["edges"] = [*edges, ["ghost", "relatedTo", "doc-3", 1, OPEN]]
    snapshot.write_text(json.dumps(graph))
    (built / "graph" / "graph.journal").unlink(missing_ok=True)

    with uda.connect(path=built, embedder=embedder) as client:
        report = client.check()
        _only_damaged(report, GRAPH)
        found = report[GRAPH]
        assert (found.missing, found.extra, found.stale) == (("ada",), ("ghost",), ())
        assert found.missing_edges == (
            ("doc-0", "authoredBy", "ada"),
            ("doc-1", "partOf", "repo"),
            ("doc-3", "authoredBy", "ada"),
        )
        assert found.extra_edges == (("ghost", "relatedTo", "doc-3"),)
        assert found.stale_edges == (("doc-9", "partOf", "repo"),)
        assert "ghost -relatedTo-> doc-3" in str(report)

        repaired = client.repair(report)
        assert repaired.clean, str(repaired)
        assert (repaired.enqueued[GRAPH], repaired.deleted[GRAPH]) == (5, 2)
        res = client.search("Note 0 harbour", limit=1, clearance_scope=PUBLIC, expand_depth=1)
        assert res.results[0].element_id == "doc-0"
        assert "ada" in [n["element_id"] for n in res.results[0].context_nodes]

    reloaded = json.loads(snapshot.read_text())  # the repair reached the file on close
    assert ["ghost", "Document"] not in reloaded["nodes"]
    assert ["ada", "Person"] in reloaded["nodes"]


async def test_edges_deleted_through_the_connector_async_client(
    built: Path, embedder: Embedder
) -> None:
    graph = NetworkXConnector(built / "graph")
    await graph.connect()
    await graph.delete_edges([("doc-2", "partOf", "repo"), ("no", "such", "edge")])
    await graph.close()

    async with uda.aconnect(path=built, embedder=embedder) as client:
        report = await client.check()
        _only_damaged(report, GRAPH)
        assert report[GRAPH].missing_edges == (("doc-2", "partOf", "repo"),)
        assert report[GRAPH].missing == ()  # the edge went, its nodes stayed
        repaired = await client.repair()
        assert repaired.clean
        assert (await client.check()).clean


async def test_a_key_sent_twice_in_one_drain_is_applied_once(
    built: Path, embedder: Embedder
) -> None:
    sor = SQLiteConnector(built / "uda.sqlite3")
    await sor.connect()
    for store in (VECTOR, TEXT):
        await sor.enqueue(store, "state", [("doc-1", 1), ("doc-1", 1)])
    await sor.enqueue(GRAPH, "edge", [("doc-1", "partOf", "repo")] * 2)
    await sor.close()

    async with uda.aconnect(path=built, embedder=embedder) as client:
        report = await client.check()
        assert [s.pending for s in report.stores] == [2, 2, 2]
        assert report.stores[0].differences == 0
        repaired = await client.repair(report)
        assert repaired.clean
        assert repaired.applied == {VECTOR: 2, TEXT: 2, GRAPH: 2}


def _outbox(root: Path) -> list[tuple[str, str, tuple[object, ...]]]:
    db = sqlite3.connect(root / "uda.sqlite3", timeout=5)
    try:
        rows = db.execute("SELECT store, kind, key FROM outbox ORDER BY seq").fetchall()
    except sqlite3.OperationalError:
        rows = []  # the schema is not there yet
    finally:
        db.close()
    return [(store, kind, tuple(json.loads(key))) for store, kind, key in rows]


def _states(root: Path) -> int:
    db = sqlite3.connect(root / "uda.sqlite3", timeout=5)
    try:
        return db.execute("SELECT count(*) FROM states").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


@pytest.mark.slow
def test_killed_ingest_is_reported_pending_and_repair_finishes_it(
    tmp_path: Path, embedder: Embedder
) -> None:
    root = tmp_path / "store"
    script = INGEST_SCRIPT.format(tests=str(Path(__file__).parent), root=str(root))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.Popen(  # noqa: S603 - our own script, run by our own interpreter
        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    # Freeze the process while a commit's outbox entries wait to be drained, then kill it:
    # the kill lands between the system of record and the derived stores, every time.
    deadline = time.monotonic() + 120
    while True:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the ingest process never left work pending"
        if (root / "uda.sqlite3").exists() and _states(root) >= 30 and _outbox(root):
            proc.send_signal(signal.SIGSTOP)
            if _outbox(root):
                break
            proc.send_signal(signal.SIGCONT)
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left = _outbox(root)
    committed = _states(root)
    assert left

    with uda.connect(path=root, embedder=embedder) as client:
        report = client.check()
        assert not report.clean
        for store in report.stores:
            waiting = [(kind, key) for name, kind, key in left if name == store.store]
            assert store.pending == len(waiting)
            shown = [(item.kind, item.key) for item in store.pending_examples]
            assert shown == waiting[: len(shown)]  # the oldest first
            # Whatever a store lacks, the outbox was about to send it; nothing is extra.
            pending_states = {(str(k[0]), int(str(k[1]))) for kind, k in waiting if kind == "state"}
            pending_edges = {k for kind, k in waiting if kind == "edge"}
            if store.role == "graph":
                assert {eid for eid, _ in pending_states} >= set(store.missing)
                assert pending_edges >= set(store.missing_edges) | set(store.stale_edges)
            else:
                assert pending_states >= {state_key(c) for c in (*store.missing, *store.stale)}
            assert store.extra == store.extra_edges == ()
        assert "pending (sync applies them): " in str(report)

        repaired = client.repair(report)
        assert repaired.clean, str(repaired)
        assert sum(repaired.applied.values()) == len(left)
        assert sum(repaired.enqueued.values()) == 0  # the outbox alone carried the recovery
        assert client.stats()["pending"] == 0
        res = client.search("gadget widget", limit=5, clearance_scope=PUBLIC)
        assert len(res) == 5
    contents = assert_consistent(root)
    assert contents["states"] == committed  # repair finished what was committed, wrote no state


def test_report_text_is_bounded_and_names_everything() -> None:
    report = StoreReport(
        store=VECTOR,
        role="vector",
        checked=40,
        missing=tuple(f"doc-{i}@1#0" for i in range(8)),
        pending=3,
        pending_examples=(
            OutboxItem(seq=1, store=VECTOR, kind="state", key=("doc-1", "1")),
            OutboxItem(seq=2, store=VECTOR, kind="edge", key=("a", "partOf", "b")),
        ),
    )
    text = str(report)
    assert text.splitlines()[0] == f"{VECTOR}: 8 differences, 3 pending outbox entries (40 chunks)"
    assert "doc-4@1#0, and 3 more" in text
    assert "doc-5@1#0" not in text
    assert "pending (sync applies them): state doc-1@1, edge a -partOf-> b, and 1 more" in text
    assert not report.clean
    assert StoreReport(store=GRAPH, role="graph").clean


def test_state_key_splits_at_the_last_at_sign() -> None:
    assert state_key("doc-1@3#0") == ("doc-1", 3)
    assert state_key("ada@example.org#notes@12#4") == ("ada@example.org#notes", 12)
