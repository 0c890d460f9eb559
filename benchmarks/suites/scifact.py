"""SciFact (BEIR): nDCG@10 and Recall@100 for BM25, dense, dense + lexical and the full
pipeline, with the floor and txtai. SciFact has no graph: the full pipeline must not lose
quality to its graph leg (within 0.005 nDCG@10 of its best leg combination, or better).
"""

from __future__ import annotations

from benchmarks.datasets import read_beir, subset
from benchmarks.suites import Context, SuiteResult
from benchmarks.suites.quality import (
    FULL,
    FUSED,
    LEXICAL,
    SEMANTIC,
    TXTAI_INDEX_ORDERS,
    run_floor,
    run_txtai,
    run_uda,
    scorer,
)

DATASET = "scifact"
MEASURES = (("ndcg", 10), ("recall", 100))


def run(ctx: Context, result: SuiteResult) -> None:
    """Run the SciFact rows."""
    folder = ctx.data / "scifact"
    if not (folder / "corpus.jsonl").exists():
        result.status, result.reason = "skipped", f"no SciFact data under {folder.name}/"
        return
    preset = ctx.preset
    data = subset(read_beir(folder), queries=preset.scifact_queries, docs=preset.scifact_docs)
    result.notes.append(
        f"scifact: {len(data.corpus)} passages, {len(data.qrels)} judged test queries"
    )
    score = scorer(data, MEASURES)
    limit = preset.quality_limit
    uda = run_uda(
        ctx, result, data, score, (LEXICAL, SEMANTIC, FUSED, FULL), dataset=DATASET, limit=limit
    )
    run_floor(ctx, result, data, score, dataset=DATASET, limit=limit)
    run_txtai(
        ctx, result, data, score, dataset=DATASET, limit=limit, index_orders=TXTAI_INDEX_ORDERS
    )
    for profile in ctx.quality_profiles():
        legs = {m: uda[(profile, m)]["ndcg@10"] for m in ("bm25", "dense", "dense+lexical")}
        best = max(legs, key=lambda m: legs[m])
        full = uda[(profile, FULL.method)]["ndcg@10"]
        result.add(
            dataset=DATASET,
            system="uda",
            method="graph-leg guard",
            profile=profile,
            metrics={
                "full_ndcg@10": full,
                "best_leg_ndcg@10": legs[best],
                "delta": full - legs[best],
                "within_0.005": float(full >= legs[best] - 0.005),
            },
            params={"best_leg": best},
        )
