"""Generated corpora and principals for the clearance tests, and their ground truth.

The ground truth (each element's sensitivity, scope and type, the relations written, who may
see what, the visible graph) is written out independently of `uda.query.clearance`; the tests
compare what a search returns with it, never with the sensitivity the response itself
reports. `fresh_client` gives the embedded profile (Chroma, networkx, SQLite) in a fresh
temporary folder per example.

Every element carries a timestamp of 2020-01-01: at the default half-life (365 days) and
floor (0.8) its decay is exactly the floor, so two searches a few milliseconds apart see the
same decay and the non-interference comparison can be exact, with no float tolerance.
"""

from __future__ import annotations

import tempfile
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import uda
from ontology import (
    Decision,
    Document,
    Element,
    Evidence,
    Person,
    Project,
    Relation,
    Repository,
)
from uda.embedding import Embedder

LEVELS = ["public", "internal", "confidential", "restricted"]
CORPUS_SCOPES: list[str | None] = [None, "project:a", "project:b"]
# Hidden extras may also live in a project nobody but `project:*` is granted.
ALL_SCOPES: list[str | None] = [*CORPUS_SCOPES, "project:c"]
ENTRIES = [*LEVELS, "project:a", "project:b", "project:*"]
TIMESTAMP = datetime(2020, 1, 1, tzinfo=UTC)

ASSET_CLASSES: dict[str, type[Element]] = {
    "Document": Document,
    "Decision": Decision,
    "Evidence": Evidence,
}
CONTEXT_CLASSES: dict[str, type[Element]] = {
    "Repository": Repository,
    "Person": Person,
    "Project": Project,
}
ALL_CLASSES = {**ASSET_CLASSES, **CONTEXT_CLASSES}

VOCAB = [
    "graph",
    "search",
    "vector",
    "index",
    "clearance",
    "decision",
    "repository",
    "embedding",
    "latency",
    "cache",
    "schema",
    "migration",
    "ranking",
    "fusion",
    "agent",
    "review",
    "deploy",
    "security",
    "audit",
    "storage",
    "kubernetes",
    "database",
    "release",
    "python",
]

HYPOTHESIS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

Triple = tuple[str, str, str]


# -- ground truth ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Node:
    element_id: str
    element_type: str
    sensitivity: str
    scope: str | None
    name: str
    text: str | None

    @property
    def is_asset(self) -> bool:
        return self.element_type in ASSET_CLASSES

    def element(self) -> Element:
        fields: dict[str, Any] = {
            "element_id": self.element_id,
            "name": self.name,
            "sensitivity": self.sensitivity,
            "scope": self.scope,
            "timestamp": TIMESTAMP,
        }
        if self.text is not None:
            fields["text"] = self.text
        return ALL_CLASSES[self.element_type](**fields)


def allowed(entries: Sequence[str], sensitivity: str, scope: str | None) -> bool:
    """docs/design.md "Clearance", written out independently of `uda.query.clearance`."""
    granted = max((LEVELS.index(e) for e in entries if e in LEVELS), default=0)
    if LEVELS.index(sensitivity) > granted:
        return False
    return scope is None or "project:*" in entries or scope in entries


def visible_ids(nodes: Mapping[str, Node], entries: Sequence[str]) -> set[str]:
    return {eid for eid, n in nodes.items() if allowed(entries, n.sensitivity, n.scope)}


def valid_triples(nodes: Mapping[str, Node]) -> list[Triple]:
    """Every relation the ontology accepts between two distinct generated nodes."""
    out: list[Triple] = []
    for s, src in nodes.items():
        for t, dst in nodes.items():
            if s == t:
                continue
            if src.element_type == "Document" and dst.element_type == "Repository":
                out.append((s, "partOf", t))
            if src.element_type == "Document" and dst.element_type == "Decision":
                out.append((s, "governedBy", t))
            if dst.element_type == "Person":
                out.append((s, "authoredBy", t))
            if src.element_type == "Decision" and dst.element_type == "Decision":
                out.append((s, "supersedes", t))
            out.append((s, "relatedTo", t))
    return out


