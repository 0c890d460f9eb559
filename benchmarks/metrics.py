"""Ranking metrics and latency summaries: pure functions over plain data.

nDCG follows trec_eval (and so BEIR and pytrec_eval): gain is the graded relevance itself,
discounted by log2(rank + 1), normalised by the ideal ordering of the judged documents.
Recall@k is the share of a query's relevant documents found in its top k. Every metric of a
run is the mean over the queries that have judgements; a query with no results scores 0.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

import numpy as np

Qrels = Mapping[str, Mapping[str, int]]  # query id -> doc id -> relevance grade
Run = Mapping[str, Sequence[str]]  # query id -> ranked doc ids, best first


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulative gain of gains in rank order (rank 1 is undiscounted)."""
    return sum(g / math.log2(rank + 1) for rank, g in enumerate(gains, start=1))


def ndcg_at_k(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k of one ranking against graded judgements (grades <= 0 are not relevant)."""
    if k <= 0:
        raise ValueError("k must be positive")
    ideal = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    if not ideal:
        return 0.0
    seen: set[str] = set()
    gains: list[float] = []
    for doc in ranked[:k]:
        # A ranking that repeats a document gets credit for it once.
        gains.append(0.0 if doc in seen else float(max(relevant.get(doc, 0), 0)))
        seen.add(doc)
    return dcg(gains) / dcg([float(g) for g in ideal])


def recall_at_k(ranked: Sequence[str], relevant: Mapping[str, int] | set[str], k: int) -> float:
    """Share of the relevant documents that appear in the top k (0 when none is relevant)."""
    if k <= 0:
        raise ValueError("k must be positive")
    wanted = (
        {d for d, g in relevant.items() if g > 0} if isinstance(relevant, Mapping) else relevant
    )
    if not wanted:
        return 0.0
    return len(wanted & set(ranked[:k])) / len(wanted)


def precision_at_k(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    """Share of the top k positions holding a relevant document (missing positions count 0)."""
    if k <= 0:
        raise ValueError("k must be positive")
    return len(relevant & set(ranked[:k])) / k


def reciprocal_rank(ranked: Sequence[str], relevant: set[str], k: int = 10) -> float:
    """1 / rank of the first relevant document within the top k, else 0."""
    for rank, doc in enumerate(ranked[:k], start=1):
        if doc in relevant:
            return 1.0 / rank
    return 0.0


def mean_metric(run: Run, qrels: Qrels, metric: str, k: int) -> float:
    """Mean of `ndcg` or `recall` at k over every judged query of `qrels`."""
    if not qrels:
        return 0.0
    values: list[float] = []
    for qid, relevant in qrels.items():
        ranked = run.get(qid, ())
        if metric == "ndcg":
            values.append(ndcg_at_k(ranked, relevant, k))
        elif metric == "recall":
            values.append(recall_at_k(ranked, relevant, k))
        else:
            raise ValueError(f"unknown metric {metric!r}")
    return sum(values) / len(values)


def paired_bootstrap_interval(
    before: Sequence[float],
    after: Sequence[float],
    *,
    level: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
) -> tuple[float, float]:
    """The `level` interval of mean(after - before) over the same queries, by bootstrap.

    Queries are resampled with replacement, each keeping its pair of scores (a paired test:
    what varies between queries is not mistaken for a difference between the systems).
    Deterministic for a given `seed`.
    """
    if len(before) != len(after) or not before:
        raise ValueError("two equally long, non-empty lists of per-query scores are needed")
    if not 0 < level < 1:
        raise ValueError("level must be within (0, 1)")
    differences = np.asarray(after, dtype=np.float64) - np.asarray(before, dtype=np.float64)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(differences), size=(resamples, len(differences)))
    means = differences[picks].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks."""
    if not values:
        raise ValueError("no values")
    if not 0 <= q <= 100:
        raise ValueError("q must be within [0, 100]")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency_summary(values_ms: Sequence[float]) -> dict[str, float]:
    """p50, p95, mean and count of latencies in milliseconds."""
    if not values_ms:
        return {}
    return {
        "p50_ms": percentile(values_ms, 50),
        "p95_ms": percentile(values_ms, 95),
        "mean_ms": statistics.fmean(values_ms),
        "n": float(len(values_ms)),
    }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None when either is missing or the denominator is 0."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator
