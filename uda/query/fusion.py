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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

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


# -- the candidate columns -------------------------------------------------------------------
# Phase 3 ranks a few hundred candidates per search. Each rule below is written once, over
# numpy columns aligned with the candidates (position i is candidate i), and the per-id
# functions further down (`ranks_by_score`, `rrf`, ...) are views of the same rules for
# callers that hold mappings. Sums run left to right as Python's `sum` does (not numpy's
# pairwise sum), so a score is the same float whichever form computed it.
Scores = npt.NDArray[np.float64]
Ranks = npt.NDArray[np.int64]  # 1-based rank of each candidate; 0 where the leg ranks none
Mask = npt.NDArray[np.bool_]


def decay_factor_column(age_days: Scores, half_life_days: float, floor: float) -> Scores:
    """`decay_factor` of each age."""
    if half_life_days <= 0:
        raise ValueError("half_life_days must be positive")
    if not 0.0 <= floor <= 1.0:
        raise ValueError("floor must be within [0, 1]")
    halved = np.power(0.5, np.maximum(age_days, 0.0) / half_life_days)
    return np.maximum(np.maximum(floor, halved), MIN_DECAY_FACTOR)


def apply_decay_column(raw: Scores, factor: Scores) -> Scores:
    """`apply_decay` of each score by its factor."""
    return np.where(raw >= 0, raw * factor, raw / factor)


def tie_order(ids: Sequence[str]) -> Ranks:
    """Each id's position in sorted order: the tie-break of every ranking (by element id)."""
    order = np.empty(len(ids), dtype=np.int64)
    order[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids), dtype=np.int64)
    return order


def score_ranks(scores: Scores, present: Mask, ties: Ranks) -> Ranks:
    """1-based ranks of the present candidates by score, highest first; ties by id."""
    where = np.flatnonzero(present)
    ordered = where[np.lexsort((ties[where], -scores[where]))]
    ranks = np.zeros(len(scores), dtype=np.int64)
    ranks[ordered] = np.arange(1, len(ordered) + 1, dtype=np.int64)
    return ranks


def centrality_rank_column(centrality: Scores, semantic_ranks: Ranks, ties: Ranks) -> Ranks:
    """1-based ranks of every candidate by centrality, highest first - if any has some.

    Ties (zero included): better semantic rank first, then element id (docs/design.md). A
    candidate outside the graph is the *least* central, not unranked: leaving it out would
    hand every connected candidate a bonus no disconnected one can match, and in a sparse
    graph the few connected candidates would jump a dozen dense ranks for being connected
    (measured: hotpotqa R@2 0.94 -> 0.56). When no candidate has any centrality the leg
    carries no signal and ranks nothing (all 0), so a corpus without a graph changes nothing.
    """
    if not bool(np.any(centrality > 0)):
        return np.zeros(len(centrality), dtype=np.int64)
    unranked = int(np.count_nonzero(semantic_ranks)) + 1
    semantic = np.where(semantic_ranks > 0, semantic_ranks, unranked)
    ordered = np.lexsort((ties, semantic, -centrality))
    ranks = np.empty(len(centrality), dtype=np.int64)
    ranks[ordered] = np.arange(1, len(ordered) + 1, dtype=np.int64)
    return ranks


def standard_column(scores: Scores, present: Mask) -> Scores:
    """The present scores as standard deviations from their mean (0 where all are equal).

    Only the present positions are meaningful in the result.
    """
    values = scores[present]
    if not len(values):
        return np.zeros(len(scores))
    mean = sum(values.tolist()) / len(values)
    spread = math.sqrt(sum(((values - mean) ** 2).tolist()) / len(values))
    if spread == 0.0:
        return np.zeros(len(scores))
    return (scores - mean) / spread


