"""Clearance end to end: generated corpora and principals against the real embedded backends.

Every check compares what a search returns with the ground truth the test generated (each
element's sensitivity, scope and type, and the relations written), never with the
sensitivity the response itself reports. The stores are the embedded profile (Chroma,
networkx, SQLite) in a fresh temporary folder per example; the embedding model is the
session's.

The properties: no result or context node above the caller's clearance, in every mode;
non-interference (hidden writes change nothing a caller observes); and a degraded answer is
as safe as a whole one. The corpora, principals and ground truth are in
clearance_fixtures.py, the checks of a response in clearance_oracle.py, the hand-written
cases in test_clearance_explicit_cases.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clearance_fixtures import (
    ALL_CLASSES,
    ALL_SCOPES,
    HYPOTHESIS,
    LEVELS,
    Corpus,
    Node,
    Triple,
    Truth,
    allowed,
    corpora,
    fresh_client,
    nodes_of,
    principals,
    queries,
    valid_triples,
    visible_ids,
)
from clearance_oracle import check_response
from hypothesis import given, note
from hypothesis import strategies as st

import uda
from connectors.base import GraphCapable, TextCapable
from ontology import Relation
from uda.embedding import Embedder

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
