"""Searches and ingests at the same time give the answers they give one at a time.

Every compared request pins time (a fixed `as_of`, or `decay=False`), so the results are a
pure function of the stored data and the request: the parallel answers must equal the
sequential ones exactly, Arrow table for Arrow table.

The parallel passes run on an embedder with a cold query cache, so the query embeddings are
computed concurrently too (not read from a cache the sequential pass filled).
"""

from __future__ import annotations

import asyncio
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import uda
from ontology import (
    Decision,
    Document,
    Element,
    Evidence,
    Person,
    Project,
    Repository,
    SystemComponent,
    result_schema,
)
from uda.embedding import Embedder
from uda.embedding.factory import make_embedder

TOPICS = [
    ("vector", "vector search with approximate nearest neighbours and HNSW indexes"),
    ("graph", "graph expansion over typed relations and personalized PageRank"),
    ("clock", "hybrid logical clocks stamping every write with physical and logical time"),
    ("clearance", "clearance levels and project scopes that hide restricted documents"),
    ("arrow", "Apache Arrow record batches and IPC streams for search results"),
    ("ingest", "the write path with an outbox that makes interrupted ingests resumable"),
    ("fusion", "reciprocal rank fusion of semantic, lexical and centrality legs"),
    ("decay", "version decay with a half-life and a floor applied before ranking"),
]
SENSITIVITIES = ["public", "internal", "confidential", "restricted"]
SCOPES = [None, None, "project:core", "project:edge"]


