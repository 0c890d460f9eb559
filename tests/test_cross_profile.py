"""The same corpus and requests on the embedded and the server profile give the same answers.

Embedded: Chroma, networkx, SQLite. Server: PostgreSQL+pgvector (exact search) and ArcadeDB
(graph only) on real servers. For every leg alone and all legs fused, ids, order, fused
scores, versions and context nodes must agree for every caller; and each caller must see
exactly the same set of elements. Both lexical legs index the terms of one analyzer
(connectors/analyzer.py, docs/adr/0013-one-lexical-analyzer.md), so BM25 agrees too.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import uda
from ontology import Decision, Document, Element, Person, Relation, Repository
from uda.config import embedded_profile
from uda.embedding import Embedder
from uda.services.arcadedb import ArcadeDBService
from uda.services.postgres import PostgresService, dsn

TOPICS = [
    "payment retries",
    "database backups",
    "deploy schedule",
    "access reviews",
    "incident paging",
    "schema migrations",
    "cache invalidation",
    "vector search",
]
LEVELS = ["public", "internal", "confidential", "restricted"]
SCOPES = [None, "project:core", "project:ml"]
CALLERS = [
    ["public"],
    ["internal"],
    ["confidential", "project:core"],
    ["restricted", "project:*"],
    ["internal", "project:ml"],
]
QUERIES = [
    "how are failed payments retried?",
    "when do we deploy?",
    "who reviews access to production?",
    "how do we migrate the schema safely?",
]


def corpus() -> tuple[list[Element], list[Relation]]:
    rng = random.Random(7)
    stamp = "2025-06-01T00:00:00Z"
    repos = [
        Repository(element_id=f"repo:{n}", name=n, sensitivity="public", timestamp=stamp)
        for n in ("payments", "platform")
    ]
    people = [
        Person(
            element_id=f"person:{n}",
            name=n.title(),
            sensitivity=rng.choice(LEVELS),
            timestamp=stamp,
        )
        for n in ("ada", "grace", "linus")
    ]
    decisions = [
        Decision(
            element_id=f"adr:{i}",
            name=f"Decision on {t}",
            status="accepted",
            text=f"We decided how {t} work: the rule for {t} is written down here.",
            sensitivity=rng.choice(LEVELS),
            scope=rng.choice(SCOPES),
            timestamp=stamp,
        )
        for i, t in enumerate(TOPICS[:4])
    ]
    docs = [
        Document(
            element_id=f"doc:{i}",
            name=f"Notes {i} on {t}",
            text=f"Working notes about {t}. Step {i}: check {TOPICS[(i + 3) % 8]} too.",
            sensitivity=rng.choice(LEVELS),
            scope=rng.choice(SCOPES),
            timestamp=stamp,
        )
        for i, t in enumerate(TOPICS * 3)
    ]
    relations = [
        Relation(source_id=d.element_id, relation="partOf", target_id=rng.choice(repos).element_id)
        for d in docs
    ]
    relations += [
        Relation(
            source_id=d.element_id,
            relation="governedBy",
            target_id=rng.choice(decisions).element_id,
        )
        for d in docs[::2]
    ]
    relations += [
        Relation(
            source_id=e.element_id, relation="authoredBy", target_id=rng.choice(people).element_id
        )
        for e in [*docs, *decisions]
    ]
    return [*repos, *people, *decisions, *docs], relations


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("servers")
    postgres, arcadedb = PostgresService(root), ArcadeDBService(root)
    try:
        pg, arcade = postgres.up(), arcadedb.up()
        yield {"dsn": dsn(pg), "arcadedb": arcade}
    finally:
        arcadedb.down()
        postgres.destroy()


LEG_MIXES = [
    {"semantic": 1.0, "lexical": 0.0, "centrality": 0.0},
    {"semantic": 0.0, "lexical": 1.0, "centrality": 0.0},
    {"semantic": 1.0, "lexical": 0.0, "centrality": 0.2},
    {"semantic": 1.0, "lexical": 1.0, "centrality": 0.2},
]


def _answers(client: uda.Client, **options: Any) -> list[list[tuple[Any, ...]]]:
    answers = []
    for query in QUERIES:
        for caller in CALLERS:
            res = client.search(query, limit=10, clearance_scope=caller, expand_depth=2, **options)
            answers.append(
                [
                    (
                        r.element_id,
                        r.score,
                        r.properties.get("version"),
                        sorted(
                            (n["element_id"], n["relation"], n["direction"], n["depth"])
                            for n in r.context_nodes
                        ),
                    )
                    for r in res.results
                ]
            )
    return answers


def test_embedded_and_server_profiles_agree(
    servers: dict[str, Any], tmp_path: Path, embedder: Embedder
) -> None:
    from arcadedb_fixtures import server_profile

    arcade = servers["arcadedb"]
    server = server_profile(
        tmp_path / "server", servers["dsn"], arcade, database=arcade.database or "uda", exact=True
    )
    elements, relations = corpus()
    with (
        uda.Client(embedded_profile(tmp_path / "embedded"), embedder=embedder) as embedded,
        uda.Client(server, embedder=embedder) as remote,
    ):
        for client in (embedded, remote):
            client.ingest(elements, relations)
        compared = 0
        for weights in LEG_MIXES:
            options = {"weights": weights, "decay": False}
            local, far = _answers(embedded, **options), _answers(remote, **options)
            compared += sum(map(len, local))
            for mine, theirs in zip(local, far, strict=True):
                assert [m[0] for m in mine] == [t[0] for t in theirs], weights  # ids, order
                for m, t in zip(mine, theirs, strict=True):
                    # Fused scores come from ranks (and, for centrality, degrees); leg scores
                    # agree up to float summation order.
                    assert m[1] == pytest.approx(t[1], rel=1e-9), weights
                    assert m[2:] == t[2:], weights  # versions and context nodes
        assert compared > 4 * 40  # the comparison is not vacuous
        # Decay on: the clock moves between the two searches, by far less than the tolerance.
        local, far = _answers(embedded), _answers(remote)
        for mine, theirs in zip(local, far, strict=True):
            assert [(m[0], *m[2:]) for m in mine] == [(t[0], *t[2:]) for t in theirs]
            assert [m[1] for m in mine] == pytest.approx([t[1] for t in theirs], rel=1e-6)
        # Every leg on: each caller sees exactly the same elements in both profiles.
        for caller in CALLERS:
            seen = [
                {
                    r.element_id
                    for r in c.search(
                        "notes decisions rules",
                        limit=100,
                        clearance_scope=caller,
                        pool_size=500,
                        decay=False,
                    ).results
                }
                for c in (embedded, remote)
            ]
            assert seen[0] == seen[1], caller
