"""Hand-made data for the conformance suite, and the reference answers it is checked against.

No embedding model: vectors are seeded pseudo-random or built by hand, in the connector's
dimension. The reference answers (exact cosine ranking, `SearchFilter.allows_chunk`,
breadth-first expansion) are computed here in plain Python.
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from connectors.contract.predicates import Op, Predicate, Scalar
from connectors.contract.records import (
    OPEN,
    ChunkHit,
    ChunkRecord,
    GraphEdge,
    GraphNode,
    SearchFilter,
)
from connectors.contract.system_of_record import ChunkRow, StoredState, chunk_id

# Ids that break string-built queries, naive escaping, or chunk-id parsing. Element ids may
# hold `@` and `#` (state_key splits at the last `@`).
HOSTILE_IDS: tuple[str, ...] = (
    "it's",
    'say "hi"',
    "'; DROP TABLE x; --",
    '"); DROP TABLE chunks; --',
    "naïve 東京 🚀",
    "a@b#c",
    "doc@1#0",
    "back\\slash",
    "100% _match_*",
    "`tick` $dollar {brace} [bracket]",
    '{"$in": ["x"]}',
    "new\nline\ttab",
    "  spaced  ",
)


# -- vectors ------------------------------------------------------------------------------
def random_vectors(n: int, dimension: int, *, seed: int) -> list[list[float]]:
    """`n` seeded Gaussian vectors, with norms between 0.5 and 3 (cosine must ignore norms)."""
    rng = random.Random(seed)  # noqa: S311 - reproducible test data, not secrets
    out: list[list[float]] = []
    for _ in range(n):
        vector = [rng.gauss(0.0, 1.0) for _ in range(dimension)]
        scale = rng.uniform(0.5, 3.0) / math.sqrt(sum(x * x for x in vector))
        out.append([x * scale for x in vector])
    return out


def near(vector: Sequence[float], *, seed: int, noise: float) -> list[float]:
    """A vector close to `vector` (cosine about 1 - noise**2 / 2)."""
    rng = random.Random(seed)  # noqa: S311 - reproducible test data, not secrets
    norm = math.sqrt(sum(x * x for x in vector))
    sigma = noise * norm / math.sqrt(len(vector))
    return [x + rng.gauss(0.0, sigma) for x in vector]


def axis(dimension: int, i: int, scale: float = 1.0) -> list[float]:
    """The unit vector along axis `i`, scaled."""
    vector = [0.0] * dimension
    vector[i] = scale
    return vector


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def exact_top(
    query: Sequence[float],
    chunks: Iterable[ChunkRecord],
    k: int,
    search_filter: SearchFilter | None = None,
) -> list[str]:
    """The chunk ids of the exact top-`k` allowed chunks by cosine similarity."""
    allowed = [c for c in chunks if search_filter is None or search_filter.allows_chunk(c)]
    ranked = sorted(allowed, key=lambda c: (-cosine(query, _embedding(c)), c.chunk_id))
    return [c.chunk_id for c in ranked[:k]]


def _embedding(chunk: ChunkRecord) -> Sequence[float]:
    if chunk.embedding is None:
        raise ValueError(f"{chunk.chunk_id} has no embedding")
    return chunk.embedding


# -- records ------------------------------------------------------------------------------
def chunk(
    element_id: str,
    *,
    version: int = 1,
    index: int = 0,
    text: str = "",
    embedding: Sequence[float] | None = None,
    element_type: str = "Document",
    name: str = "Note",
    sensitivity_rank: int = 0,
    scope: str | None = None,
    valid_from: int = 100,
    valid_to: int = OPEN,
    filter_values: Mapping[str, Scalar] | None = None,
) -> ChunkRecord:
    """A chunk record with the project's chunk-id format (`element@version#index`)."""
    return ChunkRecord(
        chunk_id=chunk_id(element_id, version, index),
        element_id=element_id,
        version=version,
        index=index,
        text=text,
        embedding=embedding,
        element_type=element_type,
        name=name,
        sensitivity_rank=sensitivity_rank,
        scope=scope,
        valid_from=valid_from,
        valid_to=valid_to,
        filter_values=dict(filter_values or {}),
    )


def state(
    element_id: str,
    version: int,
    hlc: int,
    *,
    element_type: str = "Document",
    sensitivity_rank: int = 0,
    scope: str | None = None,
    tombstone: bool = False,
    valid_to: int = OPEN,
    payload: Mapping[str, Any] | None = None,
    filter_values: Mapping[str, Scalar] | None = None,
) -> StoredState:
    """A stored state as the write path builds it."""
    return StoredState(
        element_id=element_id,
        version=version,
        hlc=hlc,
        element_type=element_type,
        name=f"name of {element_id}",
        sensitivity_rank=sensitivity_rank,
        scope=scope,
        timestamp_ms=hlc >> 16,
        tombstone=tombstone,
        content_hash="" if tombstone else f"hash-{element_id}-{version}",
        payload=dict(payload or {"element_id": element_id, "version_note": version}),
        filter_values=dict(filter_values or {"element_type": element_type}),
        valid_to=valid_to,
        latest_sensitivity_rank=sensitivity_rank,
        latest_scope=scope,
    )