def _corpus() -> tuple[list[Element], list[tuple[str, str, str]]]:
    elements: list[Element] = [Project(element_id="project:core", name="core")]
    relations: list[tuple[str, str, str]] = []
    for r in range(4):
        elements.append(Repository(element_id=f"repo:{r}", name=f"repo-{r}", sensitivity="public"))
    for s in range(3):
        elements.append(SystemComponent(element_id=f"svc:{s}", name=f"service-{s}", kind="service"))
        relations.append((f"svc:{s}", "partOf", "project:core"))
    for p in range(6):
        elements.append(
            Person(
                element_id=f"person:{p}",
                name=f"Person {p}",
                sensitivity=SENSITIVITIES[p % 3],
                email=f"p{p}@example.org",
            )
        )
    for d, (key, topic) in enumerate(TOPICS):
        elements.append(
            Decision(
                element_id=f"adr:{key}",
                name=f"ADR {d}: {key}",
                text=f"We decided how to handle {topic}.",
                status="accepted" if d % 3 else "superseded",
                sensitivity=SENSITIVITIES[d % 3],
                scope=SCOPES[d % 4],
            )
        )
        relations.append((f"adr:{key}", "authoredBy", f"person:{d % 6}"))
        if d:
            relations.append((f"adr:{key}", "supersedes", f"adr:{TOPICS[d - 1][0]}"))
    for i in range(40):
        key, topic = TOPICS[i % len(TOPICS)]
        doc_id = f"doc:{i:02d}"
        elements.append(
            Document(
                element_id=doc_id,
                name=f"{key.title()} notes {i}",
                text=f"Notes {i} on {topic}. Part {i // len(TOPICS)} of the {key} series, "
                f"with details that differ per document: item {i * 7 % 13}.",
                sensitivity=SENSITIVITIES[i % 4],
                scope=SCOPES[(i // 4) % 4],
            )
        )
        relations.append((doc_id, "partOf", f"repo:{i % 4}"))
        relations.append((doc_id, "authoredBy", f"person:{i % 6}"))
        if i % 3 == 0:
            relations.append((doc_id, "governedBy", f"adr:{key}"))
        if i % 5 == 0:
            relations.append((doc_id, "partOf", f"svc:{i % 3}"))
        if i % 7 == 0 and i:
            relations.append((doc_id, "relatedTo", f"doc:{i - 1:02d}"))
    for e in range(6):
        key, topic = TOPICS[e]
        elements.append(
            Evidence(
                element_id=f"ev:{e}",
                name=f"Benchmark evidence {e}",
                text=f"Measured evidence about {topic}: recall and latency numbers.",
                confidence=0.5 + e / 20,
                sensitivity=SENSITIVITIES[e % 2],
            )
        )
        relations.append((f"ev:{e}", "provesRelation", f"doc:{e * 3:02d}"))
    return elements, relations


QUERIES = [
    "how does vector search find nearest neighbours",
    "graph expansion over relations",
    "hybrid logical clock timestamps",
    "who may see restricted documents",
    "Arrow IPC stream of results",
    "resume an interrupted ingest",
    "rank fusion of legs",
    "half-life decay of old versions",
    "benchmark recall and latency",
    "decision records that were superseded",
    "notes item 7",
    "project scopes",
]
CLEARANCES = [
    [],
    ["internal"],
    ["confidential", "project:core"],
    ["restricted", "project:*"],
    ["internal", "project:edge"],
]


def _requests(as_of: int) -> list[dict[str, Any]]:
    """About 50 varied, time-pinned requests (deterministic)."""
    rng = random.Random(20240611)
    out: list[dict[str, Any]] = []
    for i in range(50):
        req: dict[str, Any] = {
            "query": QUERIES[i % len(QUERIES)],
            "limit": [1, 3, 5, 10, 25][i % 5],
            "clearance_scope": CLEARANCES[(i // 2) % len(CLEARANCES)],
            "expand_depth": i % 3,
        }
        if i % 2:
            req["decay"] = False
        else:
            req["as_of"] = as_of
        extra = rng.randrange(8)
        if extra == 1:
            req["context_filters"] = {"sensitivity": {"$in": ["public", "internal"]}}
        elif extra == 2:
            req["element_types"] = ["Document"]
        elif extra == 3:
            req["relations"] = ["partOf", "governedBy"]
        elif extra == 4:
            req["centrality"] = "pagerank"
        elif extra == 5:
            req["weights"] = {"semantic": 1.0, "lexical": 0.5, "centrality": 1.0}
        elif extra == 6:
            req["graph_candidates"] = True
        out.append(req)
    return out


def _summary(res: uda.SearchResponse) -> list[tuple[Any, ...]]:
    """A readable digest for assertion messages: ids, order, scores, context nodes."""
    return [
        (
            r["element_id"],
            r["score"],
            r["semantic_score"],
            r["lexical_score"],
            r["centrality"],
            r["decay"],
            tuple(
                (n["element_id"], n["relation"], n["direction"], n["depth"], n["via"])
                for n in r["context_nodes"]
            ),
        )
        for r in res.to_arrow().to_pylist()
    ]


def _assert_same(
    requests: list[dict[str, Any]],
    expected: list[pa.Table],
    got: list[uda.SearchResponse],
) -> None:
    assert len(got) == len(expected)
    for request, table, res in zip(requests, expected, got, strict=True):
        actual = res.to_arrow()
        if not actual.equals(table):
            seq = _summary_of(table)
            par = _summary(res)
            pytest.fail(f"request {request} differs:\nsequential {seq}\nparallel   {par}")


def _summary_of(table: pa.Table) -> list[tuple[Any, ...]]:
    return [
        (r["element_id"], r["score"], [n["element_id"] for n in r["context_nodes"]])
        for r in table.to_pylist()
    ]


def _assert_meaningful(tables: list[pa.Table]) -> None:
    """The comparison is not vacuous: most answers have results, many have context."""
    non_empty = [t for t in tables if t.num_rows]
    assert len(non_empty) >= 0.7 * len(tables)
    with_context = [t for t in non_empty if any(t.column("context_nodes").to_pylist())]
    assert len(with_context) >= 0.4 * len(tables)
    assert len({tuple(t.column("element_id").to_pylist()) for t in tables}) >= 15


def _cold_embedder() -> Embedder:
    """The same packaged weights in the same runtime as the session's, with an empty query
    cache (another runtime's vectors differ in the last float bits)."""
    return make_embedder()


# -- async -------------------------------------------------------------------------------------


async def test_parallel_async_searches_equal_sequential(tmp_path: Path, embedder: Embedder) -> None:
    path = tmp_path / "uda"
    elements, relations = _corpus()
    async with uda.aconnect(path=path, embedder=embedder) as c:
        report = await c.ingest(elements, relations)
        assert report.hlc is not None
        requests = _requests(report.hlc)
        sequential = [(await c.search(**r)).to_arrow() for r in requests]
    _assert_meaningful(sequential)

    async with uda.aconnect(path=path, embedder=_cold_embedder()) as c:
        parallel = await asyncio.gather(*(c.search(**r) for r in requests))
        _assert_same(requests, sequential, list(parallel))

        # Again, warm, twice over and in another order.
        order = list(range(len(requests))) * 2
        random.Random(7).shuffle(order)
        shuffled = await asyncio.gather(*(c.search(**requests[i]) for i in order))
        _assert_same([requests[i] for i in order], [sequential[i] for i in order], shuffled)

        stats = await c.stats()
        assert stats["pending"] == 0


# -- threads -----------------------------------------------------------------------------------


def test_sync_client_from_many_threads_equals_sequential(
    tmp_path: Path, embedder: Embedder
) -> None:
    path = tmp_path / "uda"
    elements, relations = _corpus()
    with uda.connect(path=path, embedder=embedder) as c:
        report = c.ingest(elements, relations)
        assert report.hlc is not None
        requests = _requests(report.hlc)
        sequential = [c.search(**r).to_arrow() for r in requests]
    _assert_meaningful(sequential)

    with uda.connect(path=path, embedder=_cold_embedder()) as c:

        def run(request: dict[str, Any]) -> uda.SearchResponse:
            return c.search(**request)

        with ThreadPoolExecutor(max_workers=8) as pool:
            threaded = list(pool.map(run, requests))
        _assert_same(requests, sequential, threaded)

        order = list(reversed(range(len(requests)))) * 2
        with ThreadPoolExecutor(max_workers=16) as pool:
            again = list(pool.map(run, [requests[i] for i in order]))
        _assert_same([requests[i] for i in order], [sequential[i] for i in order], again)


# -- concurrent writes -------------------------------------------------------------------------

WRITERS = 8
DOCS_PER_BATCH = 5


def _batch(w: int) -> tuple[list[Element], list[tuple[str, str, str]]]:
    """A batch that shares no element with any other batch (but links to the corpus)."""
    person = Person(element_id=f"person:w{w}", name=f"Writer {w}")
    elements: list[Element] = [person]
    relations: list[tuple[str, str, str]] = []
    for d in range(DOCS_PER_BATCH):
        doc_id = f"doc:w{w}-{d}"
        elements.append(
            Document(
                element_id=doc_id,
                name=f"Concurrent batch {w} document {d}",
                text=f"Written concurrently by writer w{w}: token{w}x{d} and the ingest pipeline.",
                sensitivity="internal",
            )
        )
        relations.append((doc_id, "partOf", f"repo:{w % 4}"))
        relations.append((doc_id, "authoredBy", person.element_id))
    return elements, relations


def _check_written(
    c_search: Any,
    stats: dict[str, Any],
    base: dict[str, Any],
    chunks: int,
) -> None:
    new_elements = WRITERS * (DOCS_PER_BATCH + 1)
    assert stats["pending"] == 0
    assert stats["elements"] == base["elements"] + new_elements
    assert stats["states"] == base["states"] + new_elements
    assert stats["edges"] == base["edges"] + WRITERS * DOCS_PER_BATCH * 2
    assert stats["chunks"] == base["chunks"] + chunks
    for w in range(WRITERS):
        ids = [f"doc:w{w}-{d}" for d in range(DOCS_PER_BATCH)]
        res = c_search(
            f"token{w}x0 written concurrently by writer w{w}",
            limit=DOCS_PER_BATCH,
            clearance_scope=["internal"],
            context_filters={"element_id": {"$in": ids}},
        )
        rows = res.to_arrow().to_pylist()
        assert sorted(r["element_id"] for r in rows) == ids
        for row in rows:
            assert row["version"] == 1
            assert row["semantic_rank"] is not None  # in the vector store
            neighbours = {(n["element_id"], n["relation"]) for n in row["context_nodes"]}
            assert (f"repo:{w % 4}", "partOf") in neighbours  # in the graph store
            assert (f"person:w{w}", "authoredBy") in neighbours
        exact = c_search(
            f"token{w}x0",
            limit=1,
            clearance_scope=["internal"],
            context_filters={"element_id": {"$in": ids}},
        ).to_arrow()
        assert exact.column("lexical_rank").to_pylist() == [1]  # in the text index


async def test_concurrent_ingests_and_searches_do_not_corrupt(
    tmp_path: Path, embedder: Embedder
) -> None:
    path = tmp_path / "uda"
    elements, relations = _corpus()
    async with uda.aconnect(path=path, embedder=embedder) as c:
        await c.ingest(elements, relations)
        base = await c.stats()
        requests = _requests(0)
        for r in requests:
            r.pop("as_of", None)
        ingests = [c.ingest(*_batch(w)) for w in range(WRITERS)]
        searches = [c.search(**r) for r in requests[:24]]
        outcome = await asyncio.gather(*ingests, *searches)
        reports = outcome[:WRITERS]
        for report in reports:
            assert report.written == DOCS_PER_BATCH + 1
            assert report.edges == DOCS_PER_BATCH * 2
        assert len({r.hlc for r in reports}) == WRITERS
        for res in outcome[WRITERS:]:
            table = res.to_arrow()
            assert table.schema.equals(result_schema(), check_metadata=True)
            ids = table.column("element_id").to_pylist()
            assert len(ids) == len(set(ids))

        stats = await c.stats()
        chunks = sum(r.chunks for r in reports)

    # Re-open (the graph is reloaded from disk) and check everything from the sync client.
    with uda.connect(path=path, embedder=embedder) as sync_client:
        reopened = sync_client.stats()
        assert reopened == stats
        _check_written(sync_client.search, stats, base, chunks)


def test_concurrent_ingests_from_threads_do_not_corrupt(tmp_path: Path, embedder: Embedder) -> None:
    path = tmp_path / "uda"
    elements, relations = _corpus()
    with uda.connect(path=path, embedder=embedder) as c:
        c.ingest(elements, relations)
        base = c.stats()

        def work(i: int) -> Any:
            if i < WRITERS:
                return c.ingest(*_batch(i))
            return c.search(QUERIES[i % len(QUERIES)], limit=10, clearance_scope=["internal"])

        with ThreadPoolExecutor(max_workers=12) as pool:
            outcome = list(pool.map(work, range(WRITERS + 24)))
        reports = outcome[:WRITERS]
        assert all(r.written == DOCS_PER_BATCH + 1 for r in reports)
        stats = c.stats()
        _check_written(c.search, stats, base, sum(r.chunks for r in reports))

        # Re-ingesting every batch again, concurrently, changes nothing.
        with ThreadPoolExecutor(max_workers=WRITERS) as pool:
            again = list(pool.map(lambda w: c.ingest(*_batch(w)), range(WRITERS)))
        assert all(r.written == 0 and r.unchanged == DOCS_PER_BATCH + 1 for r in again)
        assert all(r.edges == 0 for r in again)
        assert c.stats() == stats


async def test_a_failing_leg_leaves_no_sibling_running() -> None:
    """One leg fails: the others are cancelled and finished before the error reaches us."""
    from uda.query.concurrency import together

    finished: list[str] = []

    async def slow() -> int:
        try:
            await asyncio.sleep(5)
            return 1
        finally:
            finished.append("slow")

    async def failing() -> int:
        await asyncio.sleep(0)
        raise RuntimeError("leg down")

    with pytest.raises(RuntimeError, match="leg down"):
        await together([slow(), failing()])
    assert finished == ["slow"]


async def test_closing_waits_for_queries_left_running_in_threads(tmp_path: Path) -> None:
    """A caller that stops waiting leaves its query running; close() lets it finish first."""
    import threading
    import time

    from connectors.sqlite.connector import SQLiteConnector

    store = SQLiteConnector(tmp_path / "s.sqlite3")
    await store.connect()
    started, done = threading.Event(), threading.Event()

    def slow_read() -> int:
        started.set()
        time.sleep(0.3)
        value = store._reader().execute("SELECT 42").fetchone()[0]  # connection still open
        done.set()
        return value

    task = asyncio.ensure_future(store._run(slow_read))
    await asyncio.to_thread(started.wait, 5)
    task.cancel()
    await store.close()
    assert done.is_set()
