"""Ingest throughput against the raw embedding throughput of the same model (the floor).

The same SciFact passages are (1) chunked as the write path chunks them and embedded by the
model alone, in batches of the same size as the ingest calls, and (2) ingested through
`client.ingest` into a fresh store of each profile with the same model (no text cache: every
chunk is embedded). Both are in chunks per second; the ratio is ingest / raw.
"""

from __future__ import annotations

import time

from benchmarks.datasets import read_beir
from benchmarks.suites import Context, SuiteResult
from benchmarks.systems import make_profile, open_client
from ontology import Document
from uda.client import shared_embedder
from uda.write.chunking import chunk_text

DATASET = "scifact"
BATCH = 200


def run(ctx: Context, result: SuiteResult) -> None:
    """Raw model throughput, then ingest throughput per profile."""
    folder = ctx.data / "scifact"
    if not (folder / "corpus.jsonl").exists():
        result.status, result.reason = "skipped", "no SciFact data"
        return
    corpus = read_beir(folder).corpus
    ids = list(corpus)[: ctx.preset.ingest_docs]
    docs = [
        Document(
            element_id=f"ingest:{d}",
            name=corpus[d][0] or d,
            text=corpus[d][1] or corpus[d][0] or d,
            sensitivity="public",
        )
        for d in ids
    ]
    model = shared_embedder()
    model.embed_query("warm up")
    texts = [[f"{doc.name}\n{piece}" for piece in chunk_text(doc.text)] for doc in docs]
    chunks = sum(map(len, texts))
    ctx.log(f"ingest: raw model over {chunks} chunks of {len(docs)} passages")
    started = time.perf_counter()
    for start in range(0, len(texts), BATCH):
        model.embed_documents([t for group in texts[start : start + BATCH] for t in group])
    raw_s = time.perf_counter() - started
    raw_rate = chunks / raw_s
    result.add(
        dataset=DATASET,
        system="model",
        method="raw embedding (the floor)",
        metrics={"chunks": chunks, "seconds": raw_s, "chunks_per_s": raw_rate},
        params={"batch_passages": BATCH, "model": "all-MiniLM-L6-v2 (packaged)"},
    )
    for profile_name in ctx.profiles:
        profile = make_profile(profile_name, "ingest", ctx.work, ctx.servers)  # type: ignore[arg-type]
        ctx.log(f"ingest: {len(docs)} passages into UDA ({profile_name})")
        with open_client(profile, model) as client:
            started = time.perf_counter()
            written = 0
            for start in range(0, len(docs), BATCH):
                written += client.ingest(docs[start : start + BATCH]).chunks
            seconds = time.perf_counter() - started
        rate = written / seconds
        result.add(
            dataset=DATASET,
            system="uda",
            method="ingest with the model",
            profile=profile_name,
            metrics={
                "chunks": written,
                "seconds": seconds,
                "chunks_per_s": rate,
                "ratio_to_raw": rate / raw_rate,
            },
            params={"batch_passages": BATCH},
        )
