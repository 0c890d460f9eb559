"""What a search response may show a caller: the checks of every clearance property test.

`check_response` holds a response (results, context nodes, Arrow rows, typed elements and
`explain()`) to the ground truth of clearance_fixtures.py: only visible elements, each
reached over visible edges, and no hidden id anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clearance_fixtures import Truth
from hypothesis import note

import uda


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
