"""The fixed statements of the ArcadeDB connector, and the pure functions around them.

Only fixed text is assembled here: every id, relation name, time and filter value is a
named parameter of the statement it belongs to.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

from connectors.arcadedb.backends import NAME
from connectors.contract.errors import ConnectorError
from connectors.contract.records import OPEN, ChunkRecord, GraphEdge, SearchFilter, walks_back

T = TypeVar("T")

SCHEMA = (
    "CREATE VERTEX TYPE UdaNode IF NOT EXISTS",
    "CREATE PROPERTY UdaNode.eid IF NOT EXISTS STRING",
    "CREATE PROPERTY UdaNode.etype IF NOT EXISTS STRING",
    "CREATE INDEX IF NOT EXISTS ON UdaNode (eid) UNIQUE",
    "CREATE EDGE TYPE UdaEdge IF NOT EXISTS",
    "CREATE PROPERTY UdaEdge.ekey IF NOT EXISTS STRING",
    "CREATE PROPERTY UdaEdge.src IF NOT EXISTS STRING",
    "CREATE PROPERTY UdaEdge.relation IF NOT EXISTS STRING",
    "CREATE PROPERTY UdaEdge.tgt IF NOT EXISTS STRING",
    "CREATE PROPERTY UdaEdge.vf IF NOT EXISTS LONG",
    "CREATE PROPERTY UdaEdge.vt IF NOT EXISTS LONG",
    "CREATE INDEX IF NOT EXISTS ON UdaEdge (ekey) UNIQUE",
    "CREATE VERTEX TYPE UdaChunk IF NOT EXISTS",
    "CREATE PROPERTY UdaChunk.chunk_id IF NOT EXISTS STRING",
    "CREATE PROPERTY UdaChunk.element_id IF NOT EXISTS STRING",
    "CREATE PROPERTY UdaChunk.version IF NOT EXISTS LONG",
    "CREATE PROPERTY UdaChunk.sens IF NOT EXISTS INTEGER",
    "CREATE PROPERTY UdaChunk.valid_from IF NOT EXISTS LONG",
    "CREATE PROPERTY UdaChunk.valid_to IF NOT EXISTS LONG",
    "CREATE PROPERTY UdaChunk.embedding IF NOT EXISTS ARRAY_OF_FLOATS",
    "CREATE INDEX IF NOT EXISTS ON UdaChunk (chunk_id) UNIQUE",
    "CREATE INDEX IF NOT EXISTS ON UdaChunk (element_id) NOTUNIQUE",
)

UPSERT_NODES = "UNWIND $rows AS r MERGE (n:UdaNode {eid: r.id}) SET n.etype = r.type"
# Endpoints missing from the store are created without a type, as networkx does.
UPSERT_EDGES = """UNWIND $rows AS r
MERGE (a:UdaNode {eid: r.src})
MERGE (b:UdaNode {eid: r.tgt})
MERGE (a)-[e:UdaEdge {ekey: r.key}]->(b)
SET e.src = r.src, e.relation = r.rel, e.tgt = r.tgt, e.vf = r.vf, e.vt = r.vt"""
# Deletes are SQL: a Cypher inline property map (`MATCH (n {eid: id})`) resolves a value
# that starts with `$` as a parameter name (ArcadeDB 26.10.2), so lookups by id use WHERE.
DELETE_NODES = "DELETE FROM UdaNode WHERE eid IN :ids"
DELETE_EDGES = "DELETE FROM UdaEdge WHERE ekey IN :keys"
EDGE_STATES = "SELECT src, relation, tgt, vf, vt FROM UdaEdge"
NODE_IDS = "SELECT eid FROM UdaNode"

UPSERT_CHUNKS = """UNWIND $rows AS r
MERGE (c:UdaChunk {chunk_id: r.chunk_id})
SET c.element_id = r.element_id, c.version = r.version, c.idx = r.idx, c.text = r.text,
    c.etype = r.etype, c.name = r.name, c.sens = r.sens, c.scope = r.scope,
    c.valid_from = r.valid_from, c.valid_to = r.valid_to, c.fv = r.fv,
    c.embedding = r.embedding"""
DELETE_CHUNKS = "DELETE FROM UdaChunk WHERE element_id IN :ids"
DELETE_CHUNK_IDS = "DELETE FROM UdaChunk WHERE chunk_id IN :ids"
CHUNK_STATES = "SELECT chunk_id, valid_to FROM UdaChunk"
SEARCH_COLUMNS = (
    "chunk_id, element_id, version, text, etype, sens, scope, valid_from, valid_to, fv, "
    "vectorCosineSimilarity(embedding, :embedding) AS score"
)

GRAPH_BATCH = 2000
CHUNK_BATCH = 500  # about 4 MB of JSON per request with 384-dimensional embeddings
OVERFETCH = 4  # growth of the candidate window when predicates are checked here


def batches(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def edge_key(key: tuple[str, str, str]) -> str:
    """The stored identity of an edge: its (source, relation, target), unambiguously."""
    return json.dumps(list(key), ensure_ascii=False)


def _edge_condition(var: str, as_of: int | None, filtered: bool) -> str:
    valid = f"{var}.vt = $open" if as_of is None else f"{var}.vf <= $as_of AND {var}.vt > $as_of"
    return valid + (f" AND {var}.relation IN $relations" if filtered else "")


def _hops(
    level: int, depth: int, node: str, as_of: int | None, filtered: bool, backward: int | None
) -> str:
    """A pattern comprehension listing the edges at `node`, each with the hops beyond it."""
    edge, other = f"e{level}", f"m{level}"
    items = [f"{edge}.{p}" for p in ("src", "relation", "tgt", "vf", "vt")]
    items += [f"{other}.eid", f"{other}.etype"]
    if level + 1 < depth:
        items.append(_hops(level + 1, depth, other, as_of, filtered, backward))
    arrow = "-" if walks_back(level, backward) else "->"
    return (
        f"[({node})-[{edge}:UdaEdge]{arrow}({other}) WHERE "
        f"{_edge_condition(edge, as_of, filtered)} | [{', '.join(items)}]]"
    )


def expand_query(
    depth: int, as_of: int | None, filtered: bool, backward_hops: int | None = None
) -> str:
    """The single statement that expands a whole batch of seeds `depth` hops.

    Hops walk edges either way while `connectors.contract.records.walks_back` says so, and along
    their direction after that. Only fixed text is assembled here; ids, relations and times
    are parameters.
    """
    # `WHERE s.eid = sid`, not `{eid: sid}`: see DELETE_NODES. Both use the unique index.
    head = (
        "UNWIND $ids AS sid MATCH (s:UdaNode) WHERE s.eid = sid RETURN s.eid AS sid, s.etype AS st"
    )
    if depth == 0:
        return head
    return f"{head}, {_hops(0, depth, 's', as_of, filtered, backward_hops)} AS hops"


def collect(
    hops: Sequence[Any], nodes: dict[str, str], edges: dict[tuple[str, str, str], GraphEdge]
) -> None:
    """Gather the edges and node types of `expand`'s nested hop lists."""
    for hop in hops:
        src, relation, tgt, valid_from, valid_to, other, other_type = hop[:7]
        edge = GraphEdge(
            source_id=str(src),
            relation=str(relation),
            target_id=str(tgt),
            valid_from=int(valid_from),
            valid_to=int(valid_to),
        )
        edges[edge.key] = edge
        nodes[str(other)] = str(other_type or "")
        if len(hop) > 7:
            collect(hop[7], nodes, edges)


def chunk_row(chunk: ChunkRecord) -> dict[str, Any]:
    """The stored form of a chunk (`UPSERT_CHUNKS` parameters)."""
    embedding = chunk.embedding
    if embedding is None:
        raise ConnectorError(NAME, f"chunk without embedding: {chunk.chunk_id}")
    return {
        "chunk_id": chunk.chunk_id,
        "element_id": chunk.element_id,
        "version": chunk.version,
        "idx": chunk.index,
        "text": chunk.text,
        "etype": chunk.element_type,
        "name": chunk.name,
        "sens": chunk.sensitivity_rank,
        "scope": chunk.scope,
        "valid_from": chunk.valid_from,
        "valid_to": chunk.valid_to,
        # Property values must be scalars or arrays: the filter values travel as JSON text
        # and predicates are evaluated here, with the reference semantics.
        "fv": json.dumps(dict(chunk.filter_values), sort_keys=True),
        "embedding": [float(x) for x in embedding],
    }


def chunk_record(row: Mapping[str, Any]) -> ChunkRecord:
    """A search row as a chunk, enough for `SearchFilter.allows_chunk` and a hit."""
    return ChunkRecord(
        chunk_id=str(row["chunk_id"]),
        element_id=str(row["element_id"]),
        version=int(row["version"]),
        index=0,
        text=str(row.get("text") or ""),
        embedding=None,
        element_type=str(row.get("etype") or ""),
        name="",
        sensitivity_rank=int(row["sens"]),
        scope=row.get("scope") or None,
        valid_from=int(row["valid_from"]),
        valid_to=int(row["valid_to"]),
        filter_values=json.loads(row.get("fv") or "{}"),
    )


def search_statement(search_filter: SearchFilter) -> tuple[str, dict[str, Any]]:
    """The exact-search SQL for a filter (without the query vector and limit), and its params.

    Clearance, validity and types are pushed down; predicates are checked on the rows.
    """
    clauses, params = _pushdown(search_filter)
    command = (  # fixed fragments only; every value is a parameter
        f"SELECT {SEARCH_COLUMNS} FROM UdaChunk WHERE {' AND '.join(clauses)}"  # noqa: S608
        " ORDER BY score DESC, chunk_id ASC LIMIT :limit"
    )
    return command, params


def scores_statement(search_filter: SearchFilter) -> tuple[str, dict[str, Any]]:
    """The SQL scoring the chunks of `:ids` that pass the pushdown (without the vector)."""
    clauses, params = _pushdown(search_filter)
    command = (  # fixed fragments only; every value is a parameter
        f"SELECT {SEARCH_COLUMNS} FROM UdaChunk WHERE element_id IN :ids AND "  # noqa: S608
        f"{' AND '.join(clauses)} ORDER BY score DESC, chunk_id ASC"
    )
    return command, params


def _pushdown(search_filter: SearchFilter) -> tuple[list[str], dict[str, Any]]:
    """Clauses and params for clearance, validity and types."""
    clauses = ["sens <= :max_sens"]
    params: dict[str, Any] = {"max_sens": search_filter.max_sensitivity_rank}
    if not search_filter.all_projects:
        if search_filter.projects:
            clauses.append("(scope IS NULL OR scope IN :projects)")
            params["projects"] = list(search_filter.projects)
        else:
            clauses.append("scope IS NULL")
    if search_filter.as_of is None:
        clauses.append("valid_to = :open")
        params["open"] = OPEN
    else:
        clauses.append("valid_from <= :as_of AND valid_to > :as_of")
        params["as_of"] = search_filter.as_of
    if search_filter.element_types is not None:
        clauses.append("etype IN :types")
        params["types"] = list(search_filter.element_types)
    return clauses, params
