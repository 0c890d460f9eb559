"""Personalized PageRank as the planner computes it: seeds follow the best Phase-1 matches
of each retrieval leg (ADR 43), and the walk runs on the degree-normalised graph (ADR 44)."""

from __future__ import annotations

import math

import networkx as nx
import pytest
from ranking_fixtures import stored_document

from connectors.contract.records import GraphEdge
from uda.config import SearchDefaults
from uda.query.auto.choice import choose
from uda.query.contracts import SearchRequest
from uda.query.fusion import ReciprocalRankFusion
from uda.query.graph_context import normalised_walk, pagerank_centrality, restart_weights
from uda.query.plan import make_plan
from uda.query.ranking import rank


def _edge(source: str, target: str) -> GraphEdge:
    return GraphEdge(source_id=source, relation="mentions", target_id=target, valid_from=1)


def test_neighbour_of_the_best_match_outranks_a_hub_of_weak_matches() -> None:
    # "best" matches the query far better than the others. "bridge" is one hop from it; the
    # hub is linked to four weak candidates. Seeds in proportion to the scores would let the
    # hub win on connectedness; sharpened seeds keep the walk near the best match.
    seeds = {"best": 0.62, "w1": 0.45, "w2": 0.45, "w3": 0.44, "w4": 0.44, "bridge": 0.40}
    edges = [_edge("best", "entity"), _edge("bridge", "entity")]
    edges += [_edge(w, "hub") for w in ("w1", "w2", "w3", "w4")]
    ranks = pagerank_centrality(edges, restart_weights([(seeds, 1.0)]), [*seeds, "hub"])
    assert ranks["bridge"] > ranks["hub"]
    assert ranks["bridge"] > max(ranks[w] for w in ("w1", "w2", "w3", "w4"))


def test_a_seed_without_edges_keeps_its_mass() -> None:
    seeds = {"alone": 0.9, "a": 0.5, "b": 0.5}
    ranks = pagerank_centrality(
        [_edge("a", "b")], restart_weights([(seeds, 1.0)]), ["alone", "a", "b"]
    )
    assert ranks["alone"] > ranks["a"] > 0


def test_no_edges_or_no_seeds_means_no_signal() -> None:
    assert pagerank_centrality([], {"a": 1.0}, ["a"]) == {"a": 0.0}
    assert pagerank_centrality([_edge("a", "b")], {}, ["a", "b"]) == {"a": 0.0, "b": 0.0}


def test_each_legs_best_match_restarts_with_the_legs_share() -> None:
    # The dense leg's best is "d"; the lexical leg's best is "l" (BM25 as a fraction of its
    # best). Each restarts with its leg's whole share, whatever the scales.
    semantic = {"d": 0.71, "l": 0.52}
    lexical = {"l": 1.0, "d": 0.4}
    weights = restart_weights([(semantic, 1.0), (lexical, 1.0)])
    assert weights == {"d": pytest.approx(1.0, abs=1e-3), "l": pytest.approx(1.0, abs=1e-3)}
    half = restart_weights([(semantic, 1.0), (lexical, 0.5)])
    assert half == {"d": pytest.approx(1.0, abs=1e-3), "l": pytest.approx(0.5, abs=1e-3)}


def test_a_passage_next_to_the_lexical_best_is_reached() -> None:
    # "named" holds the question's rare name (the lexical leg's best) and links to "answer";
    # the dense leg prefers "lookalike", which links to "other". Seeded by the dense leg
    # alone, the walk never reaches "answer"; with both legs it does.
    semantic = {"lookalike": 0.70, "named": 0.55, "answer": 0.50, "other": 0.50}
    lexical = {"named": 1.0}
    edges = [_edge("named", "entity"), _edge("answer", "entity"), _edge("lookalike", "x")]
    edges.append(_edge("other", "x"))
    wanted = ["lookalike", "named", "answer", "other"]
    dense_only = pagerank_centrality(edges, restart_weights([(semantic, 1.0)]), wanted)
    both = pagerank_centrality(edges, restart_weights([(semantic, 1.0), (lexical, 1.0)]), wanted)
    assert dense_only["answer"] < dense_only["other"]
    assert both["answer"] > both["other"] * 0.5
    assert both["answer"] > dense_only["answer"] * 100


