"""Ranking arithmetic: version decay, per-leg ranks, weighted Reciprocal Rank Fusion.

Pure functions over plain data. Decay multiplies a leg's raw scores *before* that leg is
ranked (see docs/adr/0004-decay-before-ranking.md): RRF scores are too compressed for a
multiplicative factor applied after fusion to do anything but sort by recency. How the legs'
ranks are combined is a `Fusion` (LanceDB's `Reranker` idea); the planner's is
`ReciprocalRankFusion`.

The two retrieval legs can first be fused by their *scores* (`joint_relevance_ranks`): each
leg's scores are standardised over this query's candidates (z-scores), combined in the
proportion of the legs' weights, and the one rank that comes out stands for both legs in the
fusion. A rank throws away how far ahead the best hits are; the scores keep it (Bruch et al.,
"An Analysis of Fusion Functions for Hybrid Retrieval", 2023). ADR 37 has the measurements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, Protocol

RRF_K = 60
SECONDS_PER_DAY = 86_400.0


class Leg(StrEnum):
    """A ranked signal that fusion combines."""

    SEMANTIC = "semantic"
    LEXICAL = "lexical"
    CENTRALITY = "centrality"
    # The candidates that are, or are one edge from, a graph node the query names
    # (`uda.query.entities`), in the order of the other legs' fusion (ADR 47).
    ENTITY = "entity"


DEFAULT_WEIGHTS: Mapping[Leg, float] = {
    Leg.SEMANTIC: 1.0,
    Leg.LEXICAL: 1.0,
    # Degree says how connected a node is, not whether it answers: start low (docs/design.md).
    Leg.CENTRALITY: 0.2,
    # A node the query names is as strong a clue as a retrieval leg; the context mode uses
    # it, the associative mode sets it to 0 (uda.query.auto.choice).
    Leg.ENTITY: 1.0,
}


MIN_DECAY_FACTOR = 1e-12

# How the semantic and lexical legs meet: by their scores first, or by their ranks only.
RelevanceFusion = Literal["scores", "ranks"]


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


def standard_scores(scores: Mapping[str, float]) -> dict[str, float]:
    """Each score as standard deviations from this set's mean (all 0 when they are equal)."""
    if not scores:
        return {}
    mean = sum(scores.values()) / len(scores)
    spread = math.sqrt(sum((v - mean) ** 2 for v in scores.values()) / len(scores))
    if spread == 0.0:
        return dict.fromkeys(scores, 0.0)
    return {key: (value - mean) / spread for key, value in scores.items()}


def joint_relevance_ranks(
    semantic: Mapping[str, float], lexical: Mapping[str, float], weights: Mapping[Leg, float]
) -> dict[str, int] | None:
    """One rank for the semantic and lexical legs, from their standardised scores.

    `w_s * z_s + w_l * z_l` (weights normalised to sum 1); a candidate one leg did not find
    gets that leg's lowest standard score: it scored at most what the leg's last hit scored.
    None when one leg weighs nothing or found nothing: there is nothing to fuse, and the
    legs' own ranks are the answer.
    """
    w_semantic = weights.get(Leg.SEMANTIC, 0.0)
    w_lexical = weights.get(Leg.LEXICAL, 0.0)
    if w_semantic <= 0.0 or w_lexical <= 0.0 or not semantic or not lexical:
        return None
    z_semantic, z_lexical = standard_scores(semantic), standard_scores(lexical)
    floor_semantic, floor_lexical = min(z_semantic.values()), min(z_lexical.values())
    share = w_semantic / (w_semantic + w_lexical)
    joint = {
        key: share * z_semantic.get(key, floor_semantic)
        + (1.0 - share) * z_lexical.get(key, floor_lexical)
        for key in z_semantic.keys() | z_lexical.keys()
    }
    return ranks_by_score(joint)


def attribute_joint_contributions(
    contributions: Mapping[str, Mapping[Leg, float]],
    semantic: Mapping[str, float],
    lexical: Mapping[str, float],
) -> dict[str, dict[Leg, float]]:
    """Contributions of a joint relevance rank, credited to the legs that found each candidate.

    The fusion gave each leg `w_leg / (k + joint rank)`; a candidate one leg did not find
    owes that share to the other leg, so it is moved there (the sum stays the same).
    """
    out: dict[str, dict[Leg, float]] = {}
    for key, parts in contributions.items():
        moved = dict(parts)
        for absent, present, found in (
            (Leg.LEXICAL, Leg.SEMANTIC, lexical),
            (Leg.SEMANTIC, Leg.LEXICAL, semantic),
        ):
            if key not in found and absent in moved:
                moved[present] = moved.get(present, 0.0) + moved.pop(absent)
        out[key] = moved
    return out


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
