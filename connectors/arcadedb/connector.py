"""ArcadeDB: graph and vector store, embedded in process or as a server over HTTP.

Schema (created on connect, idempotently):

- `UdaNode` vertices: `eid` (unique index) and `etype`.
- `UdaEdge` edges, ONE edge type for every relation, the relation in a property: a
  relation allow-list is then a parameter (`e.relation IN $relations`), never a label spliced
  into the query text. Each edge carries its key `ekey` (unique index), `src`, `relation`,
  `tgt`, `vf`, `vt` (validity), so that an expansion reads edges without touching their
  endpoints' records.
- `UdaChunk` vertices (no edges): `chunk_id` (unique index), `element_id` (index), the
  embedding as `ARRAY_OF_FLOATS`, and the metadata `SearchFilter` needs.

`expand` is ONE OpenCypher statement per call: `UNWIND $ids` looks every seed up through the
`eid` index and nested pattern comprehensions walk 1..depth hops both ways. Vector search is
exact: cosine similarity computed by the engine over the chunks that pass the pushed-down
filter (see `vector_search` for why not the LSM vector index). Every id, relation name and
filter value travels as a parameter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from connectors.arcadedb.backends import Backend, EmbeddedBackend, HttpBackend, Statement
from connectors.arcadedb.jvm import DEFAULT_HEAP
from connectors.arcadedb.queries import (
    CHUNK_BATCH,
    CHUNK_STATES,
    DELETE_CHUNK_IDS,
    DELETE_CHUNKS,
    DELETE_EDGES,
    DELETE_NODES,
    EDGE_STATES,
    GRAPH_BATCH,
    NODE_IDS,
    OVERFETCH,
    SCHEMA,
    UPSERT_CHUNKS,
    UPSERT_EDGES,
    UPSERT_NODES,
    batches,
    chunk_record,
    chunk_row,
    collect,
    edge_key,
    expand_query,
    scores_statement,
    search_statement,
)
from connectors.base import Connector, GraphCapable, VectorCapable
from connectors.contract.records import (
    OPEN,
    ChunkHit,
    ChunkRecord,
    GraphEdge,
    GraphNode,
    SearchFilter,
    Subgraph,
)


class ArcadeDBStore(Connector, GraphCapable):
    """Graph and chunk vectors in one ArcadeDB database (the shared implementation).

    The registered classes below choose what it claims: `ArcadeDBConnector` is a graph and a
    vector store, `ArcadeDBGraphConnector` a graph store only, for profiles whose vectors live
    elsewhere (the server profile keeps them in PostgreSQL: storing and scanning every chunk
    twice would buy nothing).

    Give either `path` (embedded, in this process) or `url` (a running server).

    Args:
        path: folder of the embedded database (the database itself is `<path>/database`).
        url: an ArcadeDB server's HTTP address, e.g. `http://127.0.0.1:2480`.
        database: the server's database (created on first use if missing).
        user, password: the server login (HTTP basic authentication).
        heap: maximum JVM heap when the embedded engine starts the JVM (`ARCADEDB_JVM_ARGS`
            with its own `-Xmx` wins).
        timeout: seconds per HTTP request (server mode).
        transport: an httpx transport for the server's requests (proxies, tests).
    """

    name = "arcadedb"

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        url: str | None = None,
        database: str = "uda",
        user: str = "root",
        password: str | None = None,
        heap: str = DEFAULT_HEAP,
        timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if (path is None) == (url is None):
            raise ValueError("give either path (embedded) or url (server)")
        self._backend: Backend
        if path is not None:
            self._backend = EmbeddedBackend(Path(path), heap)
        else:
            self._backend = HttpBackend(
                str(url),
                database,
                user,
                password or "",
                timeout=timeout,
                transport=transport,
            )
        self._schema_ready = False

    @property
    def shared_across_processes(self) -> bool:
        """A server is; the embedded engine lives in this process (its JVM holds the files)."""
        return isinstance(self._backend, HttpBackend)

    # -- lifecycle ------------------------------------------------------------------------
    async def connect(self) -> None:
        """Open the database and create the schema (both idempotent)."""
        if self._backend.is_open and self._schema_ready:
            return
        await self._backend.open()
        await self._backend.ddl(SCHEMA)
        self._schema_ready = True

    async def close(self) -> None:
        """Close the database (embedded: every write is already durable)."""
        self._schema_ready = False
        await self._backend.close()

    async def _write(self, statements: Sequence[Statement]) -> None:
        await self._backend.write(statements)

    # -- graph: writes ----------------------------------------------------------------------
    async def upsert_nodes(self, nodes: Sequence[GraphNode]) -> None:
        """Insert or replace nodes by `element_id` (their type)."""
        rows = [{"id": n.element_id, "type": n.element_type} for n in nodes]
        await self._write(
            [("cypher", UPSERT_NODES, {"rows": part}) for part in batches(rows, GRAPH_BATCH)]
        )

    async def upsert_edges(self, edges: Sequence[GraphEdge]) -> None:
        """Insert or replace edges by (source, relation, target); validity is replaced."""
        rows = [
            {
                "key": edge_key(e.key),
                "src": e.source_id,
                "rel": e.relation,
                "tgt": e.target_id,
                "vf": e.valid_from,
                "vt": e.valid_to,
            }
            for e in edges
        ]
        await self._write(
            [("cypher", UPSERT_EDGES, {"rows": part}) for part in batches(rows, GRAPH_BATCH)]
        )

    async def delete_nodes(self, element_ids: Sequence[str]) -> None:
        """Remove nodes and every edge touching them."""
        ids = list(dict.fromkeys(element_ids))
        await self._write(
            [("sql", DELETE_NODES, {"ids": part}) for part in batches(ids, GRAPH_BATCH)]
        )

    async def delete_edges(self, keys: Sequence[tuple[str, str, str]]) -> None:
        """Remove edges by (source, relation, target); their nodes stay."""
        stored = [edge_key(key) for key in dict.fromkeys(keys)]
        await self._write(
            [("sql", DELETE_EDGES, {"keys": part}) for part in batches(stored, GRAPH_BATCH)]
        )

    # -- graph: reads -----------------------------------------------------------------------
    async def expand(
        self,
        element_ids: Sequence[str],
        depth: int,
        relations: Sequence[str] | None,
        as_of: int | None,
        backward_hops: int | None = None,
    ) -> Subgraph:
        """Every edge within `depth` hops of the seeds, in one query (see `GraphCapable`).

        Seeds missing from the store are left out; an empty allow-list follows no edge.
        """
        if depth < 0:
            raise ValueError(f"depth must be >= 0, not {depth}")
        ids = list(dict.fromkeys(element_ids))
        if not ids:
            return Subgraph(nodes={}, edges=())
        filtered = relations is not None
        params: dict[str, Any] = {"ids": ids}
        if depth:
            if as_of is None:
                params["open"] = OPEN
            else:
                params["as_of"] = as_of
            if filtered:
                params["relations"] = list(relations or ())
        rows = await self._backend.query(
            "cypher", expand_query(depth, as_of, filtered, backward_hops), params
        )
        nodes: dict[str, str] = {}
        edges: dict[tuple[str, str, str], GraphEdge] = {}
        for row in rows:
            nodes[str(row["sid"])] = str(row.get("st") or "")
            collect(row.get("hops") or [], nodes, edges)
        return Subgraph(nodes=nodes, edges=tuple(edges.values()))

    async def edge_states(self) -> dict[tuple[str, str, str], tuple[int, int]]:
        """Every edge key with its `(valid_from, valid_to)`."""
        rows = await self._backend.query("sql", EDGE_STATES, {})
        return {
            (str(r["src"]), str(r["relation"]), str(r["tgt"])): (int(r["vf"]), int(r["vt"]))
            for r in rows
        }

    async def node_ids(self) -> set[str]:
        """Every node id."""
        rows = await self._backend.query("sql", NODE_IDS, {})
        return {str(r["eid"]) for r in rows}

    # -- vectors ----------------------------------------------------------------------------
    async def upsert_chunks(self, chunks: Sequence[ChunkRecord]) -> None:
        """Insert or replace chunks (embedding and metadata) by `chunk_id`."""
        rows = [chunk_row(c) for c in chunks]
        await self._write(
            [("cypher", UPSERT_CHUNKS, {"rows": part}) for part in batches(rows, CHUNK_BATCH)]
        )

    async def delete_chunks(self, element_ids: Sequence[str]) -> None:
        """Remove every chunk of these elements."""
        ids = list(dict.fromkeys(element_ids))
        await self._write(
            [("sql", DELETE_CHUNKS, {"ids": part}) for part in batches(ids, GRAPH_BATCH)]
        )

    async def delete_chunk_ids(self, chunk_ids: Sequence[str]) -> None:
        """Remove chunks by id."""
        ids = list(dict.fromkeys(chunk_ids))
        await self._write(
            [("sql", DELETE_CHUNK_IDS, {"ids": part}) for part in batches(ids, GRAPH_BATCH)]
        )

    async def chunk_states(self) -> dict[str, int]:
        """Every stored chunk id with its `valid_to`."""
        rows = await self._backend.query("sql", CHUNK_STATES, {})
        return {str(r["chunk_id"]): int(r["valid_to"]) for r in rows}

    async def vector_search(
        self, embedding: Sequence[float], k: int, search_filter: SearchFilter
    ) -> list[ChunkHit]:
        """The `k` nearest chunks passing the filter, by exact cosine similarity.

        Exact, not the LSM vector index: the index is approximate (on 20k random
        384-dimensional vectors its top 10 shared 2 ids with the exact top 10), it knows
        nothing of the filter (so it would need over-fetching with no bound on recall), and
        it needs the dimension before the first chunk arrives. The engine scans the chunks
        that pass the pushed-down clearance, validity and type filter (about 0.15 s per
        20k chunks of 384 dimensions) and returns them ranked. Predicates and the filter
        tree are checked here with the reference semantics (`SearchFilter.allows_chunk`);
        when too few pass, the window grows until `k` pass or every candidate has been seen.
        """
        if k <= 0:
            return []
        command, params = search_statement(search_filter)
        params["embedding"] = [float(x) for x in embedding]
        checked_here = search_filter.predicates or search_filter.tree is not None
        limit = k * OVERFETCH if checked_here else k
        while True:
            rows = await self._backend.query("sql", command, {**params, "limit": limit})
            hits = _passing_hits(rows, search_filter)
            if len(hits) >= k or len(rows) < limit:
                return hits[:k]
            limit *= OVERFETCH

    async def vector_scores(
        self, embedding: Sequence[float], element_ids: Sequence[str], search_filter: SearchFilter
    ) -> list[ChunkHit]:
        """The passing chunks of these elements, by exact cosine similarity, best first.

        One statement per `GRAPH_BATCH` ids (the element index answers the `IN`); predicates
        are checked here, as in `vector_search`.
        """
        ids = list(dict.fromkeys(element_ids))
        if not ids:
            return []
        command, params = scores_statement(search_filter)
        params["embedding"] = [float(x) for x in embedding]
        hits: list[ChunkHit] = []
        for part in batches(ids, GRAPH_BATCH):
            rows = await self._backend.query("sql", command, {**params, "ids": list(part)})
            hits += _passing_hits(rows, search_filter)
        return sorted(hits, key=lambda h: (-h.score, h.chunk_id))

    # -- extras -----------------------------------------------------------------------------
    async def stats(self) -> dict[str, int]:
        """Node, current-edge and chunk counts."""
        nodes = await self._backend.query("sql", "SELECT count(*) AS n FROM UdaNode", {})
        edges = await self._backend.query(
            "sql", "SELECT count(*) AS n FROM UdaEdge WHERE vt = :open", {"open": OPEN}
        )
        chunks = await self._backend.query("sql", "SELECT count(*) AS n FROM UdaChunk", {})
        return {
            "nodes": int(nodes[0]["n"]),
            "edges": int(edges[0]["n"]),
            "chunks": int(chunks[0]["n"]),
        }


def _passing_hits(rows: Sequence[Mapping[str, Any]], search_filter: SearchFilter) -> list[ChunkHit]:
    """Scored chunk rows that pass the filter (predicates and tree checked here, not pushed)."""
    return [
        ChunkHit(
            chunk_id=record.chunk_id,
            element_id=record.element_id,
            version=record.version,
            score=float(row["score"]),
            text=record.text,
        )
        for row in rows
        if search_filter.allows_chunk(record := chunk_record(row))
    ]


class ArcadeDBConnector(ArcadeDBStore, VectorCapable):
    """ArcadeDB as graph and vector store (exact cosine search over the filtered chunks)."""

    name = "arcadedb"


class ArcadeDBGraphConnector(ArcadeDBStore):
    """ArcadeDB as a graph store only."""

    name = "arcadedb-graph"
