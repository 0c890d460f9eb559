"""Pure-function tests of uda/query/fusion.py against hand-computed cases."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uda.query.fusion import (
    DEFAULT_WEIGHTS,
    MIN_DECAY_FACTOR,
    RRF_K,
    Leg,
    apply_decay,
    centrality_ranks,
    decay_factor,
    ranks_by_score,
    rrf,
    rrf_contributions,
)

W = {Leg.SEMANTIC: 1.0, Leg.LEXICAL: 1.0, Leg.CENTRALITY: 0.2}

# Three small rank lists. "d" is ranked by the centrality leg only.
RANKS = {
    Leg.SEMANTIC: {"a": 1, "b": 2, "c": 3},
    Leg.LEXICAL: {"b": 1, "c": 2, "a": 3},
    Leg.CENTRALITY: {"c": 1, "a": 2, "d": 3},
}


# -- RRF ------------------------------------------------------------------------------------
def test_defaults_match_design() -> None:
    assert RRF_K == 60
    assert dict(DEFAULT_WEIGHTS) == {**W, Leg.ENTITY: 1.0}


def test_rrf_hand_computed_three_legs() -> None:
    scores = rrf(RANKS, W)
    expected = {
        "a": 1 / 61 + 1 / 63 + 0.2 / 62,
        "b": 1 / 62 + 1 / 61,
        "c": 1 / 63 + 1 / 62 + 0.2 / 61,
        "d": 0.2 / 63,
    }
    assert scores.keys() == expected.keys()
    for key, value in expected.items():
        assert scores[key] == pytest.approx(value, rel=1e-12), key
    # a = 0.035492 > c = 0.035281 > b = 0.032522 > d = 0.003175: the centrality leg's
    # 0.2 / 61 lifts c above b although b wins the lexical leg.
    assert sorted(scores, key=lambda k: -scores[k]) == ["a", "c", "b", "d"]


def test_rrf_contributions_per_leg_hand_computed() -> None:
    parts = rrf_contributions(RANKS, W)
    assert parts["a"] == pytest.approx(
        {Leg.SEMANTIC: 1 / 61, Leg.LEXICAL: 1 / 63, Leg.CENTRALITY: 0.2 / 62}
    )
    # b is not ranked by centrality: no entry for that leg at all (adds nothing).
    assert set(parts["b"]) == {Leg.SEMANTIC, Leg.LEXICAL}
    assert parts["b"] == pytest.approx({Leg.SEMANTIC: 1 / 62, Leg.LEXICAL: 1 / 61})
    assert parts["d"] == pytest.approx({Leg.CENTRALITY: 0.2 / 63})


def test_rrf_custom_k() -> None:
    scores = rrf({Leg.SEMANTIC: {"a": 1, "b": 2}, Leg.LEXICAL: {"b": 1}}, W, k=1)
    assert scores["a"] == pytest.approx(1 / 2)
    assert scores["b"] == pytest.approx(1 / 3 + 1 / 2)


def test_rrf_unranked_leg_adds_nothing() -> None:
    only_semantic = rrf({Leg.SEMANTIC: {"x": 2}}, W)
    with_empty_legs = rrf({Leg.SEMANTIC: {"x": 2}, Leg.LEXICAL: {}, Leg.CENTRALITY: {"y": 1}}, W)
    assert only_semantic == {"x": pytest.approx(1 / 62)}
    assert with_empty_legs["x"] == pytest.approx(1 / 62)
    assert with_empty_legs["y"] == pytest.approx(0.2 / 61)


def test_rrf_zero_weight_drops_leg() -> None:
    weights = {Leg.SEMANTIC: 1.0, Leg.LEXICAL: 0.0, Leg.CENTRALITY: 0.2}
    scores = rrf(RANKS, weights)
    assert scores["a"] == pytest.approx(1 / 61 + 0.2 / 62)
    assert scores["b"] == pytest.approx(1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 0.2 / 61)
    parts = rrf_contributions(RANKS, weights)
    assert all(Leg.LEXICAL not in p for p in parts.values())


def test_rrf_missing_weight_counts_as_zero_and_item_only_in_dropped_leg_vanishes() -> None:
    scores = rrf(RANKS, {Leg.SEMANTIC: 1.0})
    assert scores == {
        "a": pytest.approx(1 / 61),
        "b": pytest.approx(1 / 62),
        "c": pytest.approx(1 / 63),
    }
    assert "d" not in scores


def test_rrf_weights_scale_linearly() -> None:
    scores = rrf({Leg.SEMANTIC: {"a": 4}}, {Leg.SEMANTIC: 2.5})
    assert scores["a"] == pytest.approx(2.5 / 64)


def test_rrf_empty() -> None:
    assert rrf({}, W) == {}
    assert rrf({Leg.SEMANTIC: {}}, W) == {}


# -- decay ----------------------------------------------------------------------------------
def test_decay_factor_age_zero_is_one() -> None:
    assert decay_factor(0.0, 365.0, 0.8) == 1.0
    assert decay_factor(0.0, 365.0, 0.0) == 1.0


def test_decay_factor_never_underflows_to_zero() -> None:
    tiny = decay_factor(1e6, 1e-300, 0.0)
    assert tiny == MIN_DECAY_FACTOR
    assert apply_decay(-0.5, tiny) == pytest.approx(-0.5e12)
    assert apply_decay(0.5, tiny) > apply_decay(0.25, tiny) > 0


def test_decay_factor_one_half_life() -> None:
    assert decay_factor(365.0, 365.0, 0.0) == pytest.approx(0.5)
    # 0.5 is below the default floor 0.8: clamped.
    assert decay_factor(365.0, 365.0, 0.8) == pytest.approx(0.8)


def test_decay_factor_two_half_lives() -> None:
    assert decay_factor(730.0, 365.0, 0.0) == pytest.approx(0.25)
    assert decay_factor(20.0, 10.0, 0.1) == pytest.approx(0.25)
    assert decay_factor(730.0, 365.0, 0.8) == pytest.approx(0.8)


def test_decay_factor_partial_half_life_hand_computed() -> None:
    # 73 days of a 365-day half-life: 0.5 ** 0.2 = 0.8705505632961241 (> floor 0.8).
    assert decay_factor(73.0, 365.0, 0.8) == pytest.approx(0.5**0.2)
    assert decay_factor(73.0, 365.0, 0.8) == pytest.approx(0.8705505632961241)


def test_decay_factor_negative_age_not_boosted() -> None:
    assert decay_factor(-1000.0, 365.0, 0.0) == 1.0
    assert decay_factor(-0.001, 1.0, 0.8) == 1.0


@pytest.mark.parametrize("half_life", [0.0, -1.0, -365.0])
def test_decay_factor_bad_half_life(half_life: float) -> None:
    with pytest.raises(ValueError, match="half_life"):
        decay_factor(1.0, half_life, 0.8)


@pytest.mark.parametrize("floor", [-0.01, 1.01, 2.0])
def test_decay_factor_bad_floor(floor: float) -> None:
    with pytest.raises(ValueError, match="floor"):
        decay_factor(1.0, 365.0, floor)


def test_decay_factor_floor_bounds_are_allowed() -> None:
    assert decay_factor(10_000.0, 1.0, 0.0) == MIN_DECAY_FACTOR  # as low as it goes
    assert decay_factor(10_000.0, 1.0, 1.0) == 1.0


def test_apply_decay_positive_score() -> None:
    assert apply_decay(0.6, 0.5) == pytest.approx(0.3)
    assert apply_decay(0.6, 1.0) == 0.6
    assert apply_decay(0.0, 0.5) == 0.0


def test_apply_decay_negative_score_is_not_raised() -> None:
    # A cosine below zero: multiplying by 0.5 would give -0.2 (higher); dividing gives -0.8.
    assert apply_decay(-0.4, 0.5) == pytest.approx(-0.8)
    assert apply_decay(-0.4, 0.5) < -0.4
    assert apply_decay(-0.4, 1.0) == -0.4


def test_apply_decay_keeps_order_between_fresh_and_stale() -> None:
    # The same raw score: the stale one ranks below, whatever the sign.
    for raw in (0.7, 0.01, -0.01, -0.7):
        assert apply_decay(raw, 0.8) <= apply_decay(raw, 1.0)
        assert apply_decay(raw, 0.8) < raw or raw == 0.0


# -- ranks ----------------------------------------------------------------------------------
def test_ranks_by_score_highest_first_one_based() -> None:
    assert ranks_by_score({"a": 0.1, "b": 0.9, "c": 0.5}) == {"b": 1, "c": 2, "a": 3}


def test_ranks_by_score_ties_broken_by_id() -> None:
    ranks = ranks_by_score({"zeta": 0.5, "alpha": 0.5, "mid": 0.5, "top": 0.9})
    assert ranks == {"top": 1, "alpha": 2, "mid": 3, "zeta": 4}


def test_ranks_by_score_negative_scores_and_empty() -> None:
    assert ranks_by_score({"a": -0.2, "b": -0.1}) == {"b": 1, "a": 2}
    assert ranks_by_score({}) == {}


def test_centrality_ranks_every_candidate_once_the_graph_says_something() -> None:
    ranks = centrality_ranks({"a": 3.0, "b": 0.0, "c": 1.0}, {"a": 1, "b": 2, "c": 3})
    # b has no edge: the least central, not left out (which would make it worse off than
    # any connected candidate by a whole leg).
    assert ranks == {"a": 1, "c": 2, "b": 3}


def test_disconnected_best_match_is_not_overtaken_for_being_unconnected() -> None:
    # A sparse graph: only the 20th semantic candidate has an edge. With the 0.2 default
    # weight, the best semantic match must stay first, and the connected candidate may
    # move up a little, not a dozen places.
    semantic = {f"d{i:02d}": i for i in range(1, 31)}
    centrality = dict.fromkeys(semantic, 0.0) | {"d20": 1.0}
    weights = {Leg.SEMANTIC: 1.0, Leg.CENTRALITY: 0.2}
    fused = rrf(
        {Leg.SEMANTIC: semantic, Leg.CENTRALITY: centrality_ranks(centrality, semantic)}, weights
    )
    order = sorted(fused, key=lambda key: (-fused[key], key))
    assert order[0] == "d01"
    assert order.index("d20") >= 15


def test_centrality_ranks_ties_by_semantic_rank_then_id() -> None:
    centrality = {"a": 2.0, "b": 2.0, "c": 2.0, "d": 5.0, "e": 2.0, "f": 2.0}
    semantic = {"a": 4, "b": 1, "c": 3, "d": 2}  # e and f not ranked semantically
    ranks = centrality_ranks(centrality, semantic)
    # d has the highest degree; then the 2.0-tie by semantic rank b(1) < c(3) < a(4);
    # e, f have no semantic rank (sorted after every ranked one), then by id.
    assert ranks == {"d": 1, "b": 2, "c": 3, "a": 4, "e": 5, "f": 6}


def test_centrality_ranks_no_graph_changes_nothing() -> None:
    assert centrality_ranks({"a": 0.0, "b": 0.0}, {"a": 1, "b": 2}) == {}
    assert centrality_ranks({}, {}) == {}
    semantic = {"a": 1, "b": 2}
    with_graph_leg = rrf(
        {Leg.SEMANTIC: semantic, Leg.CENTRALITY: centrality_ranks({"a": 0.0}, semantic)}, W
    )
    assert with_graph_leg == rrf({Leg.SEMANTIC: semantic}, W)


# -- properties -----------------------------------------------------------------------------
_ids = st.sampled_from(list("abcdefgh"))
_leg_ranks = st.lists(_ids, unique=True, max_size=8).map(
    lambda keys: {key: position for position, key in enumerate(keys, start=1)}
)
_all_ranks = st.fixed_dictionaries(dict.fromkeys(Leg, _leg_ranks))
_weights = st.fixed_dictionaries({leg: st.floats(0.0, 5.0, allow_nan=False) for leg in Leg})


@given(
    ranks=_all_ranks,
    weights=_weights,
    leg=st.sampled_from(list(Leg)),
    item=_ids,
    better=st.integers(1, 50),
)
def test_rrf_monotone_in_rank(
    ranks: dict[Leg, dict[str, int]],
    weights: dict[Leg, float],
    leg: Leg,
    item: str,
    better: int,
) -> None:
    """Improving an item's rank in one leg (or adding it to a leg) never lowers its score."""
    before = rrf(ranks, weights).get(item, 0.0)
    current = ranks[leg].get(item)
    new_rank = better if current is None else max(1, min(better, current))
    improved = {key: dict(value) for key, value in ranks.items()}
    improved[leg][item] = new_rank
    after = rrf(improved, weights).get(item, 0.0)
    assert after >= before - 1e-15


