"""Clearance end to end: generated corpora and principals against the real embedded backends.

Every check compares what a search returns with the ground truth the test generated (each
element's sensitivity, scope and type, and the relations written), never with the
sensitivity the response itself reports. The stores are the embedded profile (Chroma,
networkx, SQLite) in a fresh temporary folder per example; the embedding model is the
session's.

Every element carries a timestamp of 2020-01-01: at the default half-life (365 days) and
floor (0.8) its decay is exactly the floor, so two searches a few milliseconds apart see the
same decay and the non-interference comparison can be exact, with no float tolerance.
"""

from __future__ import annotations

import tempfile
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import uda
from connectors.base import GraphCapable, TextCapable
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


def all_strings(value: Any) -> Iterable[str]:
    """Every string inside nested rows (dicts, lists, tuples) of an Arrow `to_pylist()`."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from all_strings(k)
            yield from all_strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from all_strings(v)


def check_context(
    truth: Truth, origin: str, context: Sequence[Mapping[str, Any]], depth: int, where: str
) -> None:
    """A result's context nodes are exactly the visible graph's ball around it, over edges
    that exist with both ends visible, each reached from a visible node."""
    nodes = truth.corpus.nodes
    visible = truth.visible
    edges = truth.visible_edges
    expected = truth.distances(origin, depth)
    seen: dict[str, int] = {}
    for n in context:
        nid = n["element_id"]
        label = f"{where}: context node {nid} of {origin}"
        assert nid in nodes, f"{label} was never ingested"
        assert nid in visible, f"{label} is hidden from {truth.entries}"
        assert nid != origin, f"{label} is the result itself"
        assert nid not in seen, f"{label} appears twice"
        assert n["element_type"] == nodes[nid].element_type, label
        assert 1 <= n["depth"] <= depth, label
        assert n["depth"] == expected.get(nid), (
            f"{label} at depth {n['depth']}, visible distance {expected.get(nid)}"
        )
        via = n["via"]
        assert via in visible, f"{label} reached through hidden node {via}"
        if n["depth"] == 1:
            assert via == origin, label
        else:
            assert seen.get(via) == n["depth"] - 1, f"{label} via {via} which is not a hop before"
        assert n["direction"] in ("out", "in"), label
        edge = (via, n["relation"], nid) if n["direction"] == "out" else (nid, n["relation"], via)
        assert edge in edges, f"{label} over {edge}, which is not a visible generated relation"
        seen[nid] = n["depth"]
    assert set(seen) == set(expected), (
        f"{where}: context of {origin} is {sorted(seen)}, visible ball is {sorted(expected)}"
    )


def check_context_visible(
    truth: Truth, origin: str, context: Sequence[Mapping[str, Any]], depth: int, where: str
) -> None:
    """Every context node is visible, within `depth`, reached over a visible edge from a
    visible node (any mode's guarantee; `check_context` is the context mode's exact ball)."""
    visible = truth.visible
    edges = truth.visible_edges
    for n in context:
        nid, via = n["element_id"], n["via"]
        label = f"{where}: context node {nid} of {origin}"
        assert nid in visible, f"{label} is hidden from {truth.entries}"
        assert via in visible, f"{label} reached through hidden node {via}"
        assert 1 <= n["depth"] <= depth, label
        edge = (via, n["relation"], nid) if n["direction"] == "out" else (nid, n["relation"], via)
        assert edge in edges, f"{label} over {edge}, which is not a visible generated relation"


def check_response(
    truth: Truth, res: uda.SearchResponse, *, limit: int, depth: int, query: str
) -> None:
    nodes = truth.corpus.nodes
    visible = truth.visible
    hidden = truth.hidden
    results = res.results
    ids = [r.element_id for r in results]
    note(f"entries={truth.entries} depth={depth} query={query!r} results={ids}")

    # Results: visible knowledge assets only, and (the pool covers the corpus) all of them.
    assert len(ids) == len(set(ids))
    leaked = set(ids) - visible
    assert not leaked, f"results {sorted(leaked)} are hidden from {truth.entries}"
    searchable = {eid for eid in visible if nodes[eid].is_asset}
    assert set(ids) <= searchable
    assert len(ids) == min(limit, len(searchable)), (ids, sorted(searchable))
    keys = [(-r.score, r.element_id) for r in results]
    assert keys == sorted(keys), "results not sorted by score desc, element_id asc"

    # The exact oracles (the context ball, degree) are those of the context mode; in the
    # associative mode (chosen by the store's visible graph, or asked) every context node
    # must still be visible, reached over a visible edge from a visible node.
    plan = res.explain().plan
    exact = plan.traverse == "context" and plan.centrality == "degree"
    check = check_context if exact else check_context_visible
    for r in results:
        node = nodes[r.element_id]
        assert r.element_type == node.element_type
        assert r.properties["sensitivity"] == node.sensitivity
        assert r.properties["scope"] == node.scope
        check(truth, r.element_id, r.context_nodes, depth, "results")
        for n in r.context_nodes:
            truth_node = nodes[n["element_id"]]
            assert n["properties"]["sensitivity"] == truth_node.sensitivity
            assert n["properties"]["scope"] == truth_node.scope

    # Arrow: the same rows, degree centrality counts visible edges only, no hidden id anywhere.
    rows = res.to_arrow().to_pylist()
    assert [row["element_id"] for row in rows] == ids
    for row, r in zip(rows, results, strict=True):
        check(truth, row["element_id"], row["context_nodes"], depth, "to_arrow")
        assert [n["element_id"] for n in row["context_nodes"]] == [
            n["element_id"] for n in r.context_nodes
        ]
        for n in row["context_nodes"]:
            truth_node = nodes[n["element_id"]]
            assert (n["sensitivity"], n["scope"]) == (truth_node.sensitivity, truth_node.scope)
        if exact:
            assert row["centrality"] == truth.degree(row["element_id"]), (
                f"centrality of {row['element_id']} is {row['centrality']}, "
                f"its visible degree is {truth.degree(row['element_id'])}"
            )
    strings = list(all_strings(rows))
    for h in hidden:
        assert not any(h in s for s in strings), f"hidden id {h} appears in to_arrow()"

    # Typed elements and their dot-navigable context.
    elements = res.to_elements()
    assert [e.element_id for e in elements] == ids
    for element, r in zip(elements, results, strict=True):
        node = nodes[element.element_id]
        assert (element.element_type, element.sensitivity.value, element.scope) == (
            node.element_type,
            node.sensitivity,
            node.scope,
        )
        links = element.context
        assert [link.element.element_id for link in links] == [
            n["element_id"] for n in r.context_nodes
        ]
        for link in links:
            linked = link.element
            assert linked.element_id in visible, f"to_elements context {linked.element_id}"
            truth_node = nodes[linked.element_id]
            assert (linked.element_type, linked.sensitivity.value, linked.scope) == (
                truth_node.element_type,
                truth_node.sensitivity,
                truth_node.scope,
            )

    # explain(): the same results, and no hidden id in its text or its data.
    explanation = res.explain()
    assert [e.element_id for e in explanation.results] == ids
    text = str(explanation)
    data = list(all_strings(explanation.to_dict()))
    for h in hidden:
        assert h not in text, f"hidden id {h} appears in explain()"
        assert not any(h in s for s in data), f"hidden id {h} appears in explain().to_dict()"


# -- properties over generated corpora -------------------------------------------------------
CONTEXT_MODE = {"traverse": "context", "centrality": "degree", "graph_candidates": False}
ASSOCIATIVE_MODE = {"traverse": "association", "centrality": "pagerank", "graph_candidates": True}


@HYPOTHESIS
@given(
    corpus=corpora(),
    callers=st.lists(principals, min_size=1, max_size=3),
    query=queries,
    limit=st.integers(1, 10),
)
def test_no_result_or_context_node_is_above_clearance(
    embedder: Embedder,
    corpus: Corpus,
    callers: list[tuple[str, ...]],
    query: str,
    limit: int,
) -> None:
    note(f"nodes={list(corpus.nodes.values())}")
    note(f"relations={sorted(corpus.relations)}")
    with fresh_client(embedder) as client:
        client.ingest(corpus.elements(), corpus.relation_objects())
        for entries in callers:
            truth = Truth(corpus=corpus, entries=entries)
            for depth in (1, 2):
                # The mode the store's visible graph calls for, then each mode asked for.
                for mode in ({}, CONTEXT_MODE, ASSOCIATIVE_MODE):
                    res = client.search(
                        query,
                        limit=limit,
                        clearance_scope=list(entries),
                        expand_depth=depth,
                        **mode,  # type: ignore[arg-type]
                    )
                    check_response(truth, res, limit=limit, depth=depth, query=query)


def hidden_combos(entries: Sequence[str]) -> list[tuple[str, str | None]]:
    """(sensitivity, scope) pairs that the principal may not see."""
    return [
        (lvl, scope) for lvl in LEVELS for scope in ALL_SCOPES if not allowed(entries, lvl, scope)
    ]


@dataclass(frozen=True, kw_only=True)
class InterferenceCase:
    corpus: Corpus
    entries: tuple[str, ...]
    query: str
    limit: int
    extras: dict[str, Node]
    extra_relations: tuple[Triple, ...]


@st.composite
def interference_cases(draw: st.DrawFn) -> InterferenceCase:
    corpus = draw(corpora())
    entries = draw(principals.filter(hidden_combos))
    query = draw(queries)
    # Hidden extras repeat the query words: leaked, they would rank high and move statistics.
    extras = draw(
        nodes_of(
            "h",
            list(ALL_CLASSES),
            draw(st.integers(1, 4)),
            clearance=hidden_combos(entries),
            text_prefix=query,
        )
    )
    everything = corpus.nodes | extras
    hidden = set(everything) - visible_ids(everything, entries)
    first = next(iter(extras))
    visible_assets = [
        eid
        for eid, n in corpus.nodes.items()
        if n.is_asset and allowed(entries, n.sensitivity, n.scope)
    ]
    # Hidden node -> every visible document: would raise each one's degree if leaked.
    forced = [(first, "relatedTo", eid) for eid in visible_assets]
    forced += [
        (eid, "relatedTo", first)
        for eid, n in corpus.nodes.items()
        if not n.is_asset and allowed(entries, n.sensitivity, n.scope)
    ]
    candidates = [
        t
        for t in valid_triples(everything)
        if (t[0] in hidden or t[2] in hidden) and t not in corpus.relations and t not in forced
    ]
    more = draw(st.lists(st.sampled_from(candidates), unique=True, max_size=15))
    return InterferenceCase(
        corpus=corpus,
        entries=entries,
        query=query,
        limit=draw(st.integers(1, 10)),
        extras=extras,
        extra_relations=tuple(forced + more),
    )


def observable(res: uda.SearchResponse) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Everything a caller can observe of a response, except the phase timings."""
    return res.to_arrow().to_pylist(), res.explain().to_dict()["results"]