def rows(element_id: str, version: int, texts: Sequence[str], dimension: int) -> list[ChunkRow]:
    """Chunk rows of one state, with seeded embeddings."""
    vectors = random_vectors(
        len(texts), dimension, seed=zlib.crc32(f"{element_id}@{version}".encode())
    )
    return [
        ChunkRow(element_id=element_id, version=version, index=i, text=t, embedding=v)
        for i, (t, v) in enumerate(zip(texts, vectors, strict=True))
    ]


def edge(
    source: str, relation: str, target: str, valid_from: int = 100, valid_to: int = OPEN
) -> GraphEdge:
    """A graph edge."""
    return GraphEdge(
        source_id=source,
        relation=relation,
        target_id=target,
        valid_from=valid_from,
        valid_to=valid_to,
    )


def hit_view(hits: Sequence[ChunkHit]) -> list[tuple[str, str, int, str | None]]:
    """What a hit carries besides its score: chunk id, element id, version, text (or None)."""
    return [(h.chunk_id, h.element_id, h.version, h.text) for h in hits]


# -- the filter corpus --------------------------------------------------------------------
# Validity windows: current, superseded at 200, its successor, closed, and a later state.
_WINDOWS = ((1, 100, OPEN), (1, 100, 200), (2, 200, OPEN), (1, 150, 250), (3, 300, OPEN))
_TYPES = ("Document", "Evidence", "Decision")
_SCOPES = (None, "project:a", "project:b")
_STATUS = ("accepted", "draft", "superseded", None)
WORDS = ("harbour", "glacier", "orchard", "lantern", "meadow", "copper", "falcon", "quartz")