def test_a_leg_with_no_share_or_no_scores_seeds_nothing() -> None:
    assert restart_weights([({"a": 0.9}, 0.0), ({}, 1.0)]) == {}
    assert restart_weights([({"a": float("nan"), "b": 0.3}, 1.0)]) == {"b": 1.0}


def test_rank_seeds_the_walk_from_both_retrieval_legs() -> None:
    # The planner's ranking with PageRank: "answer" is linked only to "named", which the
    # lexical leg finds best and the dense leg finds weakly. Its centrality comes from the
    # lexical leg's seed; with the lexical leg weighed at 0 it has next to none.
    semantic = {"lookalike": 0.70, "named": 0.55, "answer": 0.50, "other": 0.50}
    lexical = {"named": 7.5, "lookalike": 2.0}
    edges = [_edge("named", "entity"), _edge("answer", "entity"), _edge("lookalike", "x")]
    edges.append(_edge("other", "x"))
    candidates = sorted(semantic)

    def centrality(lexical_weight: float) -> dict[str, float]:
        plan = make_plan(
            SearchRequest(
                query="q",
                limit=10,
                decay=False,
                centrality="pagerank",
                weights={"semantic": 1.0, "lexical": lexical_weight, "centrality": 4.0},
            ),
            SearchDefaults(),
            vector=("v",),
            text=("t",),
            graph=("g",),
            system_of_record="s",
            auto=choose(None),
        )
        evidence = rank(
            plan,
            ReciprocalRankFusion(),
            candidates,
            {eid: stored_document(eid) for eid in candidates},
            {eid: (score, "t") for eid, score in semantic.items()},
            {eid: (score, "t") for eid, score in lexical.items()},
            edges,
            {},
        )
        return dict(evidence.centrality)

    assert centrality(1.0)["answer"] > centrality(1.0)["other"] * 0.5
    assert centrality(0.0)["answer"] < centrality(0.0)["other"] * 1e-3


def _shared_entities() -> tuple[list[GraphEdge], list[str]]:
    # "seed" shares two common entities (each mentioned by four other passages too) with
    # "common", and one rare entity with "rare".
    edges = [_edge("seed", "c1"), _edge("seed", "c2"), _edge("seed", "r")]
    edges += [_edge("common", "c1"), _edge("common", "c2"), _edge("rare", "r")]
    for hub in ("c1", "c2"):
        edges += [_edge(f"{hub}-other-{i}", hub) for i in range(4)]
    passages = sorted({e.source_id for e in edges})
    return edges, passages


def test_a_rare_shared_entity_carries_the_walk_further_than_two_common_ones() -> None:
    edges, passages = _shared_entities()
    ranks = pagerank_centrality(edges, {"seed": 1.0}, passages)
    assert ranks["rare"] > ranks["common"] * 2
    # The fixture is one a plain walk gets the other way: each common entity hands the
    # seed's share to everything that mentions it, yet two of them add up to more.
    plain = nx.Graph([(e.source_id, e.target_id) for e in edges])
    personalization = {n: 1.0 if n == "seed" else 0.0 for n in plain}
    unweighted = nx.pagerank(plain, alpha=0.85, personalization=personalization)
    assert unweighted["common"] > unweighted["rare"]


def test_each_edge_weighs_one_over_the_root_of_its_ends_degrees() -> None:
    edges = [_edge("a", "hub"), _edge("b", "hub"), _edge("c", "hub"), _edge("a", "b")]
    graph = normalised_walk(edges, ["a", "b", "c", "alone"])
    assert graph["a"]["hub"]["weight"] == pytest.approx(1 / math.sqrt(2 * 3))
    assert graph["c"]["hub"]["weight"] == pytest.approx(1 / math.sqrt(1 * 3))
    assert graph["a"]["b"]["weight"] == pytest.approx(1 / 2)
    assert "alone" in graph
    assert graph.degree("alone") == 0


def test_a_candidate_seen_twice_in_the_edges_counts_one_neighbour() -> None:
    # Two relations between the same pair are one step of the walk, not two.
    edges = [
        _edge("a", "b"),
        GraphEdge(source_id="a", relation="cites", target_id="b", valid_from=1),
    ]
    edges.append(_edge("a", "c"))
    graph = normalised_walk(edges, [])
    assert graph["a"]["b"]["weight"] == pytest.approx(graph["a"]["c"]["weight"])
