"""A real ArcadeDB server for the test modules that need one, and connectors on it.

Also the ground the connector's own tests (test_arcadedb.py, test_arcadedb_persistence.py)
share: `server`, a module-scoped fixture starting one real server per test module (a module
imports it and lists it in its `__all__`), and seeded graphs and chunks with hostile ids, the
filters, and the exact reference ranking.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from connectors.arcadedb.connector import ArcadeDBConnector
from connectors.contract.predicates import Op, Predicate
from connectors.contract.records import (
    OPEN,
    ChunkRecord,
    GraphEdge,
    GraphNode,
    SearchFilter,
    Subgraph,
)
from uda.config import ConnectorSpec, Profile
from uda.services.arcadedb import ArcadeDBService
from uda.services.base import ServiceInfo


@contextmanager
def running_arcadedb(folder: Path) -> Iterator[tuple[ArcadeDBService, ServiceInfo]]:
    """A real ArcadeDB server in `folder`, stopped at the end whatever happens."""
    service = ArcadeDBService(folder)
    try:
        info = service.up()
        yield service, info
    finally:
        service.down()


def remote(info: ServiceInfo, database: str | None = None, **kwargs: Any) -> ArcadeDBConnector:
    """A connector over HTTP to the server, on its own database unless one is named."""
    return ArcadeDBConnector(
        url=f"http://{info.host}:{info.port}",
        database=database or f"t_{uuid.uuid4().hex[:12]}",
        user=info.user or "root",
        password=info.password,
        **kwargs,
    )


def server_profile(
    root: Path,
    dsn: str,
    arcadedb: ServiceInfo,
    *,
    database: str,
    exact: bool,
    schema: str | None = None,
) -> Profile:
    """The server profile over running servers: PostgreSQL (a schema of its own if given)
    and ArcadeDB (the named database)."""
    postgres: dict[str, str | bool] = {"dsn": dsn, "exact": exact}
    if schema is not None:
        postgres["schema"] = schema
    return Profile(
        name="server",
        root=root,
        connectors=(
            ConnectorSpec(name="postgres", options=postgres),
            ConnectorSpec(
                name="arcadedb-graph",
                options={
                    "url": f"http://{arcadedb.host}:{arcadedb.port}",
                    "database": database,
                    "user": arcadedb.user or "root",
                    "password": arcadedb.password,
                },
            ),
        ),
    )


# -- the connector tests (test_arcadedb.py, test_arcadedb_persistence.py) ---------------
HOSTILE = [
    "it's",
    'say "hi"',
    "back`tick`",
    "x'}) DETACH DELETE n //",
    'n0"}) MATCH (m) DETACH DELETE m RETURN 1 //',
    "'; DROP TYPE UdaNode UNSAFE; --",
    "a' OR '1'='1",
    "$ids",
    "$rows",
    "$open",
    ":limit",
    "{eid: 'n1'}",
    "line\nbreak",
    "ünïcödé ✓ 🚀",
    "back\\slash",
    "",
]
RELATIONS = ["partOf", "relatedTo", "authoredBy"]
DIM = 48


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ArcadeDBService, ServiceInfo]]:
    """A real ArcadeDB server for the module."""
    with running_arcadedb(tmp_path_factory.mktemp("services")) as running:
        yield running


# -- data -----------------------------------------------------------------------------------
def _graph(seed: int, n_nodes: int, n_edges: int) -> tuple[list[GraphNode], list[GraphEdge]]:
    rng = random.Random(seed)
    ids = [f"n{i}" for i in range(n_nodes)] + HOSTILE
    nodes = [GraphNode(element_id=i, element_type=rng.choice(["Document", "Person"])) for i in ids]
    edges: dict[tuple[str, str, str], GraphEdge] = {}
    for _ in range(n_edges):
        # Some endpoints are not nodes yet: the store must create them without a type.
        source = rng.choice([*ids, "orphan-a", "orphan-b"])
        relation = rng.choice([*RELATIONS, "rel`]->() DELETE e //"])
        valid_from = rng.randrange(1, 100)
        valid_to = rng.choice([OPEN, OPEN, valid_from + rng.randrange(1, 100)])
        edge = GraphEdge(
            source_id=source,
            relation=relation,
            target_id=rng.choice(ids),
            valid_from=valid_from,
            valid_to=valid_to,
        )
        edges[edge.key] = edge
    edges[("n1", "relatedTo", "n1")] = GraphEdge(  # a self-loop
        source_id="n1", relation="relatedTo", target_id="n1", valid_from=1
    )
    return nodes, list(edges.values())


def _same(a: Subgraph, b: Subgraph) -> bool:
    return dict(a.nodes) == dict(b.nodes) and sorted(a.edges, key=str) == sorted(b.edges, key=str)


def _chunks(seed: int, n: int) -> list[ChunkRecord]:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, DIM))
    chunks: list[ChunkRecord] = []
    for i in range(n):
        valid_from = int(rng.integers(1, 100))
        chunks.append(
            ChunkRecord(
                chunk_id=f"c{i}@1#0" if i % 17 else HOSTILE[i % len(HOSTILE)] + f"#{i}",
                element_id=f"e{i // 2}",
                version=1 + i % 3,
                index=i % 2,
                text=f"chunk {i}",
                embedding=vectors[i].tolist(),
                element_type=["Document", "Evidence", "SourcePill"][i % 3],
                name=f"Element {i // 2}",
                sensitivity_rank=int(rng.integers(0, 4)),
                scope=[None, None, "project:a", "project:b", "project:o'brien"][i % 5],
                valid_from=valid_from,
                valid_to=OPEN if i % 4 else valid_from + int(rng.integers(1, 50)),
                filter_values={"year": 2000 + i % 25, "lang": ["en", "de", "fr"][i % 3]},
            )
        )
    return chunks


def _exact(
    chunks: list[ChunkRecord], query: np.ndarray, k: int, search_filter: SearchFilter
) -> list[tuple[str, float]]:
    passing = [c for c in chunks if search_filter.allows_chunk(c)]
    matrix = np.array([c.embedding for c in passing], dtype=np.float64)
    scores = matrix @ query / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
    ranked = sorted(zip(passing, scores, strict=True), key=lambda p: (-p[1], p[0].chunk_id))
    return [(c.chunk_id, float(s)) for c, s in ranked[:k]]


FILTERS = [
    SearchFilter(max_sensitivity_rank=1),
    SearchFilter(max_sensitivity_rank=3, projects=("project:a", "project:o'brien")),
    SearchFilter(max_sensitivity_rank=3, all_projects=True, as_of=40),
    SearchFilter(max_sensitivity_rank=2, all_projects=True, element_types=("Evidence",)),
    SearchFilter(
        max_sensitivity_rank=3,
        all_projects=True,
        predicates=(
            Predicate(field="year", op=Op.GTE, value=2012),
            Predicate(field="lang", op=Op.IN, value=("en", "fr")),
        ),
    ),
]
