"""One turn of `benchmarks.revisions`, run inside a revision's own checkout.

`python revision_turn.py build STORE CHUNKS QUERIES [CORPUS]` fills an embedded store with
the synthetic corpus (or with `prose`: passages of real prose and code, one `internal`
Document each, as `benchmarks.lexical_scale` builds them, searched by an `internal` caller
with keyword and question queries in turn; revisions since that suite only);
`python revision_turn.py measure STORE CHUNKS QUERIES [CORPUS]` searches it as the scale
suite does (limit 10, depth 2 then 1, callers rotating through four clearances, the query
embedding excluded) and prints one JSON line: per depth, the p50 of the wall time,
of each planner phase, of hydrating the results, and of the process's CPU time per search
(all its threads: what the search cost, whatever else the machine was doing), in all and
per kind of thread (`THREAD_GROUPS`).
`python revision_turn.py serve STORE CHUNKS QUERIES [CORPUS]` makes the same searches one at a time,
as stdin asks (`J DEPTH` per line), and prints each one's figures as a JSON line.

It imports only what every revision since the scale suite has had (`benchmarks.synthetic`,
`uda.Client`, `uda.config.embedded_profile`, `plan.timings_ms`), and the revision's own
packages first: the working directory is put at the front of the path, and this file's
folder is taken off it, so the benchmark package of the checkout that launched the turn is
never the one measured.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

LIMIT = 10
DEPTHS = (2, 1)
WARMUP = 5
CALLERS = (
    ["public"],
    ["internal"],
    ["confidential", "project:p1"],
    ["restricted", "project:*"],
)


def _own_checkout_first() -> None:
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != Path(here)]
    sys.path.insert(0, os.getcwd())


def main(argv: list[str]) -> int:
    """Build or measure, as argv says."""
    action, store, chunks, queries = argv[0], Path(argv[1]), int(argv[2]), int(argv[3])
    kind = argv[4] if len(argv) > 4 else "synthetic"
    _own_checkout_first()
    import uda
    from uda.config import embedded_profile

    corpus = _prose(chunks, queries + WARMUP) if kind == "prose" else _synthetic(chunks, queries)
    profile = embedded_profile(store)
    if action == "build":
        started = time.perf_counter()
        with uda.Client(profile, embedder=corpus.embedder) as client:
            for elements, relations in corpus.batches():
                client.ingest(elements, relations)
        print(json.dumps({"build_s": time.perf_counter() - started}))
        return 0
    with uda.Client(profile, embedder=corpus.embedder) as client:

        def search(j: int, depth: int) -> dict[str, float]:
            caller = corpus.callers[j % len(corpus.callers)]
            return _search_once(client, corpus.queries[j], list(caller), depth)

        if action == "serve":
            return _serve(search)
        out: dict[str, dict[str, float]] = {}
        for depth in DEPTHS:
            figures: dict[str, list[float]] = {}
            for j in range(WARMUP + queries):
                measured = search(j, depth)
                if j >= WARMUP:
                    for name, value in measured.items():
                        figures.setdefault(name, []).append(value)
            out[str(depth)] = {name: statistics.median(v) for name, v in figures.items()}
    print(json.dumps(out))
    return 0


class _Corpus:
    """What a turn builds and asks: batches of (elements, relations), queries, callers."""

    def __init__(self, embedder, batches, queries, callers) -> None:
        self.embedder = embedder
        self.batches = batches
        self.queries = queries
        self.callers = callers


def _synthetic(chunks: int, queries: int) -> _Corpus:
    from benchmarks.synthetic import SyntheticCorpus, SyntheticEmbedder, SyntheticSpec

    corpus = SyntheticCorpus(spec=SyntheticSpec(chunks=chunks, queries=queries + WARMUP))

    def batches():
        yield corpus.context_nodes(), ()
        for batch in corpus.batches():
            yield batch.elements, batch.relations

    return _Corpus(SyntheticEmbedder(corpus), batches, corpus.queries, CALLERS)


def _prose(passages: int, queries: int) -> _Corpus:
    from datetime import UTC, datetime, timedelta

    from benchmarks import lexical_scale as ls
    from ontology import Document, Sensitivity

    texts = ls.passages(ls.prose_root(), passages)
    keywords = ls.queries(texts, queries, "keywords", ls.SEED)
    questions = ls.queries(texts, queries, "questions", ls.SEED + 1)
    asked = [(keywords if j % 2 == 0 else questions)[j // 2] for j in range(queries)]
    # The Documents are spelled out as `lexical_scale.build_store` makes them, not taken from
    # it: this file runs inside the *measured* revision's checkout, and any helper added to
    # `lexical_scale` now would be missing from the older revisions it is compared with.
    epoch = datetime(2026, 1, 1, tzinfo=UTC)

    def batches(size: int = 500):
        for first in range(0, len(texts), size):
            yield (
                [
                    Document(
                        element_id=f"p{i}",
                        name=f"Passage {i}",
                        text=texts[i],
                        sensitivity=Sensitivity.INTERNAL,
                        timestamp=epoch - timedelta(minutes=i),
                    )
                    for i in range(first, min(first + size, len(texts)))
                ],
                (),
            )

    try:  # where the measured revision keeps it: `model_free` since ADR 61
        from benchmarks.model_free import RandomEmbedder
    except ImportError:
        RandomEmbedder = ls.RandomEmbedder
    return _Corpus(RandomEmbedder(), batches, asked, (["internal"],))


def _search_once(client, query: str, caller: list[str], depth: int) -> dict[str, float]:
    """One search, hydrated: its wall and CPU time, hydration and each planner phase, in ms.

    The CPU time is also given per kind of thread (`_thread_cpu`), which says where it went.
    """
    threads_started = _thread_cpu()
    cpu_started = time.process_time()
    started = time.perf_counter()
    response = client.search(query, limit=LIMIT, clearance_scope=caller, expand_depth=depth)
    returned = time.perf_counter()
    _ = response.results  # hydrated: what a caller pays for
    done = time.perf_counter()
    cpu = time.process_time() - cpu_started
    threads = _thread_cpu()
    figures = {
        "wall": (done - started) * 1000,
        "cpu": cpu * 1000,
        "hydrate": (done - returned) * 1000,
    }
    for group in THREAD_GROUPS:
        spent = threads.get(group, 0.0) - threads_started.get(group, 0.0)
        figures[f"cpu {group}"] = max(spent, 0.0) * 1000
    python_threads = sum(figures[f"cpu {group}"] for group in THREAD_GROUPS)
    figures["cpu native"] = max(cpu * 1000 - python_threads, 0.0)
    plan = getattr(response, "plan", None) or response.explain().plan
    figures.update(plan.timings_ms)
    return figures


# Where a search's CPU goes, by the thread that spent it: the client's event loop (the
# planner's Python and asyncio), the SQLite connector's workers (SQL, JSON rows, the lexical
# engine called from them), the default executor's (Chroma's and the graph's calls, which
# run there), and the caller's own thread (the hydration of results). `cpu native` is the
# rest of the process's CPU: threads Python did not start (Rust and ONNX pools) and any other.
THREAD_GROUPS = ("loop", "sqlite", "executor", "caller")


def _thread_group(name: str) -> str:
    if name == "uda-loop":
        return "loop"
    if name.startswith("uda-sqlite"):
        return "sqlite"
    if name.startswith("asyncio_"):
        return "executor"
    if name == "MainThread":
        return "caller"
    return "other"


def _thread_cpu() -> dict[str, float]:
    """CPU seconds so far of this process's Python threads, summed per `_thread_group`.

    A thread's own clock (`pthread_getcpuclockid`), read without stopping it; a thread that
    ends between two readings takes its time with it (to `cpu native`).
    """
    spent: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        try:
            seconds = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except (OSError, AttributeError):  # ended meanwhile, or not Linux: left out
            continue
        group = _thread_group(thread.name)
        spent[group] = spent.get(group, 0.0) + seconds
    return spent


def _serve(search) -> int:
    """Answer `J DEPTH` lines on stdin with one search's figures as a JSON line each.

    The comparison then searches two revisions' processes by turns of one search, so that
    both meet the machine as it is at that moment (`benchmarks.revisions`).
    """
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        j, depth = (int(part) for part in line.split())
        print(json.dumps(search(j, depth)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