@HYPOTHESIS
@given(case=interference_cases())
def test_hidden_writes_do_not_change_what_a_caller_observes(
    embedder: Embedder, case: InterferenceCase
) -> None:
    corpus = case.corpus
    note(f"entries={case.entries} query={case.query!r} limit={case.limit}")
    note(f"nodes={list(corpus.nodes.values())}")
    note(f"relations={sorted(corpus.relations)}")
    note(f"extras={list(case.extras.values())}")
    note(f"extra relations={sorted(case.extra_relations)}")
    with fresh_client(embedder) as client:
        client.ingest(corpus.elements(), corpus.relation_objects())

        def search(depth: int) -> uda.SearchResponse:
            return client.search(
                case.query,
                limit=case.limit,
                clearance_scope=list(case.entries),
                expand_depth=depth,
            )

        before = {depth: search(depth) for depth in (1, 2)}
        for depth, res in before.items():
            check_response(
                Truth(corpus=corpus, entries=case.entries),
                res,
                limit=case.limit,
                depth=depth,
                query=case.query,
            )
        seen_before = {depth: observable(res) for depth, res in before.items()}

        report = client.ingest(
            [n.element() for n in case.extras.values()],
            [Relation(source_id=s, relation=r, target_id=t) for s, r, t in case.extra_relations],
        )
        assert report.written == len(case.extras)
        assert report.edges == len(case.extra_relations)

        after = {depth: search(depth) for depth in (1, 2)}
        for depth in (1, 2):
            rows_before, explain_before = seen_before[depth]
            rows_after, explain_after = observable(after[depth])
            ids_before = [r["element_id"] for r in rows_before]
            assert [r["element_id"] for r in rows_after] == ids_before, f"depth {depth}: order"
            # Exact equality, no tolerance: decay sits at its floor (see the module doc), the
            # lexical statistics are the caller's, and Chroma is exact at these sizes.
            for row_b, row_a in zip(rows_before, rows_after, strict=True):
                for column in ("score", "semantic_score", "lexical_score", "centrality"):
                    assert row_a[column] == row_b[column], (depth, row_b["element_id"], column)
                assert row_a["context_nodes"] == row_b["context_nodes"], (
                    depth,
                    row_b["element_id"],
                )
            assert rows_after == rows_before, f"depth {depth}: some column changed"
            assert explain_after == explain_before, f"depth {depth}: explain() changed"

        # The extras are really there: a caller cleared for everything finds them.
        everything = Corpus(
            nodes=corpus.nodes | case.extras,
            relations=corpus.relations | frozenset(case.extra_relations),
        )
        top = ("restricted", "project:*")
        for depth in (1, 2):
            res = client.search(
                case.query, limit=100, clearance_scope=list(top), expand_depth=depth
            )
            check_response(
                Truth(corpus=everything, entries=top),
                res,
                limit=100,
                depth=depth,
                query=case.query,
            )