@dataclass(frozen=True, kw_only=True)
class Corpus:
    nodes: dict[str, Node]
    relations: frozenset[Triple]

    def elements(self) -> list[Element]:
        return [n.element() for n in self.nodes.values()]

    def relation_objects(self) -> list[Relation]:
        return [Relation(source_id=s, relation=r, target_id=t) for s, r, t in self.relations]


@dataclass(frozen=True, kw_only=True)
class Truth:
    """What one principal may see of a corpus, and the visible graph."""

    corpus: Corpus
    entries: tuple[str, ...]

    @property
    def visible(self) -> set[str]:
        return visible_ids(self.corpus.nodes, self.entries)

    @property
    def hidden(self) -> set[str]:
        return set(self.corpus.nodes) - self.visible

    @property
    def visible_edges(self) -> set[Triple]:
        vis = self.visible
        return {(s, r, t) for s, r, t in self.corpus.relations if s in vis and t in vis}

    def distances(self, origin: str, depth: int) -> dict[str, int]:
        """Shortest distances (1..depth) from origin in the visible graph, walking the first
        hop either way and every later hop along the edge's direction (`traverse="context"`:
        a document reaches its repository, not the repository's other documents)."""
        either: dict[str, set[str]] = {}
        forward: dict[str, set[str]] = {}
        for s, _, t in self.visible_edges:
            either.setdefault(s, set()).add(t)
            either.setdefault(t, set()).add(s)
            forward.setdefault(s, set()).add(t)
        dist = {origin: 0}
        queue = deque([origin])
        while queue:
            node = queue.popleft()
            if dist[node] == depth:
                continue
            for other in (either if dist[node] == 0 else forward).get(node, ()):
                if other not in dist:
                    dist[other] = dist[node] + 1
                    queue.append(other)
        del dist[origin]
        return dist

    def degree(self, element_id: str) -> int:
        return sum(1 for s, _, t in self.visible_edges if element_id in (s, t))


# -- strategies -----------------------------------------------------------------------------

words = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3).map(" ".join)
texts = st.lists(st.sampled_from(VOCAB), min_size=3, max_size=8).map(" ".join)
queries = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3, unique=True).map(" ".join)
principals = st.lists(st.sampled_from(ENTRIES), max_size=4).map(tuple)


@st.composite
def nodes_of(
    draw: st.DrawFn,
    prefix: str,
    types: Sequence[str],
    count: int,
    *,
    start: int = 0,
    clearance: Sequence[tuple[str, str | None]] | None = None,
    text_prefix: str = "",
) -> dict[str, Node]:
    out: dict[str, Node] = {}
    for i in range(start, start + count):
        element_type = draw(st.sampled_from(types))
        if clearance is None:
            sensitivity = draw(st.sampled_from(LEVELS))
            scope = draw(st.sampled_from(CORPUS_SCOPES))
        else:
            sensitivity, scope = draw(st.sampled_from(clearance))
        text = None
        if element_type in ASSET_CLASSES:
            text = (text_prefix + " " + draw(texts)).strip()
        eid = f"{prefix}{i:03d}"
        out[eid] = Node(
            element_id=eid,
            element_type=element_type,
            sensitivity=sensitivity,
            scope=scope,
            name=draw(words),
            text=text,
        )
    return out


@st.composite
def corpora(draw: st.DrawFn) -> Corpus:
    n_assets = draw(st.integers(2, 8))
    n_context = draw(st.integers(1, 4))
    nodes = draw(nodes_of("n", list(ASSET_CLASSES), n_assets))
    nodes |= draw(nodes_of("n", list(CONTEXT_CLASSES), n_context, start=n_assets))
    triples = valid_triples(nodes)
    relations = draw(st.lists(st.sampled_from(triples), unique=True, max_size=20))
    return Corpus(nodes=nodes, relations=frozenset(relations))


# -- helpers --------------------------------------------------------------------------------


@contextmanager
def fresh_client(embedder: Embedder) -> Iterator[uda.Client]:
    """A client on the embedded profile in a folder of its own, closed afterwards."""
    with tempfile.TemporaryDirectory(prefix="uda-clearance-") as tmp:
        client = uda.connect(path=Path(tmp) / "uda", embedder=embedder)
        try:
            yield client
        finally:
            client.close()
