"""How the planner uses the graph when a request does not say: a rule over the graph's shape.

Two ways of using a graph, measured on the benchmark sets (benchmarks/README.md, multi-hop):

- `context`: the graph is context. Expand one hop, either way first and then along the
  edges (a document reaches its repository, its decision, that decision's author), and add
  a light degree-centrality leg. The semantic and lexical legs meet by their scores
  (`uda.query.fusion.joint_relevance_ranks`, ADR 37), and the candidates linked to a graph
  node the query names rank as a leg of their own (`uda.query.entities`, ADR 47). Right
  for a documentation estate,
  where assets meet through hubs (a repository with hundreds of documents, a team): a walk
  through a hub reaches everything and tells nothing.
- `associative`: the graph says which assets belong together (passages that mention the
  same entity, pages that link each other). Walk two hops either way, let the assets
  reached compete as candidates, and rank by personalized PageRank seeded by the best
  matches of both retrieval legs (ADR 43), weighted `ASSOCIATIVE_CENTRALITY_WEIGHT`:
  16, the weight every multi-hop set's best on the four others and `uda tune`'s choice on
  every one of them (ADR 45).
  Default pipeline on the multi-hop sets, Recall@5 (ADR 36's run): 58.2 -> 68.8
  (hipporag_musique), 73.3 -> 80.8 (migres_2wiki). The legs
  meet by rank: fusing their scores first lost 1 to 1.5 points on three of the five sets
  (ADR 37).

The store is associative when some nodes join two or more assets and a walk through them
stays selective: at most `SELECTIVE_NEIGHBOURS` assets two hops from an asset on average.
The benchmark's entity and link graphs have 0.7 to 73; the synthetic documentation estate
has 270 (its repositories and components are hubs). Without bridges the graph cannot move
a ranking, and the `context` mode costs least.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from connectors.contract.graph_shape import GraphShape
from uda.query.contracts import Centrality, Traverse
from uda.query.fusion import Leg, RelevanceFusion

SELECTIVE_NEIGHBOURS = 100.0
# Chosen across sets, never on the set it is measured on (ADR 45): for each of the five
# multi-hop sets, the weight of `uda tune`'s grid with the best Recall@5 over the other four
# sets' questions is 16; `uda tune`'s pseudo-queries also choose 16 on every store. It was 4.
ASSOCIATIVE_CENTRALITY_WEIGHT = 16.0


class AutoMode(StrEnum):
    """A way of using the graph (see the module's docstring)."""

    CONTEXT = "context"
    ASSOCIATIVE = "associative"


@dataclass(frozen=True, kw_only=True)
class ModeSettings:
    """What a mode sets, for the options a request leaves unset."""

    expand_depth: int
    traverse: Traverse
    centrality: Centrality
    graph_candidates: bool
    centrality_weight: float | None  # None: the profile's weight
    relevance: RelevanceFusion  # how the semantic and lexical legs meet
    entity_weight: float | None = None  # the query-entity leg's (ADR 47); None: the profile's


_SETTINGS: Mapping[AutoMode, ModeSettings] = {
    AutoMode.CONTEXT: ModeSettings(
        expand_depth=1,
        traverse="context",
        centrality="degree",
        graph_candidates=False,
        centrality_weight=None,
        relevance="scores",
    ),
    AutoMode.ASSOCIATIVE: ModeSettings(
        expand_depth=2,
        traverse="association",
        centrality="pagerank",
        graph_candidates=True,
        centrality_weight=ASSOCIATIVE_CENTRALITY_WEIGHT,
        relevance="ranks",
        # Not measured on the multi-hop sets yet, where personalized PageRank already starts
        # from the legs' best matches (ADR 43): off until a run shows it earns its place.
        entity_weight=0.0,
    ),
}


@dataclass(frozen=True, kw_only=True)
class AutoChoice:
    """The mode chosen for a search, and why (shown by `explain()`)."""

    mode: AutoMode
    reason: str
    # The PageRank weight `uda tune` chose for the associative mode (None: the mode's own).
    tuned_weight: float | None = None

    @property
    def settings(self) -> ModeSettings:
        """What the mode sets."""
        return _SETTINGS[self.mode]

    @property
    def centrality_weight(self) -> float | None:
        """The centrality weight the mode sets (None: the profile's)."""
        if self.tuned_weight is not None and self.mode is AutoMode.ASSOCIATIVE:
            return self.tuned_weight
        return self.settings.centrality_weight

    def tuned(self, weight: float | None) -> AutoChoice:
        """This choice with the store's tuned weight, which only the associative mode uses."""
        if weight is None or self.mode is not AutoMode.ASSOCIATIVE:
            return self
        return replace(self, tuned_weight=weight)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for `explain()` and logs."""
        data: dict[str, Any] = {"mode": self.mode.value, "reason": self.reason}
        if self.tuned_weight is not None:
            data["tuned_centrality_weight"] = self.tuned_weight
        return data


def choose(shape: GraphShape | None) -> AutoChoice:
    """The mode for a store of this shape (None: not known yet, the cheaper mode).

    The reason names the rule, not the store's counts: a caller sees it in `explain()`, and
    counts over everything would tell a caller how much it may not see.
    """
    if shape is None:
        return AutoChoice(mode=AutoMode.CONTEXT, reason="the graph's shape is not known yet")
    if shape.bridges == 0:
        return AutoChoice(
            mode=AutoMode.CONTEXT, reason="no node of the graph joins two knowledge assets"
        )
    if shape.neighbours_per_asset > SELECTIVE_NEIGHBOURS:
        return AutoChoice(
            mode=AutoMode.CONTEXT,
            reason=(
                "assets meet through hubs: more than "
                f"{SELECTIVE_NEIGHBOURS:g} assets two hops from an asset on average"
            ),
        )
    return AutoChoice(
        mode=AutoMode.ASSOCIATIVE,
        reason=(
            "assets meet through shared nodes, selectively: at most "
            f"{SELECTIVE_NEIGHBOURS:g} assets two hops from an asset on average"
        ),
    )


STRUCTURED_CHOICE = AutoChoice(
    mode=AutoMode.CONTEXT, reason="a structured retrieval ranks nothing: the graph is context"
)


def profile_choice(mode: AutoMode) -> AutoChoice:
    """The mode the profile sets (`[search] graph_mode`)."""
    return AutoChoice(mode=mode, reason="the profile sets [search] graph_mode")


def pinned_choice(mode: AutoMode, tuned_weight: float | None = None) -> AutoChoice:
    """The mode a later page keeps: the first page's, whatever the shape or tuning is now."""
    choice = AutoChoice(mode=mode, reason="kept from the first page of this query")
    return choice.tuned(tuned_weight)


def choice_from_dict(data: Mapping[str, Any] | None) -> AutoChoice:
    """An `AutoChoice.to_dict()` back (None: a plan recorded before the automatic mode)."""
    if data is None:
        return AutoChoice(mode=AutoMode.CONTEXT, reason="recorded before the automatic mode")
    tuned = data.get("tuned_centrality_weight")
    return AutoChoice(
        mode=AutoMode(data["mode"]),
        reason=str(data["reason"]),
        tuned_weight=None if tuned is None else float(tuned),
    )


def leg_weight_overrides(choice: AutoChoice) -> Mapping[Leg, float]:
    """The weights the mode sets (applied below the profile's and the request's own)."""
    weights: dict[Leg, float] = {}
    if choice.centrality_weight is not None:
        weights[Leg.CENTRALITY] = choice.centrality_weight
    if choice.settings.entity_weight is not None:
        weights[Leg.ENTITY] = choice.settings.entity_weight
    return weights


__all__ = [
    "ASSOCIATIVE_CENTRALITY_WEIGHT",
    "SELECTIVE_NEIGHBOURS",
    "STRUCTURED_CHOICE",
    "AutoChoice",
    "AutoMode",
    "ModeSettings",
    "choice_from_dict",
    "choose",
    "leg_weight_overrides",
    "pinned_choice",
    "profile_choice",
]
