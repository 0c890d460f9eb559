"""`python -m benchmarks.lexical_scale`: the lexical leg and search at 30k and 300k passages.

Issue 42's measurement, as a suite: real prose and code (passages of the documentation,
docstrings and sources installed beside the project), filled through `client.ingest` with an
embedder that returns seeded random unit vectors (no model cost), and searched query by
query, each query by every system in turn so that all meet the machine alike:

- `tantivy`: the bare engine over the same passages (its own `en_stem` analyzer, its query
  parser's OR of the words), k = 100: the floor the lexical leg is held to;
- `engine`: UDA's lexical leg as the search calls it (`text_search`, k = 100) on the engine
  path (ADR 50): Tantivy candidates, exact per-caller BM25;
- `exhaustive`: the same leg's exhaustive path on the same store and snapshot (every posting
  of every query term scored in SQL): the design before ADR 50, measured in the same run;
- `search`: `client.search` (limit 10, depth 1, the query embedding excluded): wall time,
  CPU time of the process per search, and the planner's phases.

Queries are keyword queries (2-3 words of a passage) and questions (15 consecutive words).
Writes `report.json` and `summary.md` under --out and prints the summary.
"""

from __future__ import annotations

import argparse
import hashlib
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
import numpy.typing as npt

from benchmarks.datasets import PROJECT_ROOT

DEFAULT_OUT = PROJECT_ROOT / "benchmarks" / "results" / "lexical-scale"
PASSAGE_WORDS = 120
DIMENSION = 384
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


class RandomEmbedder:
    """Seeded random unit vectors, one per distinct text: search and writes without a model."""

    dimension = DIMENSION
    fingerprint = f"random-{DIMENSION}d"

    def _vector(self, text: str) -> npt.NDArray[np.float32]:
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        rng = np.random.default_rng(int.from_bytes(digest, "little"))
        vector = rng.standard_normal(DIMENSION).astype(np.float32)
        return (vector / np.linalg.norm(vector)).astype(np.float32)

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One vector per text."""
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts])

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """The query's vector."""
        return self._vector(text)


# -- systems ------------------------------------------------------------------------------
def build_store(root: Path, texts: Sequence[str], batch: int = 500) -> tuple[Any, float, int]:
    """A UDA embedded store of one Document per passage; (client, seconds, chunks)."""
    import uda
    from ontology import Document, Sensitivity
    from uda.config import embedded_profile

    client = uda.Client(embedded_profile(root), embedder=RandomEmbedder())
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


