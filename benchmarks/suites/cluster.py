"""Cluster: ingest with a Dask cluster's workers embedding, 1 against 2 workers (issue 19).

The service suite's SciFact passages go into a fresh embedded store three times through the
public client, each with the real model and no embedding cache (every text is embedded in
every run): in this process (the model on every core), then with a local Dask cluster of 1
and of 2 worker processes on loopback (`uda.embedding.cluster`; each worker embeds on
cores / workers threads). Rows: passages/s, chunks/s, and the ratio to the in-process run.

All three share this machine's cores, so a second worker can only win what one process
leaves idle (the writes, the chunking); on separate machines each worker brings its own
cores (docs/scale.md). The run's cached embedder is not used: it would skip the work.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace

import uda
from benchmarks.datasets import read_beir
from benchmarks.suites import Context, SuiteResult
from benchmarks.suites.service import DATASET, passages
from ontology import Document
from uda.config import embedded_profile

WORKER_COUNTS = (1, 2)
BATCH = 64


def run(ctx: Context, result: SuiteResult) -> None:
    """In-process, then 1 and 2 workers, on the same passages."""
    folder = ctx.data / DATASET
    if not (folder / "corpus.jsonl").exists():
        result.status, result.reason = "skipped", f"no SciFact data under {folder.name}/"
        return
    from distributed import LocalCluster

    docs = passages(read_beir(folder), ctx)
    cores = os.cpu_count() or 1
    baseline = _ingest(ctx, docs, "in-process", None)
    _add(result, "ingest in this process", baseline, baseline, len(docs), None, cores)
    for workers in WORKER_COUNTS:
        threads = max(1, cores // workers)
        with LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            env={"UDA_EMBED_THREADS": str(threads)},
        ) as cluster:
            figures = _ingest(ctx, docs, f"workers-{workers}", cluster.scheduler_address)
        _add(result, f"ingest with {workers} workers", figures, baseline, len(docs), workers, cores)


def _ingest(ctx: Context, docs: list[Document], name: str, address: str | None) -> dict[str, float]:
    profile = replace(
        embedded_profile(ctx.work / "cluster" / name), embedding_cache=False, cluster=address
    )
    ctx.log(f"cluster: {len(docs)} passages, {name}")
    with uda.Client(profile) as client:
        # The model loaded here, or on every worker (a part each), before the clock starts.
        client.embedder.embed_documents([f"warm up {n}" for n in range(8)])
        started = time.perf_counter()
        chunks = 0
        for start in range(0, len(docs), BATCH):
            chunks += client.ingest(docs[start : start + BATCH]).chunks
        seconds = time.perf_counter() - started
        close = getattr(client.embedder, "close", None)
        if callable(close):  # leave the cluster before it is shut down
            close()
    return {"passages_per_s": len(docs) / seconds, "chunks_per_s": chunks / seconds}


def _add(
    result: SuiteResult,
    method: str,
    figures: dict[str, float],
    baseline: dict[str, float],
    docs: int,
    workers: int | None,
    cores: int,
) -> None:
    result.add(
        dataset=DATASET,
        system="uda",
        method=method,
        profile="embedded",
        metrics={
            **figures,
            "ratio_to_in_process": figures["passages_per_s"] / baseline["passages_per_s"],
        },
        params={"docs": docs, "workers": workers, "cores": cores, "batch": BATCH},
    )


__all__ = ["WORKER_COUNTS", "run"]
