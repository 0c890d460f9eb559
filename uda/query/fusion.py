"""Ranking arithmetic: version decay, per-leg ranks, weighted Reciprocal Rank Fusion.

Pure functions over plain data. Decay multiplies a leg's raw scores *before* that leg is
ranked (see docs/adr/0004-decay-before-ranking.md): RRF scores are too compressed for a
multiplicative factor applied after fusion to do anything but sort by recency. How the legs'
ranks are combined is a `Fusion` (LanceDB's `Reranker` idea); the planner's is
`ReciprocalRankFusion`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

RRF_K = 60
SECONDS_PER_DAY = 86_400.0


class Leg(StrEnum):
    """A ranked signal that fusion combines."""

    SEMANTIC = "semantic"
    LEXICAL = "lexical"
    CENTRALITY = "centrality"


DEFAULT_WEIGHTS: Mapping[Leg, float] = {
    Leg.SEMANTIC: 1.0,
    Leg.LEXICAL: 1.0,
    # Degree says how connected a node is, not whether it answers: start low (docs/design.md).
    Leg.CENTRALITY: 0.2,
}


MIN_DECAY_FACTOR = 1e-12


def decay_factor(age_days: float, half_life_days: float, floor: float) -> float:
    """`max(floor, 0.5 ** (age / half_life))`; a state from the future is not boosted.

    Never below `MIN_DECAY_FACTOR`, even with floor 0: a factor that underflows to zero
    would erase the order among old results (and divide a negative score by zero).
    """
    if half_life_days <= 0:
        raise ValueError("half_life_days must be positive")
    if not 0.0 <= floor <= 1.0:
        raise ValueError("floor must be within [0, 1]")
    age = max(age_days, 0.0)
    return max(floor, 0.5 ** (age / half_life_days), MIN_DECAY_FACTOR)


def apply_decay(raw: float, factor: float) -> float:
    """Scale a raw relevance score by a decay factor in (0, 1], always towards 'less relevant'.

    Multiplying a negative score (a cosine below zero) by a factor below one would raise it,
    so negative scores are divided instead: staleness never helps.
    """
    return raw * factor if raw >= 0 else raw / factor


def ranks_by_score(scores: Mapping[str, float]) -> dict[str, int]:
    """1-based ranks by score, highest first; ties broken by element id (deterministic)."""
    ordered = sorted(scores, key=lambda key: (-scores[key], key))
    return {key: position for position, key in enumerate(ordered, start=1)}


def centrality_ranks(
    centrality: Mapping[str, float], semantic_ranks: Mapping[str, int]
) -> dict[str, int]:
    """1-based ranks by centrality, highest first, of every candidate - if any has some.

    Ties (zero included): better semantic rank first, then element id (docs/design.md). A
    candidate outside the graph is the *least* central, not unranked: leaving it out would
    hand every connected candidate a bonus no disconnected one can match, and in a sparse
    graph the few connected candidates would jump a dozen dense ranks for being connected
    (measured: hotpotqa R@2 0.94 -> 0.56). When no candidate has any centrality the leg
    carries no signal and ranks nothing, so a corpus without a graph changes nothing.
    """
    if not any(value > 0 for value in centrality.values()):
        return {}
    unranked = len(semantic_ranks) + 1
    ranked = sorted(
        centrality, key=lambda key: (-centrality[key], semantic_ranks.get(key, unranked), key)
    )
    return {key: position for position, key in enumerate(ranked, start=1)}


def rrf_contributions(
    ranks: Mapping[Leg, Mapping[str, int]],
    weights: Mapping[Leg, float],
    k: int = RRF_K,
) -> dict[str, dict[Leg, float]]:
    """Each candidate's contribution from each leg: `w_leg / (k + rank_leg)`.

    A leg that does not rank a candidate adds nothing for it.
    """
    contributions: dict[str, dict[Leg, float]] = {}
    for leg, leg_ranks in ranks.items():
        weight = weights.get(leg, 0.0)
        if weight == 0.0:
            continue
        for key, rank in leg_ranks.items():
            contributions.setdefault(key, {})[leg] = weight / (k + rank)
    return contributions


def rrf(
    ranks: Mapping[Leg, Mapping[str, int]],
    weights: Mapping[Leg, float],
    k: int = RRF_K,
) -> dict[str, float]:
    """Weighted Reciprocal Rank Fusion: `score(d) = sum_m w_m / (k + rank_m(d))`."""
    return {key: sum(parts.values()) for key, parts in rrf_contributions(ranks, weights, k).items()}


class Fusion(Protocol):
    """How the planner combines the legs' ranks into one score per candidate.

    A fusion gives each candidate's contribution from each leg, and a candidate's score is
    the sum of its contributions: that is what lets `explain()` say what every leg added.
    """

    def contributions(
        self, ranks: Mapping[Leg, Mapping[str, int]], weights: Mapping[Leg, float]
    ) -> dict[str, dict[Leg, float]]:
        """Each candidate's contribution from each leg.

        Args:
            ranks: per leg, the 1-based rank of each candidate that leg ranks.
            weights: per leg, the plan's weight (a leg without one weighs nothing).

        Returns:
            Per candidate, per leg that adds something for it, the amount added.
        """
        ...


@dataclass(frozen=True)
class ReciprocalRankFusion:
    """Weighted Reciprocal Rank Fusion (`rrf_contributions`): the planner's fusion.

    Args:
        k: the RRF constant; larger flattens the difference between neighbouring ranks.
    """

    k: int = RRF_K

    def contributions(
        self, ranks: Mapping[Leg, Mapping[str, int]], weights: Mapping[Leg, float]
    ) -> dict[str, dict[Leg, float]]:
        """Each candidate's contribution from each leg: `w_leg / (k + rank_leg)`."""
        return rrf_contributions(ranks, weights, self.k)
