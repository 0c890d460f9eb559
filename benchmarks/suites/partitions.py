"""Partitions: a project-bound vector search, one table against scope partitions (issue 19).

Server profile only. At each of the preset's `partition_sizes`, the same chunks go into the
PostgreSQL vector store twice, through the connector's own writes (`upsert_chunks`, batches
of `BATCH`): once as one table (`partition_by = "none"`), once partitioned by scope
(`"scope"`, connectors/postgres/partitions.py). Every chunk belongs to one of ten projects
(`PROJECTS`), so a caller cleared for one of them may see a tenth of the chunks: the case
where one HNSW index must walk past nine invisible chunks for each visible one, and the
partitioned store reads one partition's index.

Vectors are clustered (`CLUSTERS` centres, Gaussian noise, unit length), as text embeddings
are; queries are drawn the same way. Per layout: p50 and p95 of `vector_search` (k = 10,
HNSW, the connector's settings) for callers cleared for one project each in turn, recall@10
against exact search over the chunks that caller may see (numpy), the load time, the bytes
on disk per chunk (table and indexes), and the speed-up of the partitioned layout at its
p50.

The chunks are loaded as a bulk load is done: the HNSW index is dropped, the rows written,
and the index built once over all of them (`CREATE INDEX`, parallel, with the memory to hold
the graph). Inserting a million rows one by one into a live HNSW graph ran at ~350 chunks/s
here (50 minutes a layout); the index built afterwards is the same kind of graph, with the
connector's own definition (`VECTOR_INDEXES`). `load_s` counts the writes and the build.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.metrics import percentile
from benchmarks.suites import Context, SuiteResult
from connectors.contract.records import OPEN, ChunkRecord, SearchFilter
from connectors.contract.system_of_record import chunk_id
from connectors.postgres.vector_sql import VECTOR_INDEXES

PROJECTS = tuple(f"project:t{n}" for n in range(10))
DIMENSION = 384
CLUSTERS = 200
NOISE = 0.35
BATCH = 2000
# Memory for one HNSW build: the graph of the largest table must fit, or pgvector falls back
# to a far slower build on disk (1M x 384 dimensions needs about 2.5 GB).
BUILD_MEMORY = "6GB"
K = 10
WARMUP = 10
SEED = 19
# The vector store on disk, table and indexes (HNSW included), every partition summed.
_SIZE = (
    "SELECT greatest(pg_total_relation_size('vector_chunks'), (SELECT "
    "sum(pg_total_relation_size(relid)) FROM pg_partition_tree('vector_chunks')))"
)


def run(ctx: Context, result: SuiteResult) -> None:
    """Both layouts at every size of the preset."""
    if "server" not in ctx.profiles:
        result.status, result.reason = "skipped", "needs the server profile"
        return
    from uda.services.postgres import dsn

    url = dsn(ctx.servers.postgres.status())
    for size in ctx.preset.partition_sizes:
        vectors, queries = _vectors(size, ctx.preset.partition_queries)
        scopes = np.arange(size) % len(PROJECTS)
        figures: dict[str, dict[str, float]] = {}
        for layout in ("none", "scope"):
            ctx.log(f"partitions: {size} chunks, partition_by={layout}")
            figures[layout] = asyncio.run(_measure(url, layout, size, vectors, scopes, queries))
        base = figures["none"]["p50_ms"]
        for layout, measured in figures.items():
            result.add(
                dataset="synthetic",
                system="uda",
                method=f"vector search, 1 of {len(PROJECTS)} scopes, partition_by={layout}",
                profile="server",
                metrics={**measured, "speedup": base / measured["p50_ms"]},
                params={
                    "size": size,
                    "queries": len(queries),
                    "k": K,
                    "projects": len(PROJECTS),
                    "dimension": DIMENSION,
                },
            )


def _vectors(size: int, queries: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Clustered unit vectors for the chunks, and query vectors drawn the same way."""
    rng = np.random.default_rng(SEED)
    centres = rng.standard_normal((CLUSTERS, DIMENSION)).astype(np.float32)

    def draw(n: int) -> npt.NDArray[np.float32]:
        picked = centres[rng.integers(0, CLUSTERS, n)]
        points = picked + NOISE * rng.standard_normal((n, DIMENSION)).astype(np.float32)
        return points / np.linalg.norm(points, axis=1, keepdims=True)

    return draw(size), draw(queries)