# -- the explicit case: a restricted decision governing a public document ---------------------

DOC = Document(
    element_id="doc-release",
    name="Release checklist",
    text="How to cut a release: tag the commit, build the wheel, publish it to the index.",
    sensitivity="public",
    timestamp=TIMESTAMP,
)
REPO = Repository(
    element_id="repo-tools", name="release tooling", sensitivity="public", timestamp=TIMESTAMP
)
DECISION = Decision(
    element_id="adr-quorum-lease",
    name="Adopt Zanzibar quorum leases",
    text="We release only after a quorum lease is granted; publishing without it is forbidden.",
    sensitivity="restricted",
    timestamp=TIMESTAMP,
)
AUTHOR = Person(element_id="person-xq", name="Xanthippe Quill", sensitivity="public")
SECRET_MARKS = ("adr-quorum-lease", "Zanzibar", "person-xq", "Xanthippe")


@pytest.fixture
def governed(client: uda.Client) -> uda.Client:
    client.ingest(
        [DOC, REPO, DECISION, AUTHOR],
        [
            ("doc-release", "partOf", "repo-tools"),
            ("doc-release", "governedBy", "adr-quorum-lease"),
            # Reachable only through the restricted decision.
            ("adr-quorum-lease", "authoredBy", "person-xq"),
        ],
    )
    return client


