"""Multi-hop sets: Recall@2 and Recall@5 for BM25, dense, and dense with graph centrality.

The graph is built from the data without any model: `hipporag_musique` links passages to
the entities of its OpenIE triples, the other sets link a passage to the passages whose
titles it mentions (benchmarks/datasets.py). Graph rows expand two hops (passage -> entity
-> passage, or passage -> passage -> passage) and fuse a centrality leg (degree, or
personalized PageRank seeded by the dense scores) with the dense leg; `graph_candidates`
lets passages reached only through the graph compete too. The gain over dense only is
reported as a difference in points of Recall@5 and Recall@2.
"""

from __future__ import annotations

from benchmarks.datasets import graph_elements, multihop_graph, read_beir, subset
from benchmarks.suites import Context, SuiteResult
from benchmarks.suites.quality import (
    FULL,
    LEXICAL,
    SEMANTIC,
    TUNED,
    UdaConfig,
    run_floor,
    run_txtai,
    run_uda,
    scorer,
)

MEASURES = (("recall", 2), ("recall", 5))
LIMIT = 5


def graph_configs(ctx: Context) -> list[UdaConfig]:
    """One config per graph variant of the preset (centrality, weight, graph candidates)."""
    configs: list[UdaConfig] = []
    for centrality, weight, candidates in ctx.preset.graph_variants:
        name = "dense+graph (degree)" if centrality == "degree" else "dense+PPR"
        name += f" w={weight:g}" + (" +graph candidates" if candidates else "")
        configs.append(
            UdaConfig(
                method=name,
                options={
                    "weights": {"semantic": 1.0, "lexical": 0.0, "centrality": weight},
                    "expand_depth": 2,
                    "centrality": centrality,
                    "graph_candidates": candidates,
                    # Passages meet through the entities they share: walk edges both ways
                    # at both hops (passage -> entity <- passage).
                    "traverse": "association",
                },
            )
        )
    return configs


def run(ctx: Context, result: SuiteResult) -> None:
    """Run every multi-hop set of the preset."""
    root = ctx.data / "multihop"
    ran = 0
    for name in ctx.preset.multihop_sets:
        folder = root / name
        if not (folder / "corpus.jsonl").exists():
            result.notes.append(f"{name}: skipped, no data")
            continue
        preset = ctx.preset
        data = subset(read_beir(folder), queries=preset.multihop_queries, docs=preset.multihop_docs)
        graph = multihop_graph(folder, data, ctx.embedder.embed_documents)
        entities, relations = graph_elements(graph)
        result.notes.append(
            f"{name}: {len(data.corpus)} passages, {len(data.qrels)} questions, graph "
            f"{graph.source}: {len(graph.entities)} entities, {graph.edge_count} edges"
        )
        score = scorer(data, MEASURES)
        plain = [
            UdaConfig(method="bm25", options={**LEXICAL.options, "expand_depth": 0}),
            UdaConfig(method="dense", options={**SEMANTIC.options, "expand_depth": 0}),
        ]
        graphs = graph_configs(ctx)
        uda = run_uda(
            ctx,
            result,
            data,
            score,
            [*plain, *graphs, FULL, TUNED],
            dataset=name,
            extra_elements=entities,
            relations=relations,
            limit=LIMIT,
        )
        run_floor(ctx, result, data, score, dataset=name, limit=LIMIT)
        run_txtai(ctx, result, data, score, dataset=name, limit=LIMIT)
        for profile in ctx.quality_profiles():
            dense = uda[(profile, "dense")]
            for config in graphs:
                with_graph = uda[(profile, config.method)]
                result.add(
                    dataset=name,
                    system="uda",
                    method=f"gain of {config.method} over dense",
                    profile=profile,
                    metrics={
                        "recall@5_points": 100 * (with_graph["recall@5"] - dense["recall@5"]),
                        "recall@2_points": 100 * (with_graph["recall@2"] - dense["recall@2"]),
                    },
                    params=config.options,
                )
        ran += 1
    if not ran:
        result.status, result.reason = "skipped", "no multi-hop data"