def joint_rank_column(
    semantic: Scores,
    semantic_present: Mask,
    lexical: Scores,
    lexical_present: Mask,
    weights: Mapping[Leg, float],
    ties: Ranks,
) -> Ranks | None:
    """One rank for the semantic and lexical legs, from their standardised scores.

    `w_s * z_s + w_l * z_l` (weights normalised to sum 1); a candidate one leg did not find
    gets that leg's lowest standard score: it scored at most what the leg's last hit scored.
    None when one leg weighs nothing or found nothing: there is nothing to fuse, and the
    legs' own ranks are the answer.
    """
    w_semantic = weights.get(Leg.SEMANTIC, 0.0)
    w_lexical = weights.get(Leg.LEXICAL, 0.0)
    if w_semantic <= 0.0 or w_lexical <= 0.0:
        return None
    if not bool(semantic_present.any()) or not bool(lexical_present.any()):
        return None
    z_semantic = standard_column(semantic, semantic_present)
    z_lexical = standard_column(lexical, lexical_present)
    z_semantic = np.where(semantic_present, z_semantic, z_semantic[semantic_present].min())
    z_lexical = np.where(lexical_present, z_lexical, z_lexical[lexical_present].min())
    share = w_semantic / (w_semantic + w_lexical)
    joint = share * z_semantic + (1.0 - share) * z_lexical
    return score_ranks(joint, semantic_present | lexical_present, ties)


def rrf_column(ranks: Ranks, weight: float, k: int = RRF_K) -> Scores:
    """One leg's contribution to each candidate: `w / (k + rank)`, 0 where it ranks none."""
    return np.where(ranks > 0, weight / (k + ranks), 0.0)


def attribute_joint(
    semantic: Scores, lexical: Scores, found_semantic: Mask, found_lexical: Mask
) -> tuple[Scores, Scores]:
    """Contributions of a joint relevance rank, credited to the legs that found each candidate.

    The fusion gave each leg `w_leg / (k + joint rank)`; a candidate one leg did not find
    owes that share to the other leg, so it is moved there (the sum stays the same).
    Returns the two legs' contributions; each counts only where its leg found the candidate.
    """
    both = semantic + lexical
    return (
        np.where(found_lexical, semantic, both),
        np.where(found_semantic, lexical, both),
    )


# -- the same rules, per id -------------------------------------------------------------------
def ranks_by_score(scores: Mapping[str, float]) -> dict[str, int]:
    """1-based ranks by score, highest first; ties broken by element id (deterministic)."""
    keys = list(scores)
    column = np.fromiter(scores.values(), dtype=np.float64, count=len(keys))
    ranks = score_ranks(column, np.ones(len(keys), dtype=np.bool_), tie_order(keys))
    return {keys[i]: int(ranks[i]) for i in np.argsort(ranks, kind="stable")}


def centrality_ranks(
    centrality: Mapping[str, float], semantic_ranks: Mapping[str, int]
) -> dict[str, int]:
    """`centrality_rank_column` per id: every candidate ranked, or none."""
    keys = list(centrality)
    ranks = centrality_rank_column(
        np.fromiter(centrality.values(), dtype=np.float64, count=len(keys)),
        np.fromiter((semantic_ranks.get(k, 0) for k in keys), dtype=np.int64, count=len(keys)),
        tie_order(keys),
    )
    if not ranks.any():
        return {}
    return {keys[i]: int(ranks[i]) for i in np.argsort(ranks, kind="stable")}


def standard_scores(scores: Mapping[str, float]) -> dict[str, float]:
    """Each score as standard deviations from this set's mean (all 0 when they are equal)."""
    keys = list(scores)
    column = np.fromiter(scores.values(), dtype=np.float64, count=len(keys))
    z = standard_column(column, np.ones(len(keys), dtype=np.bool_))
    return {key: float(value) for key, value in zip(keys, z.tolist(), strict=True)}


