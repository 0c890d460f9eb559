"""Personalized PageRank as the planner computes it: seeds follow the best Phase-1 matches."""

from __future__ import annotations

from connectors.contract.records import GraphEdge
from uda.query.graph_context import pagerank_centrality


def _edge(source: str, target: str) -> GraphEdge:
    return GraphEdge(source_id=source, relation="mentions", target_id=target, valid_from=1)


def test_neighbour_of_the_best_match_outranks_a_hub_of_weak_matches() -> None:
    # "best" matches the query far better than the others. "bridge" is one hop from it; the
    # hub is linked to four weak candidates. Seeds in proportion to the scores would let the
    # hub win on connectedness; sharpened seeds keep the walk near the best match.
    seeds = {"best": 0.62, "w1": 0.45, "w2": 0.45, "w3": 0.44, "w4": 0.44, "bridge": 0.40}
    edges = [_edge("best", "entity"), _edge("bridge", "entity")]
    edges += [_edge(w, "hub") for w in ("w1", "w2", "w3", "w4")]
    ranks = pagerank_centrality(edges, seeds, [*seeds, "hub"])
    assert ranks["bridge"] > ranks["hub"]
    assert ranks["bridge"] > max(ranks[w] for w in ("w1", "w2", "w3", "w4"))


def test_a_seed_without_edges_keeps_its_mass() -> None:
    seeds = {"alone": 0.9, "a": 0.5, "b": 0.5}
    ranks = pagerank_centrality([_edge("a", "b")], seeds, ["alone", "a", "b"])
    assert ranks["alone"] > ranks["a"] > 0


def test_no_edges_or_no_seeds_means_no_signal() -> None:
    assert pagerank_centrality([], {"a": 1.0}, ["a"]) == {"a": 0.0}
    assert pagerank_centrality([_edge("a", "b")], {}, ["a", "b"]) == {"a": 0.0, "b": 0.0}
