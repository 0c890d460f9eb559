"""`python -m benchmarks.lexical_scale`: the lexical leg and search at 30k and 300k passages.

Issue 42's measurement, as a suite: real prose and code (passages of the documentation,
docstrings and sources installed beside the project), filled through `client.ingest` with an
embedder that costs no model (`benchmarks.model_free`: seeded random unit vectors, as the
issue measured, or hashed words, whose neighbourhoods an HNSW index is built for), and
searched query by query, each query by every system in turn so that all meet the machine
alike:

- `tantivy`: the bare engine over the same passages (its own `en_stem` analyzer, its query
  parser's OR of the words), k = 100: the floor the lexical leg is held to;
- `engine`: UDA's lexical leg as the search calls it (`text_search`, k = 100) on the engine
  path (ADR 50): Tantivy candidates, exact per-caller BM25;
- `exhaustive`: the same leg's exhaustive path on the same store and snapshot (every posting
  of every query term scored in SQL): the design before ADR 50, measured in the same run;
- `vector`: the vector leg as the search calls it (`vector_search`, k = 100), and its
  recall@100 against an exact scan of the stored vectors (ADR 49 chose its width by it);
- `search`: `client.search` (limit 10, depth 1, the query embedding excluded): wall time,
  CPU time of the process per search, and the planner's phases.

Queries are keyword queries (2-3 words of a passage) and questions (15 consecutive words).
Writes `report.json` and `summary.md` under --out and prints the summary.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.datasets import PROJECT_ROOT
from benchmarks.model_free import EMBEDDERS

DEFAULT_OUT = PROJECT_ROOT / "benchmarks" / "results" / "lexical-scale"
PASSAGE_WORDS = 120
SEED = 42
K = 100
LIMIT = 10
CALLER = ("internal",)
_SUFFIXES = (".py", ".md", ".rst", ".txt")
_WORD = re.compile(r"[A-Za-z]{4,}")


# -- corpus -------------------------------------------------------------------------------
def prose_root() -> Path:
    """The installed packages this interpreter sees (the project's virtual environment)."""
    import sysconfig

    return Path(sysconfig.get_paths()["purelib"])


def passages(root: Path, count: int, words: int = PASSAGE_WORDS) -> list[str]:
    """`count` passages of `words` words, from the files under `root` in a seeded order."""
    files = sorted(
        str(Path(folder) / name)
        for folder, _, names in os.walk(root)
        for name in names
        if name.endswith(_SUFFIXES)
    )
    random.Random(SEED).shuffle(files)
    out: list[str] = []
    for name in files:
        try:
            tokens = Path(name).read_text(errors="ignore").split()
        except OSError:
            continue
        for start in range(0, len(tokens) - words // 2, words):
            out.append(" ".join(tokens[start : start + words]))
            if len(out) == count:
                return out
    if len(out) < count:
        raise SystemExit(f"only {len(out):,} passages under {root}; asked for {count:,}")
    return out


def queries(texts: Sequence[str], count: int, kind: str, seed: int) -> list[str]:
    """Keyword queries (2-3 words of one passage) or questions (15 consecutive words)."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < count:
        words = _WORD.findall(rng.choice(texts))
        if len(words) < 20:
            continue
        if kind == "keywords":
            out.append(" ".join(rng.sample(words, rng.choice((2, 3)))))
        else:
            start = rng.randrange(len(words) - 15)
            out.append(" ".join(words[start : start + 15]))
    return out


# -- systems ------------------------------------------------------------------------------
def build_store(
    root: Path, texts: Sequence[str], embedder: Any, batch: int = 500
) -> tuple[Any, float, int]:
    """A UDA embedded store of one Document per passage; (client, seconds, chunks)."""
    import uda
    from ontology import Document, Sensitivity
    from uda.config import embedded_profile

    client = uda.Client(embedded_profile(root), embedder=embedder)
    epoch = datetime(2026, 1, 1, tzinfo=UTC)
    started = time.perf_counter()
    for first in range(0, len(texts), batch):
        client.ingest(
            [
                Document(
                    element_id=f"p{i}",
                    name=f"Passage {i}",
                    text=texts[i],
                    sensitivity=Sensitivity.INTERNAL,
                    timestamp=epoch - timedelta(minutes=i),
                )
                for i in range(first, min(first + batch, len(texts)))
            ]
        )
        print(f"  ingested {min(first + batch, len(texts)):,}/{len(texts):,}", file=sys.stderr)
    seconds = time.perf_counter() - started
    sqlite = _sqlite(client)
    chunks = len(client._call(sqlite.text_chunk_states()))
    return client, seconds, chunks


def _sqlite(client: Any) -> Any:
    """The store's SQLite connector (system of record and lexical leg)."""
    from connectors.sqlite.connector import SQLiteConnector

    return next(c for c in client.connectors if isinstance(c, SQLiteConnector))


class ExactVectors:
    """Every stored chunk vector: what the vector leg's hits are held to."""

    def __init__(self, client: Any) -> None:
        sqlite = _sqlite(client)
        ids: list[str] = []
        blobs: list[bytes] = []
        with sqlite._snapshot() as conn:
            for chunk_id, blob in conn.execute("SELECT chunk_id, embedding FROM chunks"):
                ids.append(chunk_id)
                blobs.append(blob)
        self._row = {chunk_id: row for row, chunk_id in enumerate(ids)}
        self._matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(ids), -1)

    def recall(self, vector: Sequence[float], found: Sequence[str], k: int) -> float:
        """The share of the exact `k` nearest that `found` holds.

        A found chunk counts when no more than `k - 1` chunks are nearer, so that of chunks
        tied at the `k`-th distance (duplicate passages) any is right.
        """
        scores = self._matrix @ np.asarray(vector, dtype=np.float32)
        k = min(k, len(scores))
        kth = float(np.partition(scores, len(scores) - k)[len(scores) - k])
        right = sum(1 for cid in set(found) if scores[self._row[cid]] >= kth - 1e-6)
        return min(right, k) / k


def build_tantivy(folder: Path, texts: Sequence[str]) -> tuple[Any, float]:
    """The bare engine over the passages: (index, seconds to index them)."""
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", tokenizer_name="en_stem")
    index = tantivy.Index(builder.build(), path=str(folder))
    started = time.perf_counter()
    writer = index.writer(heap_size=200_000_000, num_threads=1)
    for text in texts:
        writer.add_document(tantivy.Document(text=text))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    return index, time.perf_counter() - started


def _timed(call: Callable[[], object]) -> tuple[float, float]:
    cpu = time.process_time()
    wall = time.perf_counter()
    call()
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def measure(
    client: Any, embedder: Any, index: Any, qs: Sequence[str]
) -> dict[str, dict[str, float]]:
    """Every system on every query, in turn; p50 and p95 of each figure."""
    from connectors.analyzer import query_terms
    from connectors.contract.records import SearchFilter
    from connectors.sql_filters import compile_filter
    from connectors.sqlite import lexical_exhaustive

    sqlite = _sqlite(client)
    chroma = next(c for c in client.connectors if c.name == "chroma")
    caller = SearchFilter(max_sensitivity_rank=1)
    searcher = index.searcher()
    run = client._call

    def exhaustive(query: str) -> None:
        terms = query_terms(query)
        where, params = compile_filter(caller, table="t")
        with sqlite._snapshot() as conn:
            n_docs, average = sqlite._visible_stats(conn, where, params)
            lexical_exhaustive.best_chunks(conn, terms, where, params, n_docs, average, K)

    def vector_leg(vector: list[float]) -> list[Any]:
        return run(chroma.vector_search(vector, K, caller))

    def bare(query: str) -> None:
        parsed, _ = index.parse_query_lenient(query, ["text"])
        searcher.search(parsed, K, count=False)

    figures: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        figures.setdefault(name, []).append(value)

    # The vector leg's hits, held to an exact scan once every timing is taken: the scan's
    # BLAS threads spin on after it and would be timed with the next query's calls.
    answered: list[tuple[list[float], list[str]]] = []
    for j, query in enumerate([*qs[:5], *qs]):
        warm = j < 5
        vector = embedder.embed_query(query).tolist()
        found: list[Any] = []
        order: list[tuple[str, Callable[[], object]]] = [
            ("tantivy", lambda q=query: bare(q)),
            ("engine", lambda q=query: run(sqlite.text_search(q, K, caller))),
            ("exhaustive", lambda q=query: exhaustive(q)),
            ("vector", lambda v=vector, hits=found: hits.extend(vector_leg(v))),
        ]
        if j % 2:
            order.reverse()
        for name, call in order:
            wall, cpu = _timed(call)
            if not warm:
                add(f"{name}_ms", wall)
                add(f"{name}_cpu_ms", cpu)
        if not warm:
            answered.append((vector, [hit.chunk_id for hit in found]))
        cpu_started = time.process_time()
        started = time.perf_counter()
        response = client.search(query, limit=LIMIT, clearance_scope=list(CALLER), expand_depth=1)
        _ = response.results
        if not warm:
            add("search_ms", (time.perf_counter() - started) * 1000)
            add("search_cpu_ms", (time.process_time() - cpu_started) * 1000)
            for phase, value in response.explain().plan.timings_ms.items():
                add(f"search_{phase}_ms", value)
    exact = ExactVectors(client)
    for vector, chunk_ids in answered:
        add("vector_recall", exact.recall(vector, chunk_ids, K))
    return {
        name: {
            "p50": statistics.median(values),
            "p95": sorted(values)[max(0, math.ceil(0.95 * len(values)) - 1)],
            "mean": statistics.fmean(values),
            "min": min(values),
        }
        for name, values in figures.items()
    }


# -- report -------------------------------------------------------------------------------
def summary(report: Mapping[str, Any]) -> str:
    """The report as markdown tables."""
    lines = [
        "# Lexical leg at scale (issue 42)",
        "",
        f"Machine: {report['machine']}; {report['queries']} queries of each kind; "
        f"{report['date']}. Vectors: without a model (`benchmarks/model_free.py`): "
        "`random` unit vectors (as issue 42 measured; an HNSW index's worst case) or "
        "`hashed` words (near when words are shared).",
        "",
        "| passages | chunks | vectors | query kind | Tantivy k=100 | engine leg k=100 | ratio "
        "| exhaustive leg k=100 | search p50 (limit 10) | search CPU p50 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size, kind, row in _rows(report):
        ratio = row["engine_ms"]["p50"] / row["tantivy_ms"]["p50"]
        lines.append(
            f"{_lead(size, kind)} | {row['tantivy_ms']['p50']:.2f} ms "
            f"| {row['engine_ms']['p50']:.2f} ms | {ratio:.1f}x "
            f"| {row['exhaustive_ms']['p50']:.2f} ms "
            f"| {row['search_ms']['p50']:.1f} ms | {row['search_cpu_ms']['p50']:.1f} ms |"
        )
    lines += ["", "Write path and the search's phases (p50, ms):", ""]
    lines += [
        "| passages | chunks | vectors | query kind | ingest chunks/s (no embedding) "
        "| Tantivy indexing passages/s | phase 1 | phase 2 | phase 3 | total |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size, kind, row in _rows(report):
        phases = [
            row.get(f"search_{p}_ms", {}).get("p50", float("nan"))
            for p in ("phase1", "phase2", "phase3", "total")
        ]
        lines.append(
            f"{_lead(size, kind)} | {size['ingest_chunks_per_s']:.0f} "
            f"| {size['tantivy_passages_per_s']:.0f} | "
            + " | ".join(f"{p:.2f}" for p in phases)
            + " |"
        )
    lines += ["", "The vector leg (k=100) against an exact scan of the stored vectors:", ""]
    lines += [
        "| passages | chunks | vectors | query kind | vector leg p50 | CPU p50 "
        "| recall@100 mean | recall@100 min |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size, kind, row in _rows(report):
        recall = row["vector_recall"]
        lines.append(
            f"{_lead(size, kind)} | {row['vector_ms']['p50']:.2f} ms "
            f"| {row['vector_cpu_ms']['p50']:.2f} ms | {recall['mean']:.3f} | {recall['min']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def _rows(report: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], str, Mapping[str, Any]]]:
    return [(size, kind, row) for size in report["sizes"] for kind, row in size["kinds"].items()]


def _lead(size: Mapping[str, Any], kind: str) -> str:
    return f"| {size['passages']:,} | {size['chunks']:,} | {size['vectors']} | {kind}"


def _machine() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{platform.machine()}, {os.cpu_count()} CPUs, load {load:.2f} at the start"


def run(
    sizes: Sequence[int],
    n_queries: int,
    out: Path,
    keep: Path | None,
    vectors: Sequence[str] = ("random",),
) -> dict[str, Any]:
    """Build and measure every size with every kind of vectors; write the report."""
    report: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": _machine(),
        "queries": n_queries,
        "sizes": [],
    }
    texts_all = passages(prose_root(), max(sizes))
    for size in sizes:
        texts = texts_all[:size]
        with tempfile.TemporaryDirectory(dir=keep) as folder:
            print(f"{size:,} passages: Tantivy", file=sys.stderr)
            (Path(folder) / "tantivy").mkdir()
            index, tantivy_s = build_tantivy(Path(folder) / "tantivy", texts)
            for name in vectors:
                print(f"{size:,} passages: UDA store, {name} vectors", file=sys.stderr)
                embedder = EMBEDDERS[name]()
                client, ingest_s, chunks = build_store(Path(folder) / name, texts, embedder)
                kinds: dict[str, Any] = {}
                try:
                    for offset, kind in enumerate(("keywords", "questions")):
                        qs = queries(texts, n_queries, kind, SEED + offset)
                        print(f"{size:,} passages, {name} vectors: {kind}", file=sys.stderr)
                        kinds[kind] = measure(client, embedder, index, qs)
                finally:
                    client.close()
                report["sizes"].append(
                    {
                        "passages": size,
                        "vectors": name,
                        "chunks": chunks,
                        "ingest_s": ingest_s,
                        "ingest_chunks_per_s": chunks / ingest_s,
                        "tantivy_s": tantivy_s,
                        "tantivy_passages_per_s": size / tantivy_s,
                        "kinds": kinds,
                    }
                )
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "summary.md").write_text(summary(report))
    return report


def _vector_kinds(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = sorted(set(names) - set(EMBEDDERS))
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"vectors must be among {', '.join(EMBEDDERS)}, comma-separated: {text!r}"
        )
    return list(dict.fromkeys(names))


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"sizes must be numbers, e.g. 30000,300000: {text!r}"
        ) from None
    if not sizes or any(s < 100 for s in sizes):
        raise argparse.ArgumentTypeError(f"every size must be at least 100: {text!r}")
    return sizes


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and run."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.lexical_scale",
        description="The lexical leg and search against the bare Tantivy engine, at growing "
        "corpus sizes, on real prose (issue 42).",
        epilog="example: python -m benchmarks.lexical_scale --sizes 30000 --queries 200\n"
        "Each store of the 300,000-passage point ingests for about 25 minutes on two cores.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=[30_000, 300_000],
        help="passages per point, comma-separated (default 30000,300000)",
    )
    parser.add_argument(
        "--vectors",
        type=_vector_kinds,
        default=["random", "hashed"],
        help="model-free vectors to fill each store with, comma-separated: random (issue "
        "42's, an HNSW index's worst case), hashed (hashed words); default random,hashed",
    )
    parser.add_argument("--queries", type=int, default=200, help="queries of each kind (200)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"(default {DEFAULT_OUT})")
    parser.add_argument(
        "--tmp", type=Path, default=None, help="where the stores are built (default: the system's)"
    )
    args = parser.parse_args(argv)
    if args.queries < 1:
        parser.error("--queries must be at least 1")
    report = run(args.sizes, args.queries, args.out, args.tmp, args.vectors)
    print(summary(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
