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
from functools import cached_property

import numpy as np

from connectors.contract.records import GraphEdge
from connectors.contract.system_of_record import StateHead, StoredState
from uda.query.entities import linked_candidates
from uda.query.exact import ExactMatch, ExactQuery, MatchKind, exact_boost
from uda.query.fusion import (
    SECONDS_PER_DAY,
    Fusion,
    Leg,
    Mask,
    Ranks,
    Scores,
    apply_decay_column,
    attribute_joint,
    centrality_rank_column,
    decay_factor_column,
    joint_rank_column,
    score_ranks,
    tie_order,
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
class Column:
    """One leg's figure for each candidate (position i: candidate i), and where it has one."""

    values: Scores
    present: Mask

    def get(self, i: int) -> float | None:
        """Candidate i's figure, or None where the leg has none."""
        return float(self.values[i]) if self.present[i] else None

    def as_dict(self, ids: Sequence[str]) -> dict[str, float]:
        """The figures by id, of the candidates that have one."""
        values = self.values.tolist()
        return {ids[i]: values[i] for i in np.flatnonzero(self.present).tolist()}


@dataclass(kw_only=True)
class Evidence:
    """Every leg's evidence on the candidates of one search, and their fused scores.

    Held as columns aligned with `ids`: the planner reads the order (`best`) and the page's
    results (`result`), and nothing is made per candidate. The per-id mappings (`scores`,
    `ranks`, `contributions`, ...) are views for tests and tools, built when asked.
    """

    ids: Sequence[str]
    ties: Ranks  # each id's position in sorted order
    semantic_raw: Mapping[str, tuple[float, str | None]]  # raw score and best chunk, visible only
    lexical_raw: Mapping[str, tuple[float, str | None]]
    decay_column: Scores
    semantic_column: Column  # decayed
    lexical_column: Column
    centrality_column: Scores  # every candidate's (0 outside the graph)
    rank_columns: Mapping[Leg, Ranks]  # 0 where the leg ranks the candidate not
    contribution_columns: Mapping[Leg, Column]
    score_column: Scores  # fused, plus the boost of a perfect match
    matches: Mapping[str, ExactMatch]  # the perfect matches
    boost: float  # what a perfect match adds to its fused score
    # Per candidate linked to a graph node the query names: those nodes' names.
    entities: Mapping[str, tuple[str, ...]] = field(default_factory=dict[str, tuple[str, ...]])

    @cached_property
    def _position(self) -> dict[str, int]:
        return {eid: i for i, eid in enumerate(self.ids)}

    def best(self, limit: int) -> list[str]:
        """The `limit` best candidates, by score, then element id (deterministic).

        A perfect match's score is its fused score plus `boost`, which is above every fused
        score: perfect matches come first, in the order of their fused scores.
        """
        order = np.lexsort((self.ties, -self.score_column))[:limit]
        return [self.ids[int(i)] for i in order]

    def result(
        self,
        state: StoredState,
        context: Sequence[tuple[ContextHop, StoredState]],
        snippet: str | None = None,
    ) -> RankedResult:
        """One ranked candidate as a result, with its context.

        `snippet`: its best chunk's text, when the leg's hit came without it (ADR 53).
        """
        eid = state.element_id
        i = self._position[eid]
        semantic_raw = self.semantic_raw.get(eid)
        lexical_raw = self.lexical_raw.get(eid)
        if snippet is None:
            snippet = (semantic_raw or lexical_raw or (0.0, ""))[1] or ""
        return RankedResult(
            state=state,
            score=float(self.score_column[i]),
            snippet=snippet,
            decay=float(self.decay_column[i]),
            semantic_raw=None if semantic_raw is None else semantic_raw[0],
            lexical_raw=None if lexical_raw is None else lexical_raw[0],
            semantic_score=self.semantic_column.get(i),
            lexical_score=self.lexical_column.get(i),
            centrality=float(self.centrality_column[i]),
            ranks={leg: int(r[i]) for leg, r in self.rank_columns.items() if r[i] > 0},
            contributions={
                leg: value
                for leg, column in self.contribution_columns.items()
                if (value := column.get(i)) is not None
            },
            context=context,
            exact=self.matches.get(eid),
            boost=self.boost if eid in self.matches else 0.0,
            entities=self.entities.get(eid, ()),
        )

    # -- per-id views ------------------------------------------------------------------------
    @cached_property
    def scores(self) -> dict[str, float]:
        """Each candidate's score (fused, plus the boost of a perfect match)."""
        return dict(zip(self.ids, self.score_column.tolist(), strict=True))

    @cached_property
    def decay(self) -> dict[str, float]:
        """Each candidate's decay factor."""
        return dict(zip(self.ids, self.decay_column.tolist(), strict=True))

    @cached_property
    def semantic(self) -> dict[str, float]:
        """The decayed semantic scores of the candidates that leg found."""
        return self.semantic_column.as_dict(self.ids)

    @cached_property
    def lexical(self) -> dict[str, float]:
        """The decayed lexical scores of the candidates that leg found."""
        return self.lexical_column.as_dict(self.ids)

    @cached_property
    def centrality(self) -> dict[str, float]:
        """Each candidate's centrality."""
        return dict(zip(self.ids, self.centrality_column.tolist(), strict=True))

    @cached_property
    def ranks(self) -> dict[Leg, dict[str, int]]:
        """Per leg, the 1-based rank of each candidate it ranks."""
        return {
            leg: {self.ids[int(i)]: int(column[i]) for i in np.argsort(column) if column[i]}
            for leg, column in self.rank_columns.items()
        }

    @cached_property
    def contributions(self) -> dict[str, dict[Leg, float]]:
        """Per candidate, per leg that added something for it, the amount added."""
        out: dict[str, dict[Leg, float]] = {}
        for leg, column in self.contribution_columns.items():
            for eid, value in column.as_dict(self.ids).items():
                out.setdefault(eid, {})[leg] = value
        return out


def rank(
    plan: Plan,
    fusion: Fusion,
    candidates: Sequence[str],
    states: Mapping[str, StateHead],
    semantic_raw: Mapping[str, tuple[float, str | None]],
    lexical_raw: Mapping[str, tuple[float, str | None]],
    seen_edges: Sequence[GraphEdge],
    adj: Adjacency,
    names: Mapping[str, str] | None = None,
) -> Evidence:
    """Decay each leg's raw scores, rank every leg, fuse the ranks, boost perfect matches.

    Perfect matches are looked for among `candidates` only, which phase 3 has already
    cleared: a match never brings in anything the caller may not see. `names` are the
    visible nodes' names, for the query-entity leg (none: the leg ranks nothing).
    """
    ids = list(candidates)
    ties = tie_order(ids)
    decay = _decay(plan, ids, states)
    semantic = _decayed(semantic_raw, decay, ids)
    lexical = _decayed(lexical_raw, decay, ids)
    semantic_ranks = score_ranks(semantic.values, semantic.present, ties)
    centrality = _centrality(plan, ids, seen_edges, adj, semantic, lexical)
    ranks = {
        Leg.SEMANTIC: semantic_ranks,
        Leg.LEXICAL: score_ranks(lexical.values, lexical.present, ties),
        Leg.CENTRALITY: centrality_rank_column(centrality, semantic_ranks, ties),
    }
    contributions = _contributions(plan, fusion, ranks, semantic, lexical, ties)
    fused = np.zeros(len(ids))
    for column in contributions.values():
        fused = fused + np.where(column.present, column.values, 0.0)
    entities = _query_entities(plan, ids, adj, names)
    if entities:
        linked = np.fromiter((eid in entities for eid in ids), dtype=np.bool_, count=len(ids))
        ranks[Leg.ENTITY] = score_ranks(fused, linked, ties)
        for leg, values in fusion.leg_contributions(
            {Leg.ENTITY: ranks[Leg.ENTITY]}, plan.weights
        ).items():
            contributions[leg] = Column(values=values, present=ranks[Leg.ENTITY] > 0)
            fused = fused + np.where(ranks[Leg.ENTITY] > 0, values, 0.0)
    matches = _perfect_matches(plan, ids, states, semantic_raw, lexical_raw)
    boost = exact_boost(fusion, plan.weights, fused.tolist()) if matches else 0.0
    matched = np.fromiter((eid in matches for eid in ids), dtype=np.bool_, count=len(ids))
    return Evidence(
        ids=ids,
        ties=ties,
        semantic_raw=semantic_raw,
        lexical_raw=lexical_raw,
        decay_column=decay,
        semantic_column=semantic,
        lexical_column=lexical,
        centrality_column=centrality,
        rank_columns=ranks,
        contribution_columns=contributions,
        score_column=fused + np.where(matched, boost, 0.0),
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
    ranks: Mapping[Leg, Ranks],
    semantic: Column,
    lexical: Column,
    ties: Ranks,
) -> dict[Leg, Column]:
    """The fusion's contributions: with `relevance="scores"`, the retrieval legs' joint rank.

    `Evidence.rank_columns` keeps each leg's own rank for `explain()`; only the fusion sees
    the joint one, and what it gives a leg that did not find a candidate goes to the leg
    that did (`attribute_joint`).
    """
    joint = (
        joint_rank_column(
            semantic.values, semantic.present, lexical.values, lexical.present, plan.weights, ties
        )
        if plan.relevance == "scores"
        else None
    )
    fused_ranks = (
        dict(ranks) if joint is None else {**ranks, Leg.SEMANTIC: joint, Leg.LEXICAL: joint}
    )
    parts = fusion.leg_contributions(fused_ranks, plan.weights)
    out = {leg: Column(values=v, present=fused_ranks[leg] > 0) for leg, v in parts.items()}
    if joint is not None and Leg.SEMANTIC in parts and Leg.LEXICAL in parts:
        to_semantic, to_lexical = attribute_joint(
            parts[Leg.SEMANTIC], parts[Leg.LEXICAL], semantic.present, lexical.present
        )
        out[Leg.SEMANTIC] = Column(values=to_semantic, present=semantic.present)
        out[Leg.LEXICAL] = Column(values=to_lexical, present=lexical.present)
    return out


def _perfect_matches(
    plan: Plan,
    candidates: Sequence[str],
    states: Mapping[str, StateHead],
    semantic_raw: Mapping[str, tuple[float, str | None]],
    lexical_raw: Mapping[str, tuple[float, str | None]],
) -> dict[str, ExactMatch]:
    """The candidates that match the query perfectly: by name, or in a leg's best chunk."""
    exact = ExactQuery.of(plan.request.query)
    if not exact.terms:  # the name rule only: no text to search
        named = ExactMatch(kind=MatchKind.NAME, term=exact.folded)
        return {eid: named for eid in candidates if exact.names(states[eid].name)}
    out: dict[str, ExactMatch] = {}
    for eid in candidates:
        texts = [t for raw in (semantic_raw, lexical_raw) if eid in raw and (t := raw[eid][1])]
        found = exact.match(states[eid].name, texts)
        if found is not None:
            out[eid] = found
    return out


def _decayed(
    raw: Mapping[str, tuple[float, str | None]], decay: Scores, candidates: Sequence[str]
) -> Column:
    """One leg's raw scores of the candidates, decayed (ADR 4: decay before ranking)."""
    present = np.fromiter((e in raw for e in candidates), dtype=np.bool_, count=len(candidates))
    scores = np.fromiter(
        (raw[e][0] if e in raw else 0.0 for e in candidates),
        dtype=np.float64,
        count=len(candidates),
    )
    return Column(values=apply_decay_column(scores, decay), present=present)


def _centrality(
    plan: Plan,
    candidates: Sequence[str],
    seen_edges: Sequence[GraphEdge],
    adj: Adjacency,
    semantic: Column,
    lexical: Column,
) -> Scores:
    """The centrality leg's scores: PageRank seeded by the query, or degree."""
    if not adj and not seen_edges:
        return np.zeros(len(candidates))  # no graph around the candidates: nothing is central
    if plan.centrality == "pagerank":
        seeds = _seed_legs(plan, semantic.as_dict(candidates), lexical.as_dict(candidates))
        values = pagerank_centrality(seen_edges, restart_weights(seeds), candidates)
    else:
        values = degree_centrality(adj, candidates)
    return np.fromiter((values[c] for c in candidates), dtype=np.float64, count=len(candidates))


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


def _decay(plan: Plan, candidates: Sequence[str], states: Mapping[str, StateHead]) -> Scores:
    """Each candidate's decay factor, from its state's timestamp (1 without decay)."""
    if not plan.decay:
        return np.ones(len(candidates))
    stamps = np.fromiter(
        (states[eid].timestamp_ms for eid in candidates), dtype=np.int64, count=len(candidates)
    )
    age_days = (plan.as_of_ms - stamps) / 1000 / SECONDS_PER_DAY
    return decay_factor_column(age_days, plan.half_life_days, plan.decay_floor)


__all__ = ["Column", "Evidence", "rank"]
