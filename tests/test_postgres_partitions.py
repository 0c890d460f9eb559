"""The vector store partitioned by scope (issue 19): one partition per project, pruned reads.

The conformance suite runs on this layout too (tests/test_conformance.py,
`postgres-partitioned`); these tests hold what is particular to it: where rows live, that a
project-bound search plans only its partitions, and the layout guard.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from postgres_fixtures import DIM, fresh_schema, run_sql, server

from connectors.conformance.data import chunk, random_vectors, rows, state
from connectors.contract.errors import ConfigError, ConnectorError
from connectors.contract.records import SearchFilter
from connectors.contract.system_of_record import WriteBatch
from connectors.postgres import partitions
from connectors.postgres import vector_sql as vsql
from connectors.postgres.connector import PostgresConnector
from connectors.postgres.filter_sql import compile_filter
from connectors.postgres.record_partitions import RECORD_PARTITIONS
from uda.services.postgres import PostgresService

pytestmark = pytest.mark.slow
__all__ = ["server"]  # a fixture

Server = tuple[PostgresService, str]


@pytest.fixture
async def partitioned(server: Server) -> AsyncIterator[PostgresConnector]:
    connector = PostgresConnector(
        server[1], dimension=DIM, schema=fresh_schema(), partition_by="scope"
    )
    await connector.connect()
    try:
        yield connector
    finally:
        await connector.close()


def _where(url: str, schema: str) -> dict[str, str]:
    """Each chunk id with the partition (table) that holds it."""
    rows = run_sql(url, schema, "SELECT chunk_id, tableoid::regclass::text FROM vector_chunks")
    return dict(rows)


def _schema(connector: PostgresConnector) -> str:
    return connector._schema  # pyright: ignore[reportPrivateUsage]


async def test_each_scope_has_its_partition_and_a_chunk_moves_with_its_scope(
    server: Server, partitioned: PostgresConnector
) -> None:
    vectors = random_vectors(4, DIM, seed=7)
    odd = "project:o'brien); DROP TABLE states; --"  # quoted as a literal, never pasted
    await partitioned.upsert_chunks(
        [
            chunk("doc:open", embedding=vectors[0]),
            chunk("doc:alpha", embedding=vectors[1], scope="project:alpha"),
            chunk("doc:beta", embedding=vectors[2], scope="project:beta"),
            chunk("doc:odd", embedding=vectors[3], scope=odd),
        ]
    )
    schema = _schema(partitioned)
    where = _where(server[1], schema)
    assert where["doc:open@1#0"] == partitions.partition_name("")
    assert where["doc:alpha@1#0"] == partitions.partition_name("project:alpha")
    assert where["doc:beta@1#0"] == partitions.partition_name("project:beta")
    assert where["doc:odd@1#0"] == partitions.partition_name(odd)
    assert run_sql(server[1], schema, "SELECT count(*) FROM states") == [(0,)]

    # Reclassified into another project: the chunk leaves its partition, never in two.
    await partitioned.upsert_chunks(
        [chunk("doc:alpha", embedding=vectors[1], scope="project:beta")]
    )
    where = _where(server[1], schema)
    assert where["doc:alpha@1#0"] == partitions.partition_name("project:beta")
    assert run_sql(server[1], schema, "SELECT count(*) FROM vector_chunks") == [(4,)]
    # ... and a caller of the old project no longer finds it.
    hits = await partitioned.vector_search(
        vectors[1], 5, SearchFilter(max_sensitivity_rank=0, projects=frozenset({"project:alpha"}))
    )
    assert {h.element_id for h in hits} == {"doc:open"}


async def test_a_project_bound_search_plans_only_its_partitions(
    server: Server, partitioned: PostgresConnector
) -> None:
    vectors = random_vectors(12, DIM, seed=11)
    await partitioned.upsert_chunks(
        [
            chunk(f"doc:{n}", embedding=vectors[n], scope=None if n < 2 else f"project:p{n % 5}")
            for n in range(12)
        ]
    )
    caller = SearchFilter(max_sensitivity_rank=0, projects=frozenset({"project:p3"}))
    where, params = compile_filter(caller, table="v")
    where, params = partitions.prune(where, params, caller, table="v")
    params.update(q=str(list(vectors[0])), k=5)
    plan = run_sql(
        server[1],
        _schema(partitioned),
        "EXPLAIN (FORMAT JSON) "
        + vsql.nearest_sql(where, exact=False).replace("%(q)s", "%(q)s::vector"),
        params,
    )
    scanned = set(_relations(plan[0][0]))
    assert scanned == {partitions.partition_name(""), partitions.partition_name("project:p3")}
    hits = await partitioned.vector_search(vectors[3], 12, caller)
    assert {h.element_id for h in hits} == {"doc:0", "doc:1", "doc:3", "doc:8"}


def _relations(plan: object) -> list[str]:
    """Every relation a JSON plan reads."""
    found: list[str] = []
    if isinstance(plan, dict):
        if "Relation Name" in plan:
            found.append(str(plan["Relation Name"]))
        for value in plan.values():
            found += _relations(value)
    elif isinstance(plan, list):
        for item in plan:
            found += _relations(item)
    elif isinstance(plan, str) and plan.startswith("["):
        found += _relations(json.loads(plan))
    return found


async def test_a_schema_keeps_its_layout(server: Server, partitioned: PostgresConnector) -> None:
    plain = PostgresConnector(server[1], dimension=DIM, schema=_schema(partitioned))
    with pytest.raises(ConnectorError, match="partitioned vector table"):
        await plain.connect()
    await plain.close()
    with pytest.raises(ConfigError) as raised:
        PostgresConnector(server[1], partition_by="project")
    assert raised.value.field == "partition_by"


async def test_the_record_is_hash_partitioned_and_writes_stay_idempotent(
    server: Server, partitioned: PostgresConnector
) -> None:
    """`states` and `chunks` are split by a hash of the element id; the same batch twice
    leaves one row per key, and two writers of one version still collide."""
    url, schema = server[1], _schema(partitioned)
    parts = run_sql(
        url,
        schema,
        "SELECT parentrelid::regclass::text, count(*) FROM pg_partition_tree('states') "
        "WHERE isleaf GROUP BY 1 UNION ALL "
        "SELECT parentrelid::regclass::text, count(*) FROM pg_partition_tree('chunks') "
        "WHERE isleaf GROUP BY 1",
    )
    assert sorted(parts) == [("chunks", RECORD_PARTITIONS), ("states", RECORD_PARTITIONS)]
    ids = [f"doc:{n}" for n in range(40)]
    states = [state(eid, 1, 100) for eid in ids]
    chunks = [row for eid in ids for row in rows(eid, 1, ["alpha"], DIM)]
    batch = WriteBatch(states=states, chunks=chunks, hlc=100)
    await partitioned.commit(batch)
    await partitioned.commit(replace(batch, states=()))  # the chunks again: upserted
    spread = run_sql(
        url,
        schema,
        "SELECT count(DISTINCT tableoid), count(*), count(DISTINCT chunk_id) FROM chunks",
    )
    [(used_parts, count, distinct)] = spread
    assert (count, distinct) == (40, 40)  # no copies
    assert 1 < used_parts <= RECORD_PARTITIONS  # spread by the hash
    with pytest.raises(ConnectorError):
        await partitioned.commit(WriteBatch(states=[state("doc:3", 1, 200)], hlc=200))
    latest = await partitioned.latest_states(["doc:3", "doc:39"])
    assert {s.element_id: s.version for s in latest.values()} == {"doc:3": 1, "doc:39": 1}


async def test_a_schema_made_before_keeps_its_plain_record(server: Server) -> None:
    """A scope-partitioned schema from before the record was partitioned opens as it is."""
    schema = fresh_schema()
    old = PostgresConnector(server[1], dimension=DIM, schema=schema, partition_by="scope")
    await old.connect()
    await old.close()
    run_sql(
        server[1],
        schema,
        "DROP TABLE chunks; CREATE TABLE chunks (chunk_id text PRIMARY KEY, element_id text "
        "NOT NULL, version integer NOT NULL, idx integer NOT NULL, text text NOT NULL, "
        "embedding vector)",
    )
    again = PostgresConnector(server[1], dimension=DIM, schema=schema, partition_by="scope")
    await again.connect()
    try:
        one = state("doc:1", 1, 100)
        await again.commit(WriteBatch(states=[one], chunks=rows("doc:1", 1, ["x"], DIM), hlc=100))
        await again.commit(WriteBatch(chunks=rows("doc:1", 1, ["x"], DIM), hlc=100))
        assert run_sql(server[1], schema, "SELECT count(*) FROM chunks") == [(1,)]
    finally:
        await again.close()