def measure(client: Any, index: Any, qs: Sequence[str]) -> dict[str, dict[str, float]]:
    """Every system on every query, in turn; p50 and p95 of each figure."""
    from connectors.analyzer import query_terms
    from connectors.contract.records import SearchFilter
    from connectors.sql_filters import compile_filter
    from connectors.sqlite import lexical_exhaustive

    sqlite = _sqlite(client)
    caller = SearchFilter(max_sensitivity_rank=1)
    searcher = index.searcher()
    run = client._call

    def exhaustive(query: str) -> None:
        terms = query_terms(query)
        where, params = compile_filter(caller, table="t")
        with sqlite._snapshot() as conn:
            n_docs, average = sqlite._visible_stats(conn, where, params)
            lexical_exhaustive.best_chunks(conn, terms, where, params, n_docs, average, K)

    def bare(query: str) -> None:
        parsed, _ = index.parse_query_lenient(query, ["text"])
        searcher.search(parsed, K, count=False)

    figures: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        figures.setdefault(name, []).append(value)

    for j, query in enumerate([*qs[:5], *qs]):
        warm = j < 5
        order: list[tuple[str, Callable[[], object]]] = [
            ("tantivy", lambda q=query: bare(q)),
            ("engine", lambda q=query: run(sqlite.text_search(q, K, caller))),
            ("exhaustive", lambda q=query: exhaustive(q)),
        ]
        if j % 2:
            order.reverse()
        for name, call in order:
            wall, cpu = _timed(call)
            if not warm:
                add(f"{name}_ms", wall)
                add(f"{name}_cpu_ms", cpu)
        cpu_started = time.process_time()
        started = time.perf_counter()
        response = client.search(query, limit=LIMIT, clearance_scope=list(CALLER), expand_depth=1)
        _ = response.results
        if not warm:
            add("search_ms", (time.perf_counter() - started) * 1000)
            add("search_cpu_ms", (time.process_time() - cpu_started) * 1000)
            for phase, value in response.explain().plan.timings_ms.items():
                add(f"search_{phase}_ms", value)
    return {
        name: {
            "p50": statistics.median(values),
            "p95": sorted(values)[max(0, math.ceil(0.95 * len(values)) - 1)],
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
        f"{report['date']}.",
        "",
        "| passages | chunks | query kind | Tantivy k=100 | engine leg k=100 | ratio "
        "| exhaustive leg k=100 | search p50 (limit 10) | search CPU p50 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size in report["sizes"]:
        for kind, row in size["kinds"].items():
            ratio = row["engine_ms"]["p50"] / row["tantivy_ms"]["p50"]
            lines.append(
                f"| {size['passages']:,} | {size['chunks']:,} | {kind} "
                f"| {row['tantivy_ms']['p50']:.2f} ms | {row['engine_ms']['p50']:.2f} ms "
                f"| {ratio:.1f}x | {row['exhaustive_ms']['p50']:.2f} ms "
                f"| {row['search_ms']['p50']:.1f} ms | {row['search_cpu_ms']['p50']:.1f} ms |"
            )
    lines += ["", "Write path and the search's phases (p50, ms):", ""]
    lines += [
        "| passages | ingest chunks/s (no embedding) | Tantivy indexing passages/s "
        "| query kind | phase 1 | phase 2 | phase 3 | total |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size in report["sizes"]:
        for kind, row in size["kinds"].items():
            phases = [
                row.get(f"search_{p}_ms", {}).get("p50", float("nan"))
                for p in ("phase1", "phase2", "phase3", "total")
            ]
            lines.append(
                f"| {size['passages']:,} | {size['ingest_chunks_per_s']:.0f} "
                f"| {size['tantivy_passages_per_s']:.0f} | {kind} | "
                + " | ".join(f"{p:.2f}" for p in phases)
                + " |"
            )
    return "\n".join(lines) + "\n"


def _machine() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{platform.machine()}, {os.cpu_count()} CPUs, load {load:.2f} at the start"


def run(sizes: Sequence[int], n_queries: int, out: Path, keep: Path | None) -> dict[str, Any]:
    """Build and measure every size; write the report."""
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
            print(f"{size:,} passages: UDA store", file=sys.stderr)
            client, ingest_s, chunks = build_store(Path(folder) / "uda", texts)
            print(f"{size:,} passages: Tantivy", file=sys.stderr)
            (Path(folder) / "tantivy").mkdir()
            index, tantivy_s = build_tantivy(Path(folder) / "tantivy", texts)
            kinds: dict[str, Any] = {}
            try:
                for offset, kind in enumerate(("keywords", "questions")):
                    qs = queries(texts, n_queries, kind, SEED + offset)
                    print(f"{size:,} passages: {kind}", file=sys.stderr)
                    kinds[kind] = measure(client, index, qs)
            finally:
                client.close()
        report["sizes"].append(
            {
                "passages": size,
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
        "The 300,000-passage point ingests for about 25 minutes on two cores.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=[30_000, 300_000],
        help="passages per point, comma-separated (default 30000,300000)",
    )
    parser.add_argument("--queries", type=int, default=200, help="queries of each kind (200)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"(default {DEFAULT_OUT})")
    parser.add_argument(
        "--tmp", type=Path, default=None, help="where the stores are built (default: the system's)"
    )
    args = parser.parse_args(argv)
    if args.queries < 1:
        parser.error("--queries must be at least 1")
    report = run(args.sizes, args.queries, args.out, args.tmp)
    print(summary(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