def joint_relevance_ranks(
    semantic: Mapping[str, float], lexical: Mapping[str, float], weights: Mapping[Leg, float]
) -> dict[str, int] | None:
    """`joint_rank_column` per id (None: nothing to fuse)."""
    keys = list(dict.fromkeys([*semantic, *lexical]))
    columns = [
        (
            np.fromiter((leg.get(k, 0.0) for k in keys), dtype=np.float64, count=len(keys)),
            np.fromiter((k in leg for k in keys), dtype=np.bool_, count=len(keys)),
        )
        for leg in (semantic, lexical)
    ]
    ranks = joint_rank_column(*columns[0], *columns[1], weights, tie_order(keys))
    if ranks is None:
        return None
    return {keys[i]: int(ranks[i]) for i in np.argsort(ranks, kind="stable")}


def attribute_joint_contributions(
    contributions: Mapping[str, Mapping[Leg, float]],
    semantic: Mapping[str, float],
    lexical: Mapping[str, float],
) -> dict[str, dict[Leg, float]]:
    """`attribute_joint` per id: a share a leg did not earn moves to the leg that did."""
    out: dict[str, dict[Leg, float]] = {}
    for key, parts in contributions.items():
        moved = dict(parts)
        if Leg.SEMANTIC in moved and Leg.LEXICAL in moved:
            found = np.array([key in semantic]), np.array([key in lexical])
            to_semantic, to_lexical = attribute_joint(
                np.array([moved[Leg.SEMANTIC]]), np.array([moved[Leg.LEXICAL]]), *found
            )
            moved[Leg.SEMANTIC], moved[Leg.LEXICAL] = float(to_semantic[0]), float(to_lexical[0])
            for leg, kept in ((Leg.SEMANTIC, found[0][0]), (Leg.LEXICAL, found[1][0])):
                if not kept:
                    del moved[leg]
        out[key] = moved
    return out


def rrf_contributions(
    ranks: Mapping[Leg, Mapping[str, int]],
    weights: Mapping[Leg, float],
    k: int = RRF_K,
) -> dict[str, dict[Leg, float]]:
    """Each candidate's contribution from each leg: `w_leg / (k + rank_leg)`.

    A leg that does not rank a candidate adds nothing for it; a leg that weighs 0 adds
    nothing at all.
    """
    contributions: dict[str, dict[Leg, float]] = {}
    for leg, leg_ranks in ranks.items():
        weight = weights.get(leg, 0.0)
        if weight == 0.0:
            continue
        column = np.fromiter(leg_ranks.values(), dtype=np.int64, count=len(leg_ranks))
        for key, value in zip(leg_ranks, rrf_column(column, weight, k).tolist(), strict=True):
            contributions.setdefault(key, {})[leg] = value
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
    It works on columns: phase 3 ranks hundreds of candidates per search.
    """

    def leg_contributions(
        self, ranks: Mapping[Leg, Ranks], weights: Mapping[Leg, float]
    ) -> dict[Leg, Scores]:
        """Each candidate's contribution from each leg.

        Args:
            ranks: per leg, the 1-based rank of each candidate (0: the leg ranks it not).
            weights: per leg, the plan's weight (a leg without one weighs nothing).

        Returns:
            Per leg that adds anything, each candidate's contribution; where the leg ranks
            the candidate not, nothing is added and the value is 0.
        """
        ...


@dataclass(frozen=True)
class ReciprocalRankFusion:
    """Weighted Reciprocal Rank Fusion (`rrf_column`): the planner's fusion.

    Args:
        k: the RRF constant; larger flattens the difference between neighbouring ranks.
    """

    k: int = RRF_K

    def leg_contributions(
        self, ranks: Mapping[Leg, Ranks], weights: Mapping[Leg, float]
    ) -> dict[Leg, Scores]:
        """Each leg's `w_leg / (k + rank_leg)` column; legs that weigh 0 add nothing."""
        return {
            leg: rrf_column(column, weights.get(leg, 0.0), self.k)
            for leg, column in ranks.items()
            if weights.get(leg, 0.0) != 0.0
        }

    def contributions(
        self, ranks: Mapping[Leg, Mapping[str, int]], weights: Mapping[Leg, float]
    ) -> dict[str, dict[Leg, float]]:
        """Per id: each candidate's contribution from each leg (`rrf_contributions`)."""
        return rrf_contributions(ranks, weights, self.k)