async def _measure(
    url: str,
    layout: str,
    size: int,
    vectors: npt.NDArray[np.float32],
    scopes: npt.NDArray[Any],
    queries: npt.NDArray[np.float32],
) -> dict[str, float]:
    from connectors.postgres.connector import PostgresConnector

    connector = PostgresConnector(
        url, dimension=DIMENSION, schema=f"b_part_{layout}_{size}", partition_by=layout
    )
    await connector.connect()
    try:
        started = time.perf_counter()
        async with connector._connection() as conn:  # pyright: ignore[reportPrivateUsage]
            await conn.execute("DROP INDEX IF EXISTS vector_chunks_hnsw")
        for start in range(0, size, BATCH):
            await connector.upsert_chunks(
                _records(vectors, scopes, start, min(size, start + BATCH))
            )
        async with connector._connection() as conn:  # pyright: ignore[reportPrivateUsage]
            await conn.execute(f"SET maintenance_work_mem = '{BUILD_MEMORY}'")
            await conn.execute("SET max_parallel_maintenance_workers = 2")
            await conn.execute(VECTOR_INDEXES)
        load_s = time.perf_counter() - started
        async with connector._connection() as conn:  # pyright: ignore[reportPrivateUsage]
            await conn.execute("ANALYZE")
            cur = await conn.execute(_SIZE)
            row = await cur.fetchone()
            stored_bytes = float(row[0]) if row is not None and row[0] is not None else 0.0
        callers = [
            SearchFilter(max_sensitivity_rank=0, projects=frozenset({PROJECTS[j % len(PROJECTS)]}))
            for j in range(len(queries))
        ]
        for j in range(min(WARMUP, len(queries))):
            await connector.vector_search(queries[j].tolist(), K, callers[j])
        walls: list[float] = []
        recalls: list[float] = []
        for j, query in enumerate(queries):
            begun = time.perf_counter()
            hits = await connector.vector_search(query.tolist(), K, callers[j])
            walls.append((time.perf_counter() - begun) * 1000)
            visible = np.flatnonzero(scopes == j % len(PROJECTS))
            best = visible[np.argsort(-(vectors[visible] @ query))[:K]]
            exact = {chunk_id(f"t:{i}", 1, 0) for i in best}
            recalls.append(len(exact & {h.chunk_id for h in hits}) / K)
    finally:
        await connector.close()
    return {
        "p50_ms": percentile(walls, 50),
        "p95_ms": percentile(walls, 95),
        "recall_at_10": float(np.mean(recalls)),
        "load_s": load_s,
        "chunks_per_s": size / load_s,
        "bytes_per_chunk": stored_bytes / size,
    }


def _records(
    vectors: npt.NDArray[np.float32], scopes: npt.NDArray[Any], start: int, end: int
) -> list[ChunkRecord]:
    return [
        ChunkRecord(
            chunk_id=chunk_id(f"t:{i}", 1, 0),
            element_id=f"t:{i}",
            version=1,
            index=0,
            text=f"chunk {i}",
            embedding=vectors[i].tolist(),
            element_type="Document",
            name=f"chunk {i}",
            sensitivity_rank=0,
            scope=PROJECTS[int(scopes[i])],
            valid_from=1,
            valid_to=OPEN,
            filter_values={"element_type": "Document"},
        )
        for i in range(start, end)
    ]


__all__ = ["PROJECTS", "run"]
