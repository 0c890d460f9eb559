"""Quality on a BEIR-format set: UDA's leg combinations, the numpy floor and txtai, one run.

Every system sees the same passages and the same MiniLM weights. UDA indexes each passage
as a `Document` (name = title, chunked, each chunk embedded as `title\\nchunk`); the floor
embeds each whole passage as `title\\ntext` (the model truncates at 256 word pieces, as in
the published MiniLM figures) and ranks exactly; txtai indexes `title. text` with its
defaults. Rankings are cut at the preset's quality limit (100 by default).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks.baselines.floor import FlatCorpus, NumpyFloor
from benchmarks.baselines.txtai_peer import TxtaiPeer
from benchmarks.datasets import DOC_PREFIX, BeirSet, documents, passage_text
from benchmarks.metrics import latency_summary, mean_metric
from benchmarks.suites import Context, SuiteResult
from benchmarks.systems import (
    Timed,
    ingest,
    make_profile,
    open_client,
    phase_summary,
    search_run,
    strip_prefix,
)
from ontology import Element, Relation
from uda.errors import NothingToTuneError

Scorer = Callable[[Mapping[str, Sequence[str]]], dict[str, float]]


def scorer(data: BeirSet, measures: Sequence[tuple[str, int]]) -> Scorer:
    """A function from a run to its metrics, e.g. [("ndcg", 10), ("recall", 100)]."""

    def score(run: Mapping[str, Sequence[str]]) -> dict[str, float]:
        return {f"{m}@{k}": mean_metric(run, data.qrels, m, k) for m, k in measures}

    return score


@dataclass(frozen=True, kw_only=True)
class UdaConfig:
    """One way of searching with UDA: a method name and the search options.

    `tuned`: run after `uda tune` on the store (the configs without it run before, on a
    store whose tuning is forgotten first: an earlier run's must not leak into them).
    """

    method: str
    options: dict[str, Any] = field(default_factory=dict[str, Any])
    tuned: bool = False


LEGS_ONLY = {"centrality": 0.0}
SEMANTIC = UdaConfig(
    method="dense", options={"weights": {"semantic": 1.0, "lexical": 0.0, **LEGS_ONLY}}
)
LEXICAL = UdaConfig(
    method="bm25", options={"weights": {"semantic": 0.0, "lexical": 1.0, **LEGS_ONLY}}
)
FUSED = UdaConfig(
    method="dense+lexical", options={"weights": {"semantic": 1.0, "lexical": 1.0, **LEGS_ONLY}}
)
FULL = UdaConfig(method="full pipeline", options={})  # profile defaults, depth 1
TUNED = UdaConfig(method="full pipeline after uda tune", options={}, tuned=True)


def run_uda(
    ctx: Context,
    result: SuiteResult,
    data: BeirSet,
    score: Scorer,
    configs: Sequence[UdaConfig],
    *,
    dataset: str,
    extra_elements: Sequence[Element] = (),
    relations: Sequence[Relation] = (),
    limit: int,
) -> dict[tuple[str, str], dict[str, float]]:
    """Ingest the set into every quality profile and run each config; returns metrics by
    (profile, method)."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    elements = [*extra_elements, *documents(data)]
    queries = data.judged_queries
    for profile_name in ctx.quality_profiles():
        profile = make_profile(profile_name, dataset, ctx.work, ctx.servers)  # type: ignore[arg-type]
        ctx.log(f"{dataset}: ingest {len(elements)} elements into UDA ({profile_name})")
        with open_client(profile, ctx.embedder) as client:
            stats = ingest(client, elements, relations, progress=ctx.log)
            ctx.log(
                f"{dataset}: {stats.chunks} chunks, {stats.relations} edges "
                f"in {stats.seconds:.1f} s; searching"
            )
            for text in queries.values():
                ctx.embedder.embed_query(text)
            client.forget_tuning()
            tuning: dict[str, Any] | None = None
            for config in sorted(configs, key=lambda c: c.tuned):  # untuned first, in order
                if config.tuned and tuning is None:
                    tuning = tune(ctx, client, dataset, profile_name)
                    result.notes.append(f"{dataset} ({profile_name}): uda tune {tuning}")
                timed = Timed()
                run = search_run(
                    client,
                    queries,
                    limit=limit,
                    to_doc=strip_prefix(DOC_PREFIX),
                    timed=timed,
                    **config.options,
                )
                metrics = score(run)
                latency = phase_summary(timed, latency_summary)
                metrics["p50_ms"] = latency["wall"]["p50_ms"]
                out[(profile_name, config.method)] = metrics
                result.add(
                    dataset=dataset,
                    system="uda",
                    method=config.method,
                    profile=profile_name,
                    metrics=metrics,
                    params={
                        "limit": limit,
                        **config.options,
                        "queries": len(queries),
                        **({"tuning": tuning} if config.tuned else {}),
                    },
                )
        result.notes.append(
            f"{dataset} ({profile_name}): {stats.chunks} chunks from {len(elements)} elements, "
            f"{stats.relations} edges, ingest {stats.seconds:.1f} s"
        )
    return out


def tune(ctx: Context, client: Any, dataset: str, profile: str) -> dict[str, Any]:
    """Run `uda tune` on the store (pseudo-queries only: no test question is seen)."""
    ctx.log(f"{dataset}: uda tune ({profile})")
    started = time.perf_counter()
    try:
        tuning = client.tune()
    except NothingToTuneError as exc:
        # As `uda tune` says "nothing to tune" and exits 0: the store keeps the mode's
        # weight, so the tuned row measures exactly what a user has after running it.
        ctx.log(f"{dataset}: nothing to tune ({exc})")
        return {
            "centrality_weight": None,
            "nothing_to_tune": str(exc),
            "seconds": round(time.perf_counter() - started, 1),
        }
    return {
        "centrality_weight": tuning.centrality_weight,
        "default_weight": tuning.default_weight,
        "pseudo_queries": tuning.queries,
        "recall": tuning.recall,
        "seconds": round(time.perf_counter() - started, 1),
    }


def floor_corpus(ctx: Context, data: BeirSet) -> FlatCorpus:
    """One vector per passage (`title\\ntext`, exact), public, no decay, no edges."""
    ids = list(data.corpus)
    texts = [passage_text(*data.corpus[d]) for d in ids]
    vectors = ctx.embedder.embed_documents(texts)
    return FlatCorpus(
        vectors=vectors,
        owner=np.arange(len(ids), dtype=np.int64),
        asset_ids=ids,
        asset_rank=np.zeros(len(ids), dtype=np.int8),
        asset_scope=[None] * len(ids),
        texts=texts,
    )


def run_floor(
    ctx: Context, result: SuiteResult, data: BeirSet, score: Scorer, *, dataset: str, limit: int
) -> dict[str, dict[str, float]]:
    """The numpy floor's dense, BM25 and fused rankings."""
    ctx.log(f"{dataset}: numpy floor over {len(data.corpus)} passages")
    floor = NumpyFloor(floor_corpus(ctx, data))
    out: dict[str, dict[str, float]] = {}
    variants = {
        "dense": {"semantic": 1.0, "lexical": 0.0, "centrality": 0.0},
        "bm25": {"semantic": 0.0, "lexical": 1.0, "centrality": 0.0},
        "dense+lexical": {"semantic": 1.0, "lexical": 1.0, "centrality": 0.0},
    }
    queries = data.judged_queries
    for method, weights in variants.items():
        run: dict[str, list[str]] = {}
        times: list[float] = []
        for qid, text in queries.items():
            vector = ctx.embedder.embed_query(text)
            started = time.perf_counter()
            hits = floor.search(vector, text, limit=limit, depth=0, weights=weights)
            times.append((time.perf_counter() - started) * 1000)
            run[qid] = [h.element_id for h in hits]
        metrics = {**score(run), "p50_ms": latency_summary(times)["p50_ms"]}
        out[method] = metrics
        result.add(
            dataset=dataset,
            system="floor",
            method=method,
            metrics=metrics,
            params={"limit": limit, "weights": weights, "exact": True},
        )
    return out


# txtai's default index above 5,000 passages is IVF, whose k-means cells depend on the order
# the passages were indexed in; SciFact (5,183) is just above. One build is one draw: the
# reproduction is judged on the mean over this many orders (the corpus's own and shuffles).
TXTAI_INDEX_ORDERS = 8
TXTAI_METHODS = (("dense", 1.0), ("bm25", 0.0), ("hybrid", None))


def run_txtai(
    ctx: Context,
    result: SuiteResult,
    data: BeirSet,
    score: Scorer,
    *,
    dataset: str,
    limit: int,
    index_orders: int = 1,
) -> dict[str, dict[str, float]]:
    """txtai's dense, BM25 and hybrid rankings from one default hybrid index.

    With `index_orders` > 1, also their nDCG@10 over that many indexing orders (same
    vectors, read back from the first index); SciFact's reproduction is judged on it.
    """
    ctx.log(f"{dataset}: txtai index over {len(data.corpus)} passages")
    peer = TxtaiPeer(hybrid=True)
    passages = [
        (doc_id, f"{title}. {text}" if title else text)
        for doc_id, (title, text) in data.corpus.items()
    ]
    started = time.perf_counter()
    peer.index(passages)
    index_s = time.perf_counter() - started
    out: dict[str, dict[str, float]] = {}
    queries = data.judged_queries
    try:
        for method, weights in TXTAI_METHODS:
            run: dict[str, list[str]] = {}
            times: list[float] = []
            for qid, text in queries.items():
                begun = time.perf_counter()
                run[qid] = peer.search(text, limit, weights)
                times.append((time.perf_counter() - begun) * 1000)
            out[method] = {**score(run), "p50_ms_incl_embed": latency_summary(times)["p50_ms"]}
        spread: dict[str, dict[str, float]] = {}
        if index_orders > 1:
            ctx.log(f"{dataset}: txtai over {index_orders - 1} more indexing orders")
            spread = txtai_order_spread(
                peer, passages, queries, score, limit, orders=index_orders, first=out
            )
        components = peer.ann_components
    finally:
        peer.close()
    for method, weights in TXTAI_METHODS:
        out[method].update(spread.get(method, {}))
        result.add(
            dataset=dataset,
            system="txtai",
            method=method,
            metrics=out[method],
            params={
                "limit": limit,
                "weights": weights,
                "ann": components,
                "index_s": index_s,
                "index_orders": index_orders,
                "config": "defaults + path=packaged MiniLM, content, hybrid",
            },
        )
    return out


def txtai_order_spread(
    peer: TxtaiPeer,
    passages: Sequence[tuple[str, str]],
    queries: Mapping[str, str],
    score: Scorer,
    limit: int,
    *,
    orders: int,
    first: Mapping[str, Mapping[str, float]],
) -> dict[str, dict[str, float]]:
    """nDCG@10 of each method over `orders` indexing orders: mean, sd, min, max.

    The first order is the default index's (its figures are `first`); the others are seeded
    shuffles, indexed through txtai's `external` vectors method with the vectors the default
    index computed, so that only the order differs.
    """
    texts = [text for _, text in passages]
    lookup = dict(zip(texts, peer.stored_vectors(), strict=True))
    lookup.update(zip(queries.values(), peer.query_vectors(list(queries.values())), strict=True))

    def vectors(batch: Sequence[str]) -> np.ndarray:
        return np.stack([lookup[text] for text in batch])

    figures = {method: [first[method]["ndcg@10"]] for method, _ in TXTAI_METHODS}
    for seed in range(1, orders):
        order = np.random.default_rng(seed).permutation(len(passages))
        shuffled = TxtaiPeer(transform=vectors, hybrid=True)
        try:
            shuffled.index(passages[int(i)] for i in order)
            for method, weights in TXTAI_METHODS:
                run = {qid: shuffled.search(text, limit, weights) for qid, text in queries.items()}
                figures[method].append(score(run)["ndcg@10"])
        finally:
            shuffled.close()
    return {
        method: {
            "ndcg@10_orders_mean": float(np.mean(values)),
            "ndcg@10_orders_sd": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
            "ndcg@10_orders_min": min(values),
            "ndcg@10_orders_max": max(values),
        }
        for method, values in figures.items()
    }