@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("scope", [[], ["public"], ["confidential", "project:*"]])
def test_restricted_decision_stays_hidden_from_lower_callers(
    governed: uda.Client, depth: int, scope: list[str]
) -> None:
    res = governed.search("how do we publish a release", clearance_scope=scope, expand_depth=depth)
    assert [r.element_id for r in res.results] == ["doc-release"]
    ctx = res.results[0].context_nodes
    assert [(n["element_id"], n["relation"], n["direction"], n["depth"]) for n in ctx] == [
        ("repo-tools", "partOf", "out", 1)
    ]

    table = res.to_arrow()
    assert table.column("element_id").to_pylist() == ["doc-release"]
    assert table.column("centrality").to_pylist() == [1.0]  # the repository edge only
    arrow_ctx = table.column("context_nodes").to_pylist()
    assert [[n["element_id"] for n in nodes] for nodes in arrow_ctx] == [["repo-tools"]]

    [doc] = res.to_elements()
    assert doc.decisions == []
    assert doc.related("governedBy") == []
    assert doc.repository is not None
    assert doc.repository.name == "release tooling"
    assert [link.element.element_id for link in doc.context] == ["repo-tools"]

    text = str(res.explain())
    rows = table.to_pylist()
    for mark in SECRET_MARKS:
        assert mark not in text, f"{mark!r} leaks through explain()"
        assert mark not in repr(rows), f"{mark!r} leaks through to_arrow()"
        assert mark not in repr(res.results), f"{mark!r} leaks through results"


@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("scope", [["restricted"], ["internal", "restricted"]])
def test_restricted_caller_sees_document_and_decision(
    governed: uda.Client, depth: int, scope: list[str]
) -> None:
    res = governed.search("how do we publish a release", clearance_scope=scope, expand_depth=depth)
    by_id = {r.element_id: r for r in res.results}
    assert set(by_id) == {"doc-release", "adr-quorum-lease"}

    doc_ctx = {
        n["element_id"]: (n["relation"], n["direction"], n["depth"], n["via"])
        for n in by_id["doc-release"].context_nodes
    }
    expected = {
        "repo-tools": ("partOf", "out", 1, "doc-release"),
        "adr-quorum-lease": ("governedBy", "out", 1, "doc-release"),
    }
    if depth == 2:
        expected["person-xq"] = ("authoredBy", "out", 2, "adr-quorum-lease")
    assert doc_ctx == expected

    decision_ctx = {n["element_id"] for n in by_id["adr-quorum-lease"].context_nodes}
    assert decision_ctx == (
        {"doc-release", "person-xq"} | ({"repo-tools"} if depth == 2 else set())
    )

    table = res.to_arrow()
    centrality = dict(
        zip(
            table.column("element_id").to_pylist(),
            table.column("centrality").to_pylist(),
            strict=True,
        )
    )
    assert centrality == {"doc-release": 2.0, "adr-quorum-lease": 2.0}

    docs = {e.element_id: e for e in res.to_elements()}
    doc = docs["doc-release"]
    assert isinstance(doc, Document)
    assert [d.element_id for d in doc.decisions] == ["adr-quorum-lease"]
    assert doc.decisions[0].sensitivity.value == "restricted"
    assert "adr-quorum-lease" in str(res.explain())


