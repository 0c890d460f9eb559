"""Ingest throughput against the raw embedding throughput of the same model (the floor).

The same SciFact passages are (1) chunked as the write path chunks them and embedded by the
model alone, in batches of the same size as the ingest calls, and (2) ingested through
`client.ingest` into a fresh store of each profile with the same model (no text cache: every
chunk is embedded). Both are in chunks per second (and documents per second); the ratio is
ingest / raw. On the embedded profile the same ingest also runs with the torch runtime
(`ingest with the model (sentence-transformers)`), the default before ONNX Runtime: the
speed-up of ingest through the public API is judged against it, in the same run (issue 18).

Then the embedders side by side on the same texts (issue 18): `embedder: sentence-transformers`
(torch), `embedder: onnx` (ONNX Runtime, the default) and `embedder: onnx-int8` (opt-in: the
MatMul weights quantised to int8), each with its query p50/p95 (one SciFact query per call, no
cache), its chunks per second over the same chunks, the smallest and mean cosine between its
vectors and torch's (>= 0.9999 keeps stores valid), and its dense-only nDCG@10 on SciFact's
judged test queries over the passages ingested (each passage scored by its best chunk; the whole
corpus in the full preset), with the change against fp32 ONNX: int8 may become a default only
at a change >= -0.003.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence

import numpy as np

from benchmarks.datasets import BeirSet, read_beir
from benchmarks.metrics import latency_summary, ndcg_at_k, paired_bootstrap_interval
from benchmarks.suites import Context, SuiteResult
from benchmarks.systems import make_profile, open_client
from ontology import Document
from uda.embedding import Embedder
from uda.embedding.factory import shared_embedder
from uda.write.chunking import chunk_text

DATASET = "scifact"
BATCH = 200


def run(ctx: Context, result: SuiteResult) -> None:
    """Raw model throughput, then ingest throughput per profile."""
    folder = ctx.data / "scifact"
    if not (folder / "corpus.jsonl").exists():
        result.status, result.reason = "skipped", "no SciFact data"
        return
    data = read_beir(folder)
    corpus = data.corpus
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
        metrics={
            "chunks": chunks,
            "seconds": raw_s,
            "chunks_per_s": raw_rate,
            "docs_per_s": len(docs) / raw_s,
        },
        params={"batch_passages": BATCH, "model": "all-MiniLM-L6-v2 (packaged)"},
    )
    runs: list[tuple[str, Embedder, str]] = [
        (p, model, "ingest with the model") for p in ctx.profiles
    ]
    if "embedded" in ctx.profiles:
        before = shared_embedder(kind="sentence-transformers")
        before.embed_query("warm up")
        method = "ingest with the model (sentence-transformers)"
        runs.append(("embedded", before, method))
    for profile_name, embedder, method in runs:
        label = "ingest" if embedder is model else "ingest-torch"
        profile = make_profile(profile_name, label, ctx.work, ctx.servers)  # type: ignore[arg-type]
        ctx.log(f"ingest: {len(docs)} passages into UDA ({profile_name}, {method})")
        with open_client(profile, embedder) as client:
            started = time.perf_counter()
            written = 0
            for start in range(0, len(docs), BATCH):
                written += client.ingest(docs[start : start + BATCH]).chunks
            seconds = time.perf_counter() - started
        rate = written / seconds
        result.add(
            dataset=DATASET,
            system="uda",
            method=method,
            profile=profile_name,
            metrics={
                "chunks": written,
                "documents": len(docs),
                "seconds": seconds,
                "chunks_per_s": rate,
                "docs_per_s": len(docs) / seconds,
                "ratio_to_raw": rate / raw_rate,
            },
            params={"batch_passages": BATCH},
        )
    passages = [(doc_id, t) for doc_id, group in zip(ids, texts, strict=True) for t in group]
    _embedders(ctx, result, passages, list(read_queries(ctx)), data)


def read_queries(ctx: Context) -> list[str]:
    """SciFact's test queries, as many as the preset's scale queries."""
    queries = read_beir(ctx.data / "scifact").queries
    return list(queries.values())[: max(ctx.preset.scale_queries, 20)]


def _embedders(
    ctx: Context,
    result: SuiteResult,
    passages: Sequence[tuple[str, str]],
    queries: Sequence[str],
    data: BeirSet,
) -> None:
    """Every local runtime on the same chunks and queries, one after the other."""
    from uda.embedding.onnx import OnnxEmbedder

    chunks = [text for _, text in passages]
    owners = np.array([doc_id for doc_id, _ in passages])
    ingested = set(owners.tolist())
    judged = {
        q: {d: g for d, g in rel.items() if d in ingested}
        for q, rel in data.qrels.items()
        if any(d in ingested for d in rel)
    }
    runtimes: list[tuple[str, Embedder]] = [
        ("sentence-transformers", shared_embedder(kind="sentence-transformers")),
        ("onnx", OnnxEmbedder()),
        ("onnx-int8", OnnxEmbedder(int8=True)),
    ]
    reference: np.ndarray | None = None
    fp32_ndcg: list[float] | None = None  # per judged query
    for kind, model in runtimes:
        ctx.log(f"ingest: embedder {kind}, {len(queries)} queries and {len(chunks)} chunks")
        model.embed_documents(list(chunks[:BATCH]))  # loaded and warm
        walls = _query_walls(model, queries)
        started = time.perf_counter()
        vectors = np.concatenate(
            [
                model.embed_documents(list(chunks[start : start + BATCH]))
                for start in range(0, len(chunks), BATCH)
            ]
        )
        seconds = time.perf_counter() - started
        metrics = {f"query_{k}": v for k, v in latency_summary(walls).items() if k != "n"}
        rate = len(chunks) / seconds
        metrics |= {"chunks": len(chunks), "seconds": seconds, "chunks_per_s": rate}
        if reference is None:
            reference = vectors
        else:
            cosines = (vectors * reference).sum(axis=1)
            metrics |= {
                "min_cosine_to_torch": float(cosines.min()),
                "mean_cosine_to_torch": float(cosines.mean()),
            }
        if judged:
            per_query = _dense_ndcg(model, vectors, owners, judged, data.queries)
            ndcg = statistics.fmean(per_query)
            metrics["dense_ndcg@10"] = ndcg
            if kind == "onnx":
                fp32_ndcg = per_query
            elif kind == "onnx-int8" and fp32_ndcg is not None:
                # The change with its 95 % interval over the judged queries: whether int8 may
                # become a default (at >= -0.003) is decided on the interval, not one figure.
                low, high = paired_bootstrap_interval(fp32_ndcg, per_query)
                metrics["ndcg@10_change_vs_fp32"] = ndcg - statistics.fmean(fp32_ndcg)
                metrics["ndcg@10_change_ci95_low"] = low
                metrics["ndcg@10_change_ci95_high"] = high
        result.add(
            dataset=DATASET,
            system="model",
            method=f"embedder: {kind}",
            metrics=metrics,
            params={"batch_chunks": BATCH, "queries": len(queries), "judged": len(judged)},
        )


def _dense_ndcg(
    model: Embedder,
    vectors: np.ndarray,
    owners: np.ndarray,
    judged: Mapping[str, Mapping[str, int]],
    texts: Mapping[str, str],
) -> list[float]:
    """nDCG@10 of a dense ranking of the passages per judged query, in sorted query order
    (a passage scores its best chunk)."""
    ids = sorted(judged)
    asked = model.embed_documents([texts[q] for q in ids])
    scores = asked @ vectors.T  # unit vectors: cosine similarity
    out: list[float] = []
    for row, query in enumerate(ids):
        best: dict[str, float] = {}
        for column in np.argsort(-scores[row])[: 20 * 10]:  # enough chunks for 10 passages
            owner = str(owners[column])
            best.setdefault(owner, float(scores[row, column]))
        ranked = sorted(best, key=lambda d: -best[d])
        out.append(ndcg_at_k(ranked, judged[query], 10))
    return out


def _query_walls(model: Embedder, queries: Sequence[str]) -> list[float]:
    """Milliseconds per query, each embedded alone (`embed_documents`: no query cache)."""
    walls: list[float] = []
    for query in queries:
        started = time.perf_counter()
        model.embed_documents([query])
        walls.append((time.perf_counter() - started) * 1000)
    return walls