def filter_corpus(dimension: int, n: int = 90) -> list[ChunkRecord]:
    """Chunks spread over every clearance, scope, validity, type and filter value.

    Each chunk's text is `common <word>`, so a text search for "common" finds every chunk
    that the filter allows.
    """
    vectors = random_vectors(n, dimension, seed=7)
    out: list[ChunkRecord] = []
    for i in range(n):
        version, valid_from, valid_to = _WINDOWS[i % len(_WINDOWS)]
        values: dict[str, Scalar] = {"element_type": _TYPES[(i // 5) % 3], "rank": i}
        status = _STATUS[(i // 2) % 4]
        if status is not None:
            values["status"] = status
        if i % 7 != 3:
            values["year"] = 2019 + i % 5
        values["score"] = round((i * 37 % 100) / 100, 2)
        values["draft"] = i % 3 == 0
        out.append(
            chunk(
                f"el-{i}",
                version=version,
                text=f"common {WORDS[i % len(WORDS)]}",
                embedding=vectors[i],
                element_type=_TYPES[(i // 5) % 3],
                sensitivity_rank=(i // 3) % 4,
                scope=_SCOPES[(i // 4) % 3],
                valid_from=valid_from,
                valid_to=valid_to,
                filter_values=values,
            )
        )
    return out


def _p(field_name: str, op: Op, value: Scalar | tuple[Scalar, ...]) -> Predicate:
    return Predicate(field=field_name, op=op, value=value)


def _any(
    *,
    projects: tuple[str, ...] = (),
    as_of: int | None = None,
    element_types: tuple[str, ...] | None = None,
    predicates: tuple[Predicate, ...] = (),
) -> SearchFilter:
    """Full clearance over every project, narrowed by the other fields only."""
    return SearchFilter(
        max_sensitivity_rank=3,
        all_projects=True,
        projects=projects,
        as_of=as_of,
        element_types=element_types,
        predicates=predicates,
    )


# (label, filter): clearance, scope, validity, types and positive predicates, alone and mixed.
FILTERS: tuple[tuple[str, SearchFilter], ...] = (
    ("public", SearchFilter(max_sensitivity_rank=0)),
    ("internal, no project", SearchFilter(max_sensitivity_rank=1)),
    ("internal + project:a", SearchFilter(max_sensitivity_rank=1, projects=("project:a",))),
    (
        "confidential + a, b",
        SearchFilter(max_sensitivity_rank=2, projects=("project:a", "project:b")),
    ),
    ("restricted + every project", _any()),
    ("as_of 150", _any(as_of=150)),
    ("as_of 200 (a boundary)", _any(as_of=200)),
    ("as_of 99 (before all)", _any(as_of=99)),
    ("type Evidence", _any(element_types=("Evidence",))),
    ("types Document, Decision", _any(element_types=("Document", "Decision"))),
    ("status = accepted", _any(predicates=(_p("status", Op.EQ, "accepted"),))),
    (
        "status in accepted, draft",
        _any(predicates=(_p("status", Op.IN, ("accepted", "draft")),)),
    ),
    ("year > 2020", _any(predicates=(_p("year", Op.GT, 2020),))),
    (
        "2020 <= year < 2022",
        _any(predicates=(_p("year", Op.GTE, 2020), _p("year", Op.LT, 2022))),
    ),
    ("year <= 2019", _any(predicates=(_p("year", Op.LTE, 2019),))),
    ("score <= 0.5 (float)", _any(predicates=(_p("score", Op.LTE, 0.5),))),
    ("draft = true (bool)", _any(predicates=(_p("draft", Op.EQ, True),))),
    ("draft = false (bool)", _any(predicates=(_p("draft", Op.EQ, False),))),
    ("year = 2021 (int)", _any(predicates=(_p("year", Op.EQ, 2021),))),
    ("year > 2020.5 (float bound)", _any(predicates=(_p("year", Op.GT, 2020.5),))),
    ("absent field", _any(predicates=(_p("nowhere", Op.EQ, "x"),))),
    (
        "everything at once",
        SearchFilter(
            max_sensitivity_rank=2,
            projects=("project:a",),
            as_of=250,
            element_types=("Document", "Evidence"),
            predicates=(_p("status", Op.IN, ("accepted", "draft", "superseded")),),
        ),
    ),
)

# Legal filters that stores often get wrong, each group in its own test so that a gap is
# named precisely.
NO_TYPE_FILTERS: tuple[tuple[str, SearchFilter], ...] = (
    ("no element type at all", _any(element_types=())),
    ("no element type, public", SearchFilter(max_sensitivity_rank=0, element_types=())),
)
STRING_RANGE_FILTERS: tuple[tuple[str, SearchFilter], ...] = (
    ("status > 'b'", _any(predicates=(_p("status", Op.GT, "b"),))),
    ("status < 'b'", _any(predicates=(_p("status", Op.LT, "b"),))),
    (
        "'accepted' <= status <= 'draft'",
        _any(predicates=(_p("status", Op.GTE, "accepted"), _p("status", Op.LTE, "draft"))),
    ),
)
EDGE_FILTERS: tuple[tuple[str, SearchFilter], ...] = (
    ("projects listed and all", _any(projects=("project:a",))),
    ("year in 2019, 2023", _any(predicates=(_p("year", Op.IN, (2019, 2023)),))),
    ("score in 0.25, 0.5 (floats)", _any(predicates=(_p("score", Op.IN, (0.25, 0.5)),))),
    ("draft in true (bool list)", _any(predicates=(_p("draft", Op.IN, (True,)),))),
    ("rank < 0 (no chunk)", _any(predicates=(_p("rank", Op.LT, 0),))),
)


# -- the graph ----------------------------------------------------------------------------
NODES: dict[str, str] = {
    "d1": "Document",
    "d2": "Document",
    "d3": "Document",
    "d4": "Document",
    "repo": "Repository",
    "ada": "Person",
    "dec": "Decision",
    "dec0": "Decision",
    "lone": "Person",
}
EDGES: tuple[GraphEdge, ...] = (
    edge("d1", "partOf", "repo"),
    edge("d2", "partOf", "repo"),
    edge("d1", "relatedTo", "repo"),  # a second relation between the same two nodes
    edge("d1", "authoredBy", "ada"),
    edge("d3", "authoredBy", "ada"),
    edge("d1", "governedBy", "dec"),
    edge("dec", "supersedes", "dec0"),
    edge("d2", "relatedTo", "d3", 100, 300),  # closed at 300
    edge("d4", "relatedTo", "d1", 500),  # added at 500
)


def graph_nodes(types: Mapping[str, str] = NODES) -> list[GraphNode]:
    """Graph nodes from an id -> type mapping."""
    return [GraphNode(element_id=i, element_type=t) for i, t in types.items()]


def reference_expand(
    edges: Iterable[GraphEdge],
    seeds: Iterable[str],
    depth: int,
    relations: Sequence[str] | None,
    as_of: int | None,
    backward_hops: int | None = None,
) -> set[tuple[str, str, str]]:
    """Every allowed, valid edge followed from a node fewer than `depth` hops from a seed.

    Hops follow only allowed relations valid at `as_of`. A node at distance d follows its
    outgoing edges, and its incoming ones too while `backward_hops` is None or d is below it.
    """
    usable = [
        e for e in edges if e.valid_at(as_of) and (relations is None or e.relation in relations)
    ]

    def both_ways(hop: int) -> bool:
        return backward_hops is None or hop < backward_hops

    distance = dict.fromkeys(seeds, 0)
    frontier = list(distance)
    for hop in range(1, depth + 1):
        following: list[str] = []
        for e in usable:
            steps = [(e.source_id, e.target_id)]
            if both_ways(hop - 1):
                steps.append((e.target_id, e.source_id))
            for a, b in steps:
                if a in frontier and b not in distance:
                    distance[b] = hop
                    following.append(b)
        frontier = following
    far = depth + 1
    kept: set[tuple[str, str, str]] = set()
    for e in usable:
        from_source = distance.get(e.source_id, far)
        from_target = distance.get(e.target_id, far)
        if from_source < depth or (from_target < depth and both_ways(from_target)):
            kept.add(e.key)
    return kept
