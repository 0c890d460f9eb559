"""The retrieval legs fused by score (uda/query/fusion.py): standard scores, one joint rank."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ranking_fixtures import stored_document

import uda
from ontology import Document
from uda.config import SearchDefaults
from uda.query.auto.choice import choose
from uda.query.contracts import SearchRequest
from uda.query.fusion import (
    RRF_K,
    Leg,
    ReciprocalRankFusion,
    RelevanceFusion,
    attribute_joint_contributions,
    joint_relevance_ranks,
    ranks_by_score,
    rrf,
    standard_scores,
)
from uda.query.plan import make_plan
from uda.query.ranking import rank

EQUAL = {Leg.SEMANTIC: 1.0, Leg.LEXICAL: 1.0, Leg.CENTRALITY: 0.0}


def test_standard_scores_hand_computed() -> None:
    z = standard_scores({"a": 1.0, "b": 2.0, "c": 3.0})
    spread = math.sqrt(2 / 3)
    assert z == pytest.approx({"a": -1 / spread, "b": 0.0, "c": 1 / spread})


def test_standard_scores_of_equal_scores_are_zero() -> None:
    assert standard_scores({"a": 0.4, "b": 0.4}) == {"a": 0.0, "b": 0.0}
    assert standard_scores({}) == {}


def test_a_clear_lead_on_one_leg_beats_a_narrow_lead_on_the_other() -> None:
    # "x" is barely first by meaning and far down on words; "y" is barely second by meaning
    # and far ahead of everything on words. Ranks see a tie; scores see y's lead.
    semantic = {"x": 0.81, "y": 0.80, "z": 0.50, "w": 0.45}
    lexical = {"y": 30.0, "z": 6.0, "x": 5.0, "w": 4.0}
    ranks = {Leg.SEMANTIC: ranks_by_score(semantic), Leg.LEXICAL: ranks_by_score(lexical)}
    by_rank = rrf(ranks, EQUAL)
    assert by_rank["x"] < by_rank["y"] or ranks[Leg.SEMANTIC]["x"] == 1
    joint = joint_relevance_ranks(semantic, lexical, EQUAL)
    assert joint is not None
    assert joint["y"] == 1
    assert joint["x"] == 2


def test_weights_set_the_share_of_each_leg() -> None:
    semantic = {"a": 1.0, "b": 0.0}
    lexical = {"a": 0.0, "b": 1.0}
    mostly_meaning = {Leg.SEMANTIC: 3.0, Leg.LEXICAL: 1.0}
    mostly_words = {Leg.SEMANTIC: 1.0, Leg.LEXICAL: 3.0}
    assert joint_relevance_ranks(semantic, lexical, mostly_meaning) == {"a": 1, "b": 2}
    assert joint_relevance_ranks(semantic, lexical, mostly_words) == {"b": 1, "a": 2}


def test_a_candidate_one_leg_missed_gets_that_legs_lowest_score() -> None:
    semantic = {"a": 0.9, "b": 0.5, "c": 0.1}
    lexical = {"a": 10.0, "b": 1.0}  # "c" not found by words: as low as "b" there
    joint = joint_relevance_ranks(semantic, lexical, EQUAL)
    assert joint == {"a": 1, "b": 2, "c": 3}


@pytest.mark.parametrize(
    ("semantic", "lexical", "weights"),
    [
        ({"a": 1.0}, {}, EQUAL),  # words found nothing
        ({}, {"a": 1.0}, EQUAL),  # meaning found nothing
        ({"a": 1.0}, {"a": 2.0}, {Leg.SEMANTIC: 1.0, Leg.LEXICAL: 0.0}),  # a leg switched off
    ],
)
def test_nothing_to_fuse_leaves_the_legs_ranks(
    semantic: dict[str, float], lexical: dict[str, float], weights: dict[Leg, float]
) -> None:
    assert joint_relevance_ranks(semantic, lexical, weights) is None


def test_contributions_go_to_the_legs_that_found_the_candidate() -> None:
    semantic = {"a": 0.9, "b": 0.5}
    lexical = {"a": 3.0, "c": 2.0}
    joint = joint_relevance_ranks(semantic, lexical, EQUAL)
    assert joint is not None
    parts = ReciprocalRankFusion().contributions({Leg.SEMANTIC: joint, Leg.LEXICAL: joint}, EQUAL)
    credited = attribute_joint_contributions(parts, semantic, lexical)
    for key in ("a", "b", "c"):
        assert sum(credited[key].values()) == pytest.approx(2 / (RRF_K + joint[key]))
    assert set(credited["a"]) == {Leg.SEMANTIC, Leg.LEXICAL}
    assert set(credited["b"]) == {Leg.SEMANTIC}
    assert set(credited["c"]) == {Leg.LEXICAL}


_scores = st.dictionaries(
    st.sampled_from("abcdefgh"),
    # Scores on a 0.01 grid: a leg's scores are cosines and BM25 sums, never subnormal.
    st.integers(min_value=-500, max_value=5000).map(lambda v: v / 100),
    min_size=1,
)


@given(_scores, _scores)
def test_joint_ranks_are_a_permutation_of_every_candidate(
    semantic: dict[str, float], lexical: dict[str, float]
) -> None:
    joint = joint_relevance_ranks(semantic, lexical, EQUAL)
    assert joint is not None
    assert set(joint) == semantic.keys() | lexical.keys()
    assert sorted(joint.values()) == list(range(1, len(joint) + 1))


@given(_scores)
def test_the_same_scores_on_both_legs_keep_their_order(scores: dict[str, float]) -> None:
    joint = joint_relevance_ranks(scores, scores, EQUAL)
    assert joint == ranks_by_score(scores) or len(set(scores.values())) < len(scores)


# -- rank(): the plan's relevance setting decides ------------------------------------------


def test_rank_follows_the_plans_relevance_setting() -> None:
    """x leads by meaning by far and is mid-field by words; y leads both narrowly."""
    semantic = {"x": 0.95, "y": 0.505, **{f"o{i}": 0.5 - 0.01 * i for i in range(8)}}
    lexical = {"y": 9.95, "x": 9.55, **{f"o{i}": 9.9 - 0.1 * i for i in range(8)}}
    plan = make_plan(
        SearchRequest(query="q", limit=10, decay=False),
        SearchDefaults(),
        vector=("v",),
        text=("t",),
        graph=(),
        system_of_record="s",
        auto=choose(None),  # the context mode
    )
    candidates = sorted(semantic)

    def order(relevance: RelevanceFusion) -> list[str]:
        evidence = rank(
            dataclasses.replace(plan, relevance=relevance),
            ReciprocalRankFusion(),
            candidates,
            {eid: stored_document(eid) for eid in candidates},
            {eid: (score, "t") for eid, score in semantic.items()},
            {eid: (score, "t") for eid, score in lexical.items()},
            [],
            {},
        )
        for eid in candidates:
            assert sum(evidence.contributions[eid].values()) == pytest.approx(evidence.scores[eid])
        assert evidence.ranks[Leg.SEMANTIC]["x"] == 1  # each leg's own rank, for explain()
        assert evidence.ranks[Leg.LEXICAL]["x"] == 6
        return evidence.best(3)

    assert plan.relevance == "scores"
    assert order("scores") == ["x", "y", "o0"]
    assert order("ranks") == ["y", "o0", "x"]


# -- on a real embedded store ---------------------------------------------------------------
def test_a_search_ranks_by_the_joint_rank_and_explains_each_legs_share(
    client: uda.Client,
) -> None:
    """Context mode: the order is the joint rank's; explain() keeps each leg's own rank."""
    texts = [
        "Tide tables for the harbour cranes, updated every spring.",
        "Harbour cranes and harbour cranes again: crane maintenance at the harbour.",
        "A note on berth allocation and the pilots' schedule.",
        "Crane operators' handbook for container terminals.",
        "Weather at sea: storms, swell and fog near the coast.",
        "Harbour dues and the port authority's budget.",
    ]
    client.ingest(
        [
            Document(element_id=f"d{i}", name=f"note {i}", text=t, sensitivity="public")
            for i, t in enumerate(texts)
        ]
    )
    response = client.search("harbour cranes", limit=20, clearance_scope=["public"])
    explained = response.explain()
    assert explained.plan.relevance == "scores"
    results = explained.results
    assert len(results) >= 4
    semantic = {r.element_id: r.legs[Leg.SEMANTIC].score for r in results}
    lexical = {r.element_id: r.legs[Leg.LEXICAL].score for r in results}
    joint = joint_relevance_ranks(
        {k: v for k, v in semantic.items() if v is not None},
        {k: v for k, v in lexical.items() if v is not None},
        explained.plan.weights,
    )
    assert joint is not None
    # Every candidate was returned, so the joint rank can be recomputed from explain().
    assert [r.element_id for r in results] == sorted(joint, key=lambda k: joint[k])
    for r in results:
        assert sum(leg.contribution for leg in r.legs.values()) == pytest.approx(r.fused)
        for leg in (Leg.SEMANTIC, Leg.LEXICAL):
            found = r.legs[leg].score is not None
            assert (r.legs[leg].contribution > 0) == found, (r.element_id, leg)
    # Each leg's own rank, not the joint one, is what explain() shows per leg.
    shown = {r.element_id: r.legs[Leg.SEMANTIC].rank for r in results}
    own = ranks_by_score({k: v for k, v in semantic.items() if v is not None})
    assert {k: v for k, v in shown.items() if v is not None} == own
