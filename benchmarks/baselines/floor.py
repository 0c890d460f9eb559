"""The physical floor: the same search work in one process, on numpy, scipy and dicts.

Exact dense search (one matrix-vector product over every chunk), BM25 from a sparse
chunk x term matrix of precomputed weights (the terms of UDA's analyzer, Lucene idf),
clearance as a boolean mask per caller, graph expansion and degree over a dict adjacency,
decay on the raw scores, weighted RRF (k = 60), and context nodes for the results. No
persistence, no versions, no I/O: what a search costs at best on this machine.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy import sparse

from uda.query.clearance import Clearance

LEVELS = ("public", "internal", "confidential", "restricted")
RRF_K = 60
K1, B = 1.2, 0.75


@dataclass(kw_only=True)
class FlatCorpus:
    """Chunks with owners, owners with clearance and decay, and edges between elements."""

    vectors: npt.NDArray[np.float32]  # [chunks, dim], unit rows
    owner: npt.NDArray[np.int64]  # [chunks] -> index into asset_ids
    asset_ids: list[str]
    asset_rank: npt.NDArray[np.int8]
    asset_scope: list[str | None]
    texts: Sequence[str] | None = None  # per chunk, for BM25 (None: no lexical leg)
    asset_decay: npt.NDArray[np.float32] | None = None
    edges: Sequence[tuple[str, str]] = ()
    node_rank: Mapping[str, int] = field(default_factory=dict[str, int])
    node_scope: Mapping[str, str | None] = field(default_factory=dict[str, str | None])


@dataclass(frozen=True, kw_only=True)
class FloorHit:
    """One result of the floor."""

    element_id: str
    score: float
    context: tuple[str, ...]


class NumpyFloor:
    """In-process exact search over a `FlatCorpus`."""

    def __init__(self, corpus: FlatCorpus, *, bm25: bool = True) -> None:
        self.corpus = corpus
        self._index_of = {eid: i for i, eid in enumerate(corpus.asset_ids)}
        self._visible_cache: dict[tuple[int, frozenset[str], bool], npt.NDArray[np.bool_]] = {}
        self._adj: dict[str, list[str]] = {}
        for a, b in corpus.edges:
            self._adj.setdefault(a, []).append(b)
            if a != b:
                self._adj.setdefault(b, []).append(a)
        self._terms: dict[str, int] = {}
        self._bm25: sparse.csc_matrix | None = None
        if bm25 and corpus.texts is not None:
            self._bm25 = self._build_bm25(corpus.texts)

    # -- indexes --------------------------------------------------------------------------
    def _build_bm25(self, texts: Sequence[str]) -> sparse.csc_matrix:
        from connectors.analyzer import term_frequencies

        # Typed arrays, not lists: a 1M-chunk corpus has some 40M (chunk, term) pairs.
        rows = array("q")
        cols = array("q")
        tfs = array("f")
        lengths = np.zeros(len(texts), dtype=np.float32)
        for row, text in enumerate(texts):
            counts = term_frequencies(text)
            lengths[row] = sum(counts.values())
            for term, tf in counts.items():
                rows.append(row)
                cols.append(self._terms.setdefault(term, len(self._terms)))
                tfs.append(tf)
        n = len(texts)
        avg = float(lengths.mean()) if n else 1.0
        row_idx = np.frombuffer(rows, dtype=np.int64)
        col_idx = np.frombuffer(cols, dtype=np.int64)
        tf = np.frombuffer(tfs, dtype=np.float32)
        df = np.bincount(col_idx, minlength=len(self._terms)).astype(np.float64)
        idf = np.log(1 + (n - df + 0.5) / (df + 0.5)).astype(np.float32)
        norm = tf + K1 * (1 - B + B * lengths[row_idx] / max(avg, 1e-9))
        weights = idf[col_idx] * tf * (K1 + 1) / norm
        return sparse.csc_matrix((weights, (row_idx, col_idx)), shape=(n, len(self._terms)))

    def visible_assets(self, clearance: Clearance) -> npt.NDArray[np.bool_]:
        """Which assets the caller may see (cached per clearance)."""
        key = (clearance.level.rank, clearance.projects, clearance.all_projects)
        cached = self._visible_cache.get(key)
        if cached is None:
            c = self.corpus
            scoped = np.fromiter(
                (
                    s is None or clearance.all_projects or s in clearance.projects
                    for s in c.asset_scope
                ),
                dtype=np.bool_,
                count=len(c.asset_scope),
            )
            cached = (c.asset_rank <= clearance.level.rank) & scoped
            self._visible_cache[key] = cached
        return cached

    def _node_visible(self, node: str, clearance: Clearance, assets: npt.NDArray[np.bool_]) -> bool:
        index = self._index_of.get(node)
        if index is not None:
            return bool(assets[index])
        rank = self.corpus.node_rank.get(node, 0)
        return clearance.allows(LEVELS[rank], self.corpus.node_scope.get(node))

    # -- search ---------------------------------------------------------------------------
    def _top(
        self, scores: npt.NDArray[np.float32], chunk_mask: npt.NDArray[np.bool_], pool: int
    ) -> dict[int, float]:
        """Best `pool` visible chunks, collapsed to owners (best chunk wins)."""
        masked = np.where(chunk_mask, scores, -np.inf)
        take = min(pool, int(chunk_mask.sum()))
        if take <= 0:
            return {}
        top = np.argpartition(-masked, take - 1)[:take]
        top = top[np.argsort(-masked[top], kind="stable")]
        out: dict[int, float] = {}
        for chunk in top:
            score = float(masked[chunk])
            if score == -np.inf:
                break
            owner = int(self.corpus.owner[chunk])
            if owner not in out:
                out[owner] = score
        return out

    def search(
        self,
        vector: npt.NDArray[np.float32],
        query: str,
        *,
        limit: int = 10,
        depth: int = 1,
        clearance: Clearance | None = None,
        weights: Mapping[str, float] | None = None,
        pool: int | None = None,
        max_context: int = 25,
    ) -> list[FloorHit]:
        """The top `limit` visible elements with their context, as UDA's pipeline computes it."""
        clearance = clearance or Clearance.parse([])
        w = {"semantic": 1.0, "lexical": 1.0, "centrality": 0.2, **(weights or {})}
        pool = pool or max(10 * limit, 50)
        c = self.corpus
        assets = self.visible_assets(clearance)
        chunk_mask = assets[c.owner]
        legs: dict[str, dict[int, float]] = {}
        if w["semantic"] > 0:
            legs["semantic"] = self._top(c.vectors @ vector, chunk_mask, pool)
        if w["lexical"] > 0 and self._bm25 is not None:
            from connectors.analyzer import query_terms

            cols = [self._terms[t] for t in query_terms(query) if t in self._terms]
            if cols:
                scores = np.asarray(self._bm25[:, cols].sum(axis=1)).ravel()
                legs["lexical"] = self._top(scores, chunk_mask & (scores > 0), pool)
        if c.asset_decay is not None:
            decay = c.asset_decay
            legs = {
                leg: {
                    a: s * float(decay[a]) if s >= 0 else s / float(decay[a])
                    for a, s in hits.items()
                }
                for leg, hits in legs.items()
            }
        candidates = sorted({a for hits in legs.values() for a in hits})
        ids = [c.asset_ids[a] for a in candidates]
        adj = self._visible_adjacency(ids, depth, clearance, assets) if depth > 0 else {}
        ranks: dict[str, dict[str, int]] = {}
        for leg, hits in legs.items():
            ordered = sorted(hits, key=lambda a: (-hits[a], c.asset_ids[a]))
            ranks[leg] = {c.asset_ids[a]: r for r, a in enumerate(ordered, start=1)}
        if w["centrality"] > 0 and adj:
            degree = {e: len(adj.get(e, ())) for e in ids if adj.get(e)}
            semantic = ranks.get("semantic", {})
            unranked = len(semantic) + 1
            ordered_ids = sorted(degree, key=lambda e: (-degree[e], semantic.get(e, unranked), e))
            ranks["centrality"] = {e: r for r, e in enumerate(ordered_ids, start=1)}
        fused: dict[str, float] = {}
        for leg, leg_ranks in ranks.items():
            for eid, rank in leg_ranks.items():
                fused[eid] = fused.get(eid, 0.0) + w[leg] / (RRF_K + rank)
        best = sorted(fused, key=lambda e: (-fused[e], e))[:limit]
        return [
            FloorHit(
                element_id=e,
                score=fused[e],
                context=tuple(_context(e, adj, depth, max_context)),
            )
            for e in best
        ]

    def _visible_adjacency(
        self,
        seeds: Sequence[str],
        depth: int,
        clearance: Clearance,
        assets: npt.NDArray[np.bool_],
    ) -> dict[str, list[str]]:
        """The visible edges within `depth` hops of the seeds, as both-direction lists."""
        seen = set(seeds)
        frontier = list(seeds)
        edges: set[tuple[str, str]] = set()
        visible: dict[str, bool] = {}
        for _ in range(depth):
            following: list[str] = []
            for node in frontier:
                for neighbour in self._adj.get(node, ()):
                    ok = visible.get(neighbour)
                    if ok is None:
                        ok = visible[neighbour] = self._node_visible(neighbour, clearance, assets)
                    if not ok:
                        continue
                    edges.add((node, neighbour) if node <= neighbour else (neighbour, node))
                    if neighbour not in seen:
                        seen.add(neighbour)
                        following.append(neighbour)
            frontier = following
        adj: dict[str, list[str]] = {}
        for a, b in sorted(edges):
            adj.setdefault(a, []).append(b)
            if a != b:
                adj.setdefault(b, []).append(a)
        return adj


def _context(origin: str, adj: Mapping[str, Sequence[str]], depth: int, limit: int) -> list[str]:
    out: list[str] = []
    seen = {origin}
    frontier = [origin]
    for _ in range(depth):
        following: list[str] = []
        for node in frontier:
            for neighbour in adj.get(node, ()):
                if neighbour in seen:
                    continue
                if len(out) >= limit:
                    return out
                seen.add(neighbour)
                following.append(neighbour)
                out.append(neighbour)
        frontier = following
    return out


def decay_factors(ages_days: npt.NDArray[np.float64], half_life: float = 365.0, floor: float = 0.8):
    """UDA's decay per element: max(floor, 0.5 ** (age / half_life)), ages below 0 as 0."""
    ages = np.maximum(ages_days, 0.0)
    return np.maximum(floor, np.power(0.5, ages / half_life)).astype(np.float32)
