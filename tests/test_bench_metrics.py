"""The benchmark metrics against values computed by hand."""

from __future__ import annotations

import math
import random

import pytest

from benchmarks.metrics import (
    dcg,
    latency_summary,
    mean_metric,
    ndcg_at_k,
    paired_bootstrap_interval,
    percentile,
    precision_at_k,
    ratio,
    recall_at_k,
    reciprocal_rank,
)


def test_dcg_discounts_by_log2_of_rank_plus_one() -> None:
    # 3/log2(2) + 2/log2(3) + 0 + 1/log2(5)
    assert dcg([3, 2, 0, 1]) == pytest.approx(3 + 2 / math.log2(3) + 1 / math.log2(5))


def test_ndcg_binary_by_hand() -> None:
    # Relevant at ranks 1 and 3: DCG = 1 + 1/2 = 1.5; ideal = 1 + 1/log2(3) = 1.63093.
    value = ndcg_at_k(["d1", "d2", "d3"], {"d1": 1, "d3": 1}, k=10)
    assert value == pytest.approx(1.5 / (1 + 1 / math.log2(3)))
    assert value == pytest.approx(0.919721, abs=1e-6)


def test_ndcg_graded_by_hand() -> None:
    # Gains 1, 2 in that order: 1 + 2/log2(3) = 2.26186; ideal 2 + 1/log2(3) = 2.63093.
    assert ndcg_at_k(["b", "a"], {"a": 2, "b": 1}, k=10) == pytest.approx(0.859719, abs=1e-6)


def test_ndcg_perfect_empty_and_cut() -> None:
    assert ndcg_at_k(["a", "b"], {"a": 1, "b": 1}, k=10) == pytest.approx(1.0)
    assert ndcg_at_k([], {"a": 1}, k=10) == 0.0
    assert ndcg_at_k(["x", "y"], {}, k=10) == 0.0  # nothing judged relevant
    # The relevant document at rank 3 is outside the cut at 2; the ideal is cut at 2 too.
    assert ndcg_at_k(["x", "y", "a"], {"a": 1}, k=2) == 0.0
    # Two relevant, k=1: ideal DCG@1 = 1, found at rank 1 -> 1.0.
    assert ndcg_at_k(["a", "x"], {"a": 1, "b": 1}, k=1) == pytest.approx(1.0)


def test_ndcg_counts_a_repeated_document_once_and_ignores_negative_grades() -> None:
    assert ndcg_at_k(["a", "a"], {"a": 1, "b": 1}, k=10) == pytest.approx(
        1 / (1 + 1 / math.log2(3))
    )
    assert ndcg_at_k(["n", "a"], {"a": 1, "n": -1}, k=10) == pytest.approx(1 / math.log2(3))


def test_recall_by_hand() -> None:
    relevant = {"a": 1, "b": 1, "c": 1}
    ranked = ["a", "x", "b", "y", "c"]
    assert recall_at_k(ranked, relevant, 1) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, relevant, 2) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, relevant, 3) == pytest.approx(2 / 3)
    assert recall_at_k(ranked, relevant, 5) == pytest.approx(1.0)
    assert recall_at_k(ranked, {"a", "z"}, 2) == pytest.approx(0.5)  # a set works too
    assert recall_at_k(ranked, {"a": 0}, 5) == 0.0  # grade 0 is not relevant


def test_precision_and_reciprocal_rank() -> None:
    assert precision_at_k(["a", "x", "b"], {"a", "b"}, 10) == pytest.approx(0.2)
    assert precision_at_k(["a", "x"], {"a", "b"}, 2) == pytest.approx(0.5)
    assert reciprocal_rank(["x", "y", "a"], {"a"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x", "y", "a"], {"a"}, k=2) == 0.0


def test_mean_metric_averages_over_judged_queries_missing_runs_score_zero() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    run = {"q1": ["a"], "q2": ["x", "b"], "q_unjudged": ["c"]}
    expected_ndcg = (1.0 + 1 / math.log2(3) + 0.0) / 3
    assert mean_metric(run, qrels, "ndcg", 10) == pytest.approx(expected_ndcg)
    assert mean_metric(run, qrels, "recall", 1) == pytest.approx(1 / 3)
    assert mean_metric(run, qrels, "recall", 2) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="unknown metric"):
        mean_metric(run, qrels, "map", 10)


def test_percentiles_interpolate_between_closest_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 50) == pytest.approx(2.5)
    assert percentile(values, 95) == pytest.approx(3.85)  # 3 + 0.85 * (4 - 3)
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile([7.0], 95) == 7.0
    summary = latency_summary([10.0, 20.0, 30.0])
    assert summary == {"p50_ms": 20.0, "p95_ms": pytest.approx(29.0), "mean_ms": 20.0, "n": 3.0}
    assert latency_summary([]) == {}


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="positive"):
        ndcg_at_k(["a"], {"a": 1}, k=0)
    with pytest.raises(ValueError, match="positive"):
        recall_at_k(["a"], {"a": 1}, 0)
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_ratio_is_none_when_undefined() -> None:
    assert ratio(10.0, 4.0) == pytest.approx(2.5)
    assert ratio(None, 4.0) is None
    assert ratio(1.0, 0.0) is None


def test_paired_bootstrap_interval_holds_the_mean_difference_and_narrows_with_queries() -> None:
    rng = random.Random(7)
    before = [rng.random() for _ in range(300)]
    after = [b + 0.01 + rng.gauss(0, 0.05) for b in before]
    low, high = paired_bootstrap_interval(before, after, seed=1)
    mean = sum(a - b for a, b in zip(after, before, strict=True)) / len(before)
    assert low < mean < high
    assert low > 0  # a shift of 0.01 with this noise is seen over 300 queries
    assert paired_bootstrap_interval(before, after, seed=1) == (low, high)  # deterministic
    few_low, few_high = paired_bootstrap_interval(before[:30], after[:30], seed=1)
    assert few_high - few_low > high - low
    assert paired_bootstrap_interval(before, before) == (0.0, 0.0)


@pytest.mark.parametrize(
    ("before", "after", "level", "message"),
    [
        ([], [], 0.95, "equally long"),
        ([0.1], [0.1, 0.2], 0.95, "equally long"),
        ([0.1], [0.2], 1.0, "level"),
        ([0.1], [0.2], 0.0, "level"),
    ],
)
def test_paired_bootstrap_interval_refuses_what_it_cannot_pair(
    before: list[float], after: list[float], level: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        paired_bootstrap_interval(before, after, level=level)