@given(ranks=_all_ranks, weights=_weights)
def test_rrf_equals_sum_of_contributions_and_is_bounded(
    ranks: dict[Leg, dict[str, int]], weights: dict[Leg, float]
) -> None:
    scores = rrf(ranks, weights)
    parts = rrf_contributions(ranks, weights)
    assert scores.keys() == parts.keys()
    for key, value in scores.items():
        assert value == pytest.approx(math.fsum(parts[key].values()))
        assert 0.0 <= value <= sum(weights.values()) / (RRF_K + 1) + 1e-12


@given(
    raw=st.floats(-1e6, 1e6, allow_nan=False),
    factor=st.floats(1e-6, 1.0, allow_nan=False),
)
def test_apply_decay_never_raises_a_score(raw: float, factor: float) -> None:
    assert apply_decay(raw, factor) <= raw


@given(
    age=st.floats(-1e5, 1e5, allow_nan=False),
    older=st.floats(0.0, 1e5, allow_nan=False),
    half_life=st.floats(0.01, 1e4, allow_nan=False),
    floor=st.floats(0.0, 1.0, allow_nan=False),
)
def test_decay_factor_bounded_and_non_increasing_in_age(
    age: float, older: float, half_life: float, floor: float
) -> None:
    factor = decay_factor(age, half_life, floor)
    assert floor <= factor <= 1.0
    assert decay_factor(age + older, half_life, floor) <= factor


@given(scores=st.dictionaries(_ids, st.floats(-1.0, 1.0, allow_nan=False), max_size=8))
def test_ranks_by_score_is_a_permutation_ordered_by_score(scores: dict[str, float]) -> None:
    ranks = ranks_by_score(scores)
    assert sorted(ranks.values()) == list(range(1, len(scores) + 1))
    for x in scores:
        for y in scores:
            if scores[x] > scores[y]:
                assert ranks[x] < ranks[y]
