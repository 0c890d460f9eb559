"""Speed and scale on the synthetic ontology: latency per phase, throughput, baselines.

Per corpus size and profile: UDA is filled through `client.ingest` with the embedder double
(the write path's own throughput, no model), then reopened, and searched at limit 10, depth 1
and 2, with the query embedding excluded (precomputed vectors) and included (the real model
runs on each query, uncached). Callers rotate through four clearances. Then throughput with
N client threads. Baselines in the same run, on the same corpus and queries: the siloed
client on the same stores, the numpy floor, and txtai. Ratios are reported against UDA's
p50 wall time with the embedding excluded.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from benchmarks.baselines.floor import FlatCorpus, NumpyFloor, decay_factors
from benchmarks.baselines.siloed import SiloedClient
from benchmarks.baselines.txtai_peer import TxtaiPeer
from benchmarks.metrics import latency_summary
from benchmarks.suites import Context, SuiteResult
from benchmarks.synthetic import EPOCH, LEVELS, SyntheticCorpus, SyntheticEmbedder, SyntheticSpec
from benchmarks.systems import PHASES, make_profile, open_client, plan_timings
from uda.config import Profile
from uda.query.clearance import Clearance

DATASET = "synthetic"
LIMIT = 10
DEPTHS = (1, 2)
CALLERS: tuple[tuple[str, ...], ...] = (
    ("public",),
    ("internal",),
    ("confidential", "project:p1"),
    ("restricted", "project:*"),
)


def _caller(j: int) -> tuple[str, ...]:
    return CALLERS[j % len(CALLERS)]


def _flat(summary: dict[str, dict[str, float]]) -> dict[str, float]:
    return {
        f"{part}_{k}": v for part, stats in summary.items() for k, v in stats.items() if k != "n"
    }


def run(ctx: Context, result: SuiteResult) -> None:
    """Every scale point of the preset."""
    preset = ctx.preset
    if not preset.scale_sizes:
        result.status, result.reason = "skipped", "no scale sizes left (see --max-chunks)"
        return
    for size in preset.scale_sizes:
        spec = SyntheticSpec(
            chunks=size,
            queries=max(preset.scale_queries, preset.throughput_queries) + preset.warmup_queries,
        )
        started = time.perf_counter()
        corpus = SyntheticCorpus(spec=spec)
        _ = corpus.vectors
        ctx.log(
            f"synthetic {size}: {corpus.n_assets} assets, {corpus.n_chunks} chunks, "
            f"{corpus.n_clusters} clusters, generated in {time.perf_counter() - started:.1f} s"
        )
        double = SyntheticEmbedder(corpus, charge=ctx.embedder.inner)
        ctx.embedder.inner.embed_query("warm up")
        for profile_name in ctx.profiles:
            if profile_name == "server" and size > preset.server_max_chunks:
                result.notes.append(f"synthetic {size}: server profile not run (preset limit)")
                continue
            profile = make_profile(profile_name, f"syn{size}", ctx.work, ctx.servers)  # type: ignore[arg-type]
            _ingest(ctx, result, corpus, double, profile, profile_name, size)
            _latency(ctx, result, corpus, double, profile, profile_name, size)
            _throughput(ctx, result, corpus, double, profile, profile_name, size)
            if size <= preset.siloed_max_chunks:
                _siloed(ctx, result, corpus, profile, profile_name, size)
            else:
                result.notes.append(
                    f"synthetic {size}: siloed ({profile_name}) not run (preset limit)"
                )
        flat = _flat_corpus(ctx, corpus, bm25=size <= preset.floor_bm25_max_chunks)
        _floor(ctx, result, corpus, flat, size)
        if size <= preset.txtai_max_chunks:
            _txtai(ctx, result, corpus, double, flat, size)
        else:
            result.notes.append(f"synthetic {size}: txtai not run (preset limit)")


def _ingest(
    ctx: Context,
    result: SuiteResult,
    corpus: SyntheticCorpus,
    double: SyntheticEmbedder,
    profile: Profile,
    profile_name: str,
    size: int,
) -> None:
    ctx.log(f"synthetic {size}: ingest ({profile_name})")
    chunks = edges = 0
    started = time.perf_counter()
    with open_client(profile, double) as client:
        client.ingest(corpus.context_nodes())
        for batch in corpus.batches():
            report = client.ingest(batch.elements, batch.relations)
            chunks += report.chunks
            edges += report.edges
            if batch.index and batch.index % 50 == 0:
                ctx.log(f"  batch {batch.index}/{corpus.n_batches}")
    seconds = time.perf_counter() - started
    result.add(
        dataset=DATASET,
        system="uda",
        method="ingest (write path, vectors precomputed)",
        profile=profile_name,
        metrics={
            "chunks": chunks,
            "edges": edges,
            "seconds": seconds,
            "chunks_per_s": chunks / seconds,
        },
        params={"size": size, "batch_assets": corpus.spec.batch_assets},
    )


def _search_all(
    client: Any, corpus: SyntheticCorpus, queries: Sequence[int], depth: int
) -> tuple[list[float], dict[str, list[float]]]:
    walls: list[float] = []
    phases: dict[str, list[float]] = {}
    for j in queries:
        started = time.perf_counter()
        response = client.search(
            corpus.queries[j], limit=LIMIT, clearance_scope=list(_caller(j)), expand_depth=depth
        )
        returned = time.perf_counter()
        _ = response.results  # hydrated results: what a caller pays for
        done = time.perf_counter()
        walls.append((done - started) * 1000)
        timings = plan_timings(response)
        for phase, value in timings.items():
            phases.setdefault(phase, []).append(value)
        # Outside the planner: the sync client's hop to its loop, and building the results.
        call = (returned - started) * 1000
        phases.setdefault("client_hop", []).append(call - timings.get("total", call))
        phases.setdefault("hydrate", []).append((done - returned) * 1000)
    return walls, phases


def _latency(
    ctx: Context,
    result: SuiteResult,
    corpus: SyntheticCorpus,
    double: SyntheticEmbedder,
    profile: Profile,
    profile_name: str,
    size: int,
) -> None:
    preset = ctx.preset
    warm = list(range(preset.warmup_queries))
    timed = list(range(preset.warmup_queries, preset.warmup_queries + preset.scale_queries))
    with open_client(profile, double) as client:
        for depth in DEPTHS:
            for mode in ("excluded", "included"):
                double.charge_queries = mode == "included"
                _search_all(client, corpus, warm, depth)
                walls, phases = _search_all(client, corpus, timed, depth)
                summary = {"wall": latency_summary(walls)}
                summary.update(
                    {
                        p: latency_summary(phases[p])
                        for p in (*PHASES, "client_hop", "hydrate")
                        if p in phases
                    }
                )
                if "total" in phases and "embed" in phases:
                    summary["total_excl_embed"] = latency_summary(
                        [t - e for t, e in zip(phases["total"], phases["embed"], strict=True)]
                    )
                result.add(
                    dataset=DATASET,
                    system="uda",
                    method=f"search limit {LIMIT} depth {depth}, query embedding {mode}",
                    profile=profile_name,
                    metrics=_flat(summary),
                    params={"size": size, "depth": depth, "embedding": mode, "queries": len(timed)},
                )
        double.charge_queries = False
    ctx.log(f"synthetic {size}: latency ({profile_name}) done")


def _throughput(
    ctx: Context,
    result: SuiteResult,
    corpus: SyntheticCorpus,
    double: SyntheticEmbedder,
    profile: Profile,
    profile_name: str,
    size: int,
) -> None:
    total = ctx.preset.throughput_queries
    offset = ctx.preset.warmup_queries
    with open_client(profile, double) as client:
        for threads in ctx.preset.concurrency:
            latencies: list[float] = []
            lock = threading.Lock()

            def worker(
                first: int,
                step: int = threads,
                lock: threading.Lock = lock,
                latencies: list[float] = latencies,
            ) -> None:
                mine = list(range(offset + first, offset + total, step))
                walls, _ = _search_all(client, corpus, mine, 2)
                with lock:
                    latencies.extend(walls)

            pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
            started = time.perf_counter()
            for thread in pool:
                thread.start()
            for thread in pool:
                thread.join()
            seconds = time.perf_counter() - started
            summary = latency_summary(latencies)
            result.add(
                dataset=DATASET,
                system="uda",
                method=f"throughput, {threads} client threads, depth 2",
                profile=profile_name,
                metrics={
                    "qps": len(latencies) / seconds,
                    "p50_ms": summary["p50_ms"],
                    "p95_ms": summary["p95_ms"],
                },
                params={"size": size, "threads": threads, "queries": len(latencies)},
            )


def _siloed(
    ctx: Context,
    result: SuiteResult,
    corpus: SyntheticCorpus,
    profile: Profile,
    profile_name: str,
    size: int,
) -> None:
    preset = ctx.preset
    queries = range(preset.warmup_queries, preset.warmup_queries + preset.scale_queries)

    async def measure() -> dict[int, list[float]]:
        client = SiloedClient(profile)
        await client.open()
        out: dict[int, list[float]] = {}
        try:
            for depth in DEPTHS:
                for j in range(preset.warmup_queries):
                    await client.search(corpus.query_vectors[j].tolist(), limit=LIMIT, depth=depth)
                walls: list[float] = []
                for j in queries:
                    started = time.perf_counter()
                    await client.search(
                        corpus.query_vectors[j].tolist(),
                        limit=LIMIT,
                        depth=depth,
                        clearance=Clearance.parse(_caller(j)),
                    )
                    walls.append((time.perf_counter() - started) * 1000)
                out[depth] = walls
        finally:
            await client.close()
        return out

    ctx.log(f"synthetic {size}: siloed client ({profile_name})")
    for depth, walls in asyncio.run(measure()).items():
        summary = latency_summary(walls)
        result.add(
            dataset=DATASET,
            system="siloed",
            method=f"search limit {LIMIT} depth {depth}, query embedding excluded",
            profile=profile_name,
            metrics={
                "wall_p50_ms": summary["p50_ms"],
                "wall_p95_ms": summary["p95_ms"],
            },
            params={
                "size": size,
                "depth": depth,
                "graph_calls": "one per vector hit",
                "pool": max(10 * LIMIT, 50),
            },
        )


def _flat_corpus(ctx: Context, corpus: SyntheticCorpus, *, bm25: bool) -> FlatCorpus:
    ctx.log(f"synthetic {corpus.n_chunks}: flat copy for the floor and txtai")
    texts: list[str] = []
    edges: list[tuple[str, str]] = []
    for batch in corpus.batches():
        edges += [(r.source_id, r.target_id) for r in batch.relations]
        for element in batch.elements:
            body: str = element.text  # type: ignore[attr-defined]
            for part in body.split("\n\n## "):
                texts.append(f"{element.name}\n{part if part.startswith('## ') else '## ' + part}")
    now_days = (datetime.now(UTC) - EPOCH).total_seconds() / 86_400
    nodes = corpus.context_clearance()
    return FlatCorpus(
        vectors=corpus.vectors,
        owner=corpus.owner,
        asset_ids=corpus.asset_ids(),
        asset_rank=corpus.rank,
        asset_scope=[corpus.scope_of(i) for i in range(corpus.n_assets)],
        texts=texts if bm25 else None,
        asset_decay=decay_factors(corpus.age_days + now_days),
        edges=edges,
        node_rank={k: v[0] for k, v in nodes.items()},
        node_scope={k: v[1] for k, v in nodes.items()},
    )


def _floor(
    ctx: Context,
    result: SuiteResult,
    corpus: SyntheticCorpus,
    flat: FlatCorpus,
    size: int,
) -> None:
    ctx.log(f"synthetic {size}: numpy floor")
    started = time.perf_counter()
    floor = NumpyFloor(flat, bm25=flat.texts is not None)
    build_s = time.perf_counter() - started
    preset = ctx.preset
    queries = range(preset.warmup_queries, preset.warmup_queries + preset.scale_queries)
    for depth in DEPTHS:
        walls: list[float] = []
        for j in queries:
            begun = time.perf_counter()
            floor.search(
                corpus.query_vectors[j],
                corpus.queries[j],
                limit=LIMIT,
                depth=depth,
                clearance=Clearance.parse(_caller(j)),
            )
            walls.append((time.perf_counter() - begun) * 1000)
        summary = latency_summary(walls)
        result.add(
            dataset=DATASET,
            system="floor",
            method=f"search limit {LIMIT} depth {depth}, query embedding excluded",
            metrics={"wall_p50_ms": summary["p50_ms"], "wall_p95_ms": summary["p95_ms"]},
            params={
                "size": size,
                "depth": depth,
                "bm25": flat.texts is not None,
                "build_s": build_s,
            },
        )


def _txtai(
    ctx: Context,
    result: SuiteResult,
    corpus: SyntheticCorpus,
    double: SyntheticEmbedder,
    flat: FlatCorpus,
    size: int,
) -> None:
    ctx.log(f"synthetic {size}: txtai index")
    texts = flat.texts or [t for _, t in corpus.chunk_texts()]
    peer = TxtaiPeer(transform=double.transform(), hybrid=True)  # type: ignore[arg-type]
    started = time.perf_counter()
    peer.index(
        (
            str(row),
            {
                "text": texts[row],
                "eid": flat.asset_ids[int(flat.owner[row])],
                "rank": int(flat.asset_rank[int(flat.owner[row])]),
                "scope": flat.asset_scope[int(flat.owner[row])] or "",
            },
        )
        for row in range(len(texts))
    )
    peer.build_graph(flat.edges)
    index_s = time.perf_counter() - started
    result.add(
        dataset=DATASET,
        system="txtai",
        method="index (vectors precomputed)",
        metrics={"seconds": index_s, "chunks_per_s": len(texts) / index_s},
        params={"size": size, "ann": peer.ann_components},
    )
    node_level = {
        **flat.node_rank,
        **{a: int(r) for a, r in zip(flat.asset_ids, flat.asset_rank, strict=True)},
    }
    node_scope = {**flat.node_scope, **dict(zip(flat.asset_ids, flat.asset_scope, strict=True))}
    preset = ctx.preset
    queries = range(preset.warmup_queries, preset.warmup_queries + preset.scale_queries)
    try:
        for depth in DEPTHS:
            for mode in ("excluded", "included"):
                double.charge_queries = mode == "included"
                walls: list[float] = []
                for j in queries:
                    clearance = Clearance.parse(_caller(j))
                    begun = time.perf_counter()
                    rows = peer.search_cleared(corpus.queries[j], 10 * LIMIT, clearance)
                    hits = list(dict.fromkeys(str(r["eid"]) for r in rows))[:LIMIT]
                    for hit in hits:  # context, filtered by clearance in Python
                        _ = [
                            n
                            for n in peer.expand(hit, depth)
                            if clearance.allows(LEVELS[node_level.get(n, 3)], node_scope.get(n))
                        ]
                    walls.append((time.perf_counter() - begun) * 1000)
                summary = latency_summary(walls)
                metrics = {"wall_p50_ms": summary["p50_ms"], "wall_p95_ms": summary["p95_ms"]}
                result.add(
                    dataset=DATASET,
                    system="txtai",
                    method=f"search limit {LIMIT} depth {depth}, query embedding {mode}",
                    metrics=metrics,
                    params={
                        "size": size,
                        "depth": depth,
                        "filter": "SQL",
                        "graph": "txtai networkx, edges() per node",
                    },
                )
    finally:
        double.charge_queries = False
        peer.close()
