"""`rank()` computes on columns (uda/query/ranking.py); its answer is the per-id rules'.

Each rule of the fusion is also given per id (`ranks_by_score`, `centrality_ranks`,
`joint_relevance_ranks`, `rrf_contributions`, `attribute_joint_contributions`). Over generated
candidates - ties, negative scores, one leg or both, a graph or none, decay or not, either
relevance fusion - the columns `rank()` keeps must be what those rules give, and the order
`best()` returns must be the scores' order with ties by element id.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ranking_fixtures import planned, stored_document

from uda.query.auto.choice import choose
from uda.query.fusion import (
    Leg,
    ReciprocalRankFusion,
    attribute_joint_contributions,
    centrality_ranks,
    joint_relevance_ranks,
    ranks_by_score,
    rrf_contributions,
)
from uda.query.ranking import rank

pytestmark = pytest.mark.unit

_IDS = [f"e{i:02d}" for i in range(24)]
# Scores on a coarse grid, so that ties are common; negative cosines too.
_score = st.integers(-20, 40).map(lambda v: v / 20)


@st.composite
def _case(draw: st.DrawFn) -> dict[str, object]:
    ids = draw(st.lists(st.sampled_from(_IDS), min_size=1, max_size=len(_IDS), unique=True))
    on_semantic = draw(st.lists(st.sampled_from(ids), unique=True))
    on_lexical = draw(st.lists(st.sampled_from(ids), unique=True))
    if not on_semantic and not on_lexical:
        on_semantic = ids[:1]
    degree = draw(st.dictionaries(st.sampled_from(ids), st.integers(1, 3)))
    return {
        "ids": ids,
        "semantic": {eid: draw(_score) for eid in on_semantic},
        "lexical": {eid: draw(_score) * 5 for eid in on_lexical},
        "ages": {eid: draw(st.integers(0, 4)) * 200 for eid in ids},
        "degree": degree,
        "decay": draw(st.booleans()),
        "relevance": draw(st.sampled_from(["scores", "ranks"])),
        "weights": {
            Leg.SEMANTIC: draw(st.sampled_from([0.0, 0.5, 1.0])),
            Leg.LEXICAL: draw(st.sampled_from([0.0, 1.0, 2.0])),
            Leg.CENTRALITY: draw(st.sampled_from([0.0, 0.2])),
            Leg.ENTITY: 0.0,
        },
    }


@settings(max_examples=200, deadline=None)
@given(_case())
def test_the_columns_are_the_per_id_rules(case: dict[str, object]) -> None:
    ids: list[str] = case["ids"]  # type: ignore[assignment]
    semantic_raw = {eid: (s, "t") for eid, s in case["semantic"].items()}  # type: ignore[attr-defined]
    lexical_raw = {eid: (s, "t") for eid, s in case["lexical"].items()}  # type: ignore[attr-defined]
    ages: dict[str, int] = case["ages"]  # type: ignore[assignment]
    plan = planned(choose(None), limit=10, decay=bool(case["decay"]))
    plan = dataclasses.replace(
        plan,
        relevance=case["relevance"],  # type: ignore[arg-type]
        weights=case["weights"],  # type: ignore[arg-type]
        centrality="degree",
    )
    day_ms = 86_400_000
    states = {
        eid: dataclasses.replace(
            stored_document(eid), timestamp_ms=plan.as_of_ms - ages[eid] * day_ms
        )
        for eid in ids
    }
    adj = {eid: [("hub", "part_of", "out")] * n for eid, n in case["degree"].items()}  # type: ignore[attr-defined]

    evidence = rank(plan, ReciprocalRankFusion(), ids, states, semantic_raw, lexical_raw, [], adj)

    semantic, lexical = evidence.semantic, evidence.lexical
    assert semantic.keys() == semantic_raw.keys()
    assert lexical.keys() == lexical_raw.keys()
    for eid, (raw, _) in semantic_raw.items():
        decay = evidence.decay[eid]
        assert semantic[eid] == (raw * decay if raw >= 0 else raw / decay)
    ranks = {
        Leg.SEMANTIC: ranks_by_score(semantic),
        Leg.LEXICAL: ranks_by_score(lexical),
        Leg.CENTRALITY: centrality_ranks(evidence.centrality, ranks_by_score(semantic)),
    }
    assert evidence.ranks == ranks
    joint = (
        joint_relevance_ranks(semantic, lexical, plan.weights)
        if plan.relevance == "scores"
        else None
    )
    if joint is None:
        expected = rrf_contributions(ranks, plan.weights)
    else:
        fused = rrf_contributions({**ranks, Leg.SEMANTIC: joint, Leg.LEXICAL: joint}, plan.weights)
        expected = attribute_joint_contributions(fused, semantic, lexical)
    assert evidence.contributions == expected
    for eid in ids:
        assert evidence.scores[eid] == sum(expected.get(eid, {}).values())
    order = sorted(ids, key=lambda eid: (-evidence.scores[eid], eid))
    assert evidence.best(len(ids)) == order
    assert evidence.best(3) == order[:3]
