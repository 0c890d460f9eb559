"""Ranking the candidates of one search: decay, each leg's ranks, centrality, fusion.

Pure functions over what phase 3 has read (no I/O): every leg's raw scores are decayed
before they are ranked (ADR 4), the centrality leg is degree or PageRank over the visible
subgraph, and the fusion (`uda.query.fusion.Fusion`, RRF by default) turns ranks into
scores. The candidates linked to a graph node the query names (`uda.query.entities`) then
rank as one more leg, in the order of that fusion (ADR 47). Perfect matches
(`uda.query.exact`: the name equals the query, or a quoted phrase or an identifier of the
query occurs verbatim) then get a boost above any fused score, so they rank first.
`Evidence` keeps every leg's figures, and the match, for `explain()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from connectors.contract.records import GraphEdge
from connectors.contract.system_of_record import StateHead, StoredState
from uda.query.entities import linked_candidates
from uda.query.exact import ExactMatch, ExactQuery, exact_boost
from uda.query.fusion import (
    SECONDS_PER_DAY,
    Fusion,
    Leg,
    apply_decay,
    attribute_joint_contributions,
    centrality_ranks,
    decay_factor,
    joint_relevance_ranks,
    ranks_by_score,
)
from uda.query.graph_context import (
    Adjacency,
    ContextHop,
    SeedLeg,
    degree_centrality,
    pagerank_centrality,
    restart_weights,
)
from uda.query.plan import Plan
from uda.query.rows import RankedResult


@dataclass(kw_only=True)
class Evidence:
    """Every leg's evidence on the candidates of one search, and their fused scores."""

    semantic_raw: Mapping[str, tuple[float, str]]  # raw score and best chunk, visible only
    lexical_raw: Mapping[str, tuple[float, str]]
    decay: Mapping[str, float]
    semantic: Mapping[str, float]  # decayed
    lexical: Mapping[str, float]
    centrality: Mapping[str, float]
    ranks: Mapping[Leg, Mapping[str, int]]
    contributions: Mapping[str, Mapping[Leg, float]]
    scores: Mapping[str, float]  # fused, plus the boost of a perfect match
    matches: Mapping[str, ExactMatch]  # the perfect matches
    boost: float  # what a perfect match adds to its fused score
    # Per candidate linked to a graph node the query names: those nodes' names.
    entities: Mapping[str, tuple[str, ...]] = field(default_factory=dict[str, tuple[str, ...]])

    def best(self, candidates: Sequence[str], limit: int) -> list[str]:
        """The `limit` best candidates, by score, then element id (deterministic).

        A perfect match's score is its fused score plus `boost`, which is above every fused
        score: perfect matches come first, in the order of their fused scores.
        """
        return sorted(candidates, key=lambda eid: (-self.scores[eid], eid))[:limit]

    def result(
        self, state: StoredState, context: Sequence[tuple[ContextHop, StoredState]]
    ) -> RankedResult:
        """One ranked candidate as a result, with its context."""
        eid = state.element_id
        semantic_raw = self.semantic_raw.get(eid)
        lexical_raw = self.lexical_raw.get(eid)
        return RankedResult(
            state=state,
            score=self.scores[eid],
            snippet=(semantic_raw or lexical_raw or (0.0, ""))[1],
            decay=self.decay[eid],
            semantic_raw=None if semantic_raw is None else semantic_raw[0],
            lexical_raw=None if lexical_raw is None else lexical_raw[0],
            semantic_score=self.semantic.get(eid),
            lexical_score=self.lexical.get(eid),
            centrality=self.centrality.get(eid, 0.0),
            ranks={leg: r[eid] for leg, r in self.ranks.items() if eid in r},
            contributions=self.contributions.get(eid, {}),
            context=context,
            exact=self.matches.get(eid),
            boost=self.boost if eid in self.matches else 0.0,
            entities=self.entities.get(eid, ()),
        )


def rank(
    plan: Plan,
    fusion: Fusion,
    candidates: Sequence[str],
    states: Mapping[str, StateHead],
    semantic_raw: Mapping[str, tuple[float, str]],
    lexical_raw: Mapping[str, tuple[float, str]],
    seen_edges: Sequence[GraphEdge],
    adj: Adjacency,
    names: Mapping[str, str] | None = None,
) -> Evidence:
    """Decay each leg's raw scores, rank every leg, fuse the ranks, boost perfect matches.

    Perfect matches are looked for among `candidates` only, which phase 3 has already
    cleared: a match never brings in anything the caller may not see. `names` are the
    visible nodes' names, for the query-entity leg (none: the leg ranks nothing).
    """
    decay = {eid: _decay(plan, states[eid]) for eid in candidates}
    semantic = _decayed(semantic_raw, decay, candidates)
    lexical = _decayed(lexical_raw, decay, candidates)
    semantic_ranks = ranks_by_score(semantic)
    centrality = _centrality(plan, candidates, seen_edges, adj, semantic, lexical)
    ranks = {
        Leg.SEMANTIC: semantic_ranks,
        Leg.LEXICAL: ranks_by_score(lexical),
        Leg.CENTRALITY: centrality_ranks(centrality, semantic_ranks),
    }
    contributions = _contributions(plan, fusion, ranks, semantic, lexical)
    fused = {eid: sum(contributions.get(eid, {}).values()) for eid in candidates}
    entities = _query_entities(plan, candidates, adj, names)
    if entities:
        ranks[Leg.ENTITY] = ranks_by_score({eid: fused[eid] for eid in entities})
        linked = fusion.contributions({Leg.ENTITY: ranks[Leg.ENTITY]}, plan.weights)
        for eid, part in linked.items():
            contributions.setdefault(eid, {}).update(part)
            fused[eid] += sum(part.values())
    matches = _perfect_matches(plan, candidates, states, semantic_raw, lexical_raw)
    boost = exact_boost(fusion, plan.weights, fused.values()) if matches else 0.0
    return Evidence(
        semantic_raw=semantic_raw,
        lexical_raw=lexical_raw,
        decay=decay,
        semantic=semantic,
        lexical=lexical,
        centrality=centrality,
        ranks=ranks,
        contributions=contributions,
        scores={eid: fused[eid] + boost if eid in matches else fused[eid] for eid in candidates},
        matches=matches,
        boost=boost,
        entities=entities,
    )