def test_unknown_clearance_entry_is_rejected_by_search(governed: uda.Client) -> None:
    with pytest.raises(uda.UnknownClearanceError) as info:
        governed.search("release", clearance_scope=["public", "top-secret"])
    assert info.value.field == "clearance_scope"
    assert info.value.value == "top-secret"


def test_a_flood_of_hidden_matches_does_not_starve_the_pool(client: uda.Client) -> None:
    # More hidden chunks than the candidate pool (max(10 * limit, 50) = 50), each a better
    # match than the visible document, all linked to it: a post-filter would return nothing.
    query = "quarterly security audit of the storage cluster"
    visible = Document(
        element_id="doc-visible",
        name="storage notes",
        text="Notes on the storage cluster and its audit trail.",
        sensitivity="public",
        timestamp=TIMESTAMP,
    )
    client.ingest([visible])

    def observe() -> list[dict[str, Any]]:
        res = client.search(query, limit=1, clearance_scope=["internal"], expand_depth=2)
        return res.to_arrow().to_pylist()

    before = observe()
    assert [row["element_id"] for row in before] == ["doc-visible"]

    flood = [
        Document(
            element_id=f"hidden-{i:03d}",
            name="quarterly security audit",
            text=f"{query}, part {i}.",
            sensitivity="confidential" if i % 2 else "internal",
            scope=None if i % 2 else "project:vault",
            timestamp=TIMESTAMP,
        )
        for i in range(120)
    ]
    relations = [(d.element_id, "relatedTo", "doc-visible") for d in flood]
    report = client.ingest(flood, relations)
    assert report.written == 120
    assert report.edges == 120

    after = observe()
    assert after == before
    # The flood is there for a caller who may see it, and outranks the visible document.
    everyone = client.search(query, limit=5, clearance_scope=["confidential", "project:*"])
    assert len(everyone) == 5
    assert "doc-visible" not in [r.element_id for r in everyone.results]


# -- degraded answers --------------------------------------------------------------------------


def _fail_leg(client: uda.Client, leg: str) -> None:
    """Make the real connector's call of `leg` fail, as a backend that went away does."""

    async def broken(*args: object, **kwargs: object) -> Any:
        raise ConnectionResetError("connection reset by peer (injected)")

    for connector in client.connectors:
        if leg == "graph" and isinstance(connector, GraphCapable):
            connector.expand = broken  # type: ignore[method-assign]
        if leg == "lexical" and isinstance(connector, TextCapable):
            connector.text_search = broken  # type: ignore[method-assign]


@HYPOTHESIS
@given(
    corpus=corpora(),
    callers=st.lists(principals, min_size=1, max_size=3),
    query=queries,
    limit=st.integers(1, 10),
    leg=st.sampled_from(["graph", "lexical"]),
)
def test_a_degraded_answer_is_as_safe_as_a_whole_one(
    embedder: Embedder,
    corpus: Corpus,
    callers: list[tuple[str, ...]],
    query: str,
    limit: int,
    leg: str,
) -> None:
    """Every property of a whole answer holds with a leg left out; without the graph the
    answer is the one of a corpus without relations (no context, no centrality)."""
    note(f"nodes={list(corpus.nodes.values())}")
    note(f"relations={sorted(corpus.relations)} leg={leg}")
    seen = corpus if leg != "graph" else Corpus(nodes=corpus.nodes, relations=frozenset())
    with fresh_client(embedder) as client:
        client.ingest(corpus.elements(), corpus.relation_objects())
        _fail_leg(client, leg)
        for entries in callers:
            truth = Truth(corpus=seen, entries=entries)
            for depth in (1, 2):
                res = client.search(
                    query, limit=limit, clearance_scope=list(entries), expand_depth=depth
                )
                # Flagged whenever the leg was needed (the graph is not, with no candidate).
                assert {d.leg for d in res.degraded} <= {leg}
                assert res.degraded or (leg == "graph" and not res.results)
                check_response(truth, res, limit=limit, depth=depth, query=query)