def _query_entities(
    plan: Plan,
    candidates: Sequence[str],
    adj: Adjacency,
    names: Mapping[str, str] | None,
) -> dict[str, tuple[str, ...]]:
    """The candidates linked to a node the query names, if the entity leg weighs anything."""
    if not names or not plan.request.query or plan.weights.get(Leg.ENTITY, 0.0) <= 0.0:
        return {}
    return linked_candidates(plan.request.query, candidates, adj, names)


def _contributions(
    plan: Plan,
    fusion: Fusion,
    ranks: Mapping[Leg, Mapping[str, int]],
    semantic: Mapping[str, float],
    lexical: Mapping[str, float],
) -> dict[str, dict[Leg, float]]:
    """The fusion's contributions: with `relevance="scores"`, the retrieval legs' joint rank.

    `Evidence.ranks` keeps each leg's own rank for `explain()`; only the fusion sees the
    joint one.
    """
    joint = (
        joint_relevance_ranks(semantic, lexical, plan.weights)
        if plan.relevance == "scores"
        else None
    )
    if joint is None:
        return fusion.contributions(ranks, plan.weights)
    fused_ranks = {**ranks, Leg.SEMANTIC: joint, Leg.LEXICAL: joint}
    return attribute_joint_contributions(
        fusion.contributions(fused_ranks, plan.weights), semantic, lexical
    )


def _perfect_matches(
    plan: Plan,
    candidates: Sequence[str],
    states: Mapping[str, StateHead],
    semantic_raw: Mapping[str, tuple[float, str]],
    lexical_raw: Mapping[str, tuple[float, str]],
) -> dict[str, ExactMatch]:
    """The candidates that match the query perfectly: by name, or in a leg's best chunk."""
    exact = ExactQuery.of(plan.request.query)
    out: dict[str, ExactMatch] = {}
    for eid in candidates:
        texts = [raw[eid][1] for raw in (semantic_raw, lexical_raw) if eid in raw]
        found = exact.match(states[eid].name, texts)
        if found is not None:
            out[eid] = found
    return out


def _decayed(
    raw: Mapping[str, tuple[float, str]], decay: Mapping[str, float], candidates: Sequence[str]
) -> dict[str, float]:
    """One leg's raw scores of the candidates, decayed (ADR 4: decay before ranking)."""
    return {e: apply_decay(raw[e][0], decay[e]) for e in candidates if e in raw}


def _centrality(
    plan: Plan,
    candidates: Sequence[str],
    seen_edges: Sequence[GraphEdge],
    adj: Adjacency,
    semantic: Mapping[str, float],
    lexical: Mapping[str, float],
) -> dict[str, float]:
    """The centrality leg's scores: PageRank seeded by the query, or degree."""
    if plan.centrality == "pagerank":
        restart = restart_weights(_seed_legs(plan, semantic, lexical))
        return pagerank_centrality(seen_edges, restart, candidates)
    return degree_centrality(adj, candidates)


def _seed_legs(
    plan: Plan, semantic: Mapping[str, float], lexical: Mapping[str, float]
) -> list[SeedLeg]:
    """PageRank seeds: each retrieval leg's scores, with the leg's weight as its share.

    Cosine similarities as they are; BM25 as a fraction of the best, since it has no fixed
    scale and the seed temperature assumes one. The lexical leg's best hit is often the
    passage that names the question's entity, and the walk should start there too, not
    only at the dense leg's best (ADR 43). Legs the request weighs at 0 seed nothing,
    unless no retrieval leg weighs anything: then each found leg seeds equally.
    """
    best = max(lexical.values(), default=0.0)
    legs: list[SeedLeg] = [
        (semantic, plan.weights.get(Leg.SEMANTIC, 0.0)),
        (
            {eid: score / best for eid, score in lexical.items()} if best > 0 else {},
            plan.weights.get(Leg.LEXICAL, 0.0),
        ),
    ]
    found = [(scores, share) for scores, share in legs if scores]
    if not any(share > 0 for _, share in found):
        return [(scores, 1.0) for scores, _ in found]
    return found


def _decay(plan: Plan, state: StateHead) -> float:
    if not plan.decay:
        return 1.0
    age_days = (plan.as_of_ms - state.timestamp_ms) / 1000 / SECONDS_PER_DAY
    return decay_factor(age_days, plan.half_life_days, plan.decay_floor)


__all__ = ["Evidence", "rank"]
