"""Structured retrieval and paging on the synthetic ontology: latency of lists and of deep pages.

Per corpus size (the preset's scale sizes) on the embedded profile: the corpus is written
through `client.ingest` with the embedder double, then three structured queries run, each
for several callers (the clearances of the scale suite):

- `list newest`: every visible asset, newest first (`order_by="-timestamp"`), limit 20;
- `relation path + date range`: documents of one repository (`partOf.name`) in a 90-day
  window, newest first, limit 20 — the issue's "structured query" target;
- `page 1` and `page 50` of `list newest` (limit 20): page 50 is timed from the cursor
  page 49 handed out, so the figure is what one more page costs a caller deep in a list.

Wall time is the client's (the planner, the store and hydration of the results).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from benchmarks.metrics import latency_summary
from benchmarks.suites import Context, SuiteResult
from benchmarks.synthetic import EPOCH, SyntheticCorpus, SyntheticEmbedder, SyntheticSpec
from benchmarks.systems import make_profile, open_client

DATASET = "synthetic"
LIMIT = 20
DEEP_PAGE = 50
CALLERS: tuple[tuple[str, ...], ...] = (
    ("internal",),
    ("confidential", "project:p1"),
    ("restricted", "project:*"),
)
WINDOW_DAYS = 90


def run(ctx: Context, result: SuiteResult) -> None:
    """Every size of the preset's scale points, embedded profile."""
    preset = ctx.preset
    if not preset.scale_sizes:
        result.status, result.reason = "skipped", "no scale sizes left (see --max-chunks)"
        return
    for size in preset.scale_sizes:
        corpus = SyntheticCorpus(spec=SyntheticSpec(chunks=size, queries=1))
        double = SyntheticEmbedder(corpus)
        profile = make_profile("embedded", f"structured{size}", ctx.work, ctx.servers)
        ctx.log(f"structured {size}: ingest {corpus.n_assets} assets")
        with open_client(profile, double) as client:
            client.ingest(corpus.context_nodes())
            for batch in corpus.batches():
                client.ingest(batch.elements, batch.relations)
                if batch.index and batch.index % 50 == 0:
                    ctx.log(f"  batch {batch.index}/{corpus.n_batches}")
            _measure(ctx, result, client, size)


def _timed(call: Callable[[], Any], repeats: int) -> list[float]:
    walls: list[float] = []
    for _ in range(repeats):
        started = time.perf_counter()
        response = call()
        _ = response.results  # hydrated, as a caller reads them
        walls.append((time.perf_counter() - started) * 1000)
    return walls


def _measure(ctx: Context, result: SuiteResult, client: Any, size: int) -> None:
    repeats = max(ctx.preset.scale_queries // len(CALLERS), 5)
    since = (EPOCH - timedelta(days=WINDOW_DAYS)).isoformat()
    queries: dict[str, dict[str, Any]] = {
        "list newest": {"order_by": "-timestamp"},
        "relation path + date range": {
            "order_by": "-timestamp",
            "context_filters": {
                "partOf.name": "repository 1",
                "timestamp": {"$gte": since},
                "element_type": "Document",
            },
        },
    }
    walls: dict[str, list[float]] = {name: [] for name in [*queries, "page 1", "page 50"]}
    returned: dict[str, int] = dict.fromkeys(walls, 0)
    for caller in CALLERS:
        scope = list(caller)
        for name, fields in queries.items():
            run_query = lambda f=fields, s=scope: client.search(  # noqa: E731
                None, limit=LIMIT, clearance_scope=s, **f
            )
            _timed(run_query, 2)  # warm
            walls[name] += _timed(run_query, repeats)
            returned[name] += len(run_query().results)
        cursor = _cursor_before(client, scope, DEEP_PAGE)
        if cursor is None:
            result.notes.append(f"{size}: fewer than {DEEP_PAGE} pages for {caller}")
            continue
        first = lambda s=scope: client.search(  # noqa: E731
            None, limit=LIMIT, clearance_scope=s, order_by="-timestamp"
        )
        deep = lambda c=cursor, s=scope: client.search(  # noqa: E731
            None, limit=LIMIT, clearance_scope=s, order_by="-timestamp", cursor=c
        )
        _timed(first, 2)
        _timed(deep, 2)
        walls["page 1"] += _timed(first, repeats)
        walls["page 50"] += _timed(deep, repeats)
        returned["page 1"] += len(first().results)
        returned["page 50"] += len(deep().results)
    for name, values in walls.items():
        if not values:
            continue
        summary = latency_summary(values)
        result.add(
            dataset=DATASET,
            system="uda",
            method=f"structured: {name}",
            profile="embedded",
            metrics={f"wall_{k}": v for k, v in summary.items() if k != "n"}
            | {"results": returned[name] / len(CALLERS)},
            params={"size": size, "limit": LIMIT, "calls": len(values)},
        )
    # Aggregates (issue 16): every visible asset counted by month (UTC), the same callers.
    counted: list[float] = []
    groups = 0.0
    pushed = True
    for caller in CALLERS:
        by_month = lambda s=list(caller): client.aggregate(  # noqa: E731
            clearance_scope=s, temporal=("timestamp", "month")
        )
        by_month()  # warm
        for _ in range(repeats):
            started = time.perf_counter()
            answer = by_month()
            counted.append((time.perf_counter() - started) * 1000)
            pushed = pushed and answer.path == "pushdown"
        groups += len(answer.rows) / len(CALLERS)
    summary = latency_summary(counted)
    result.add(
        dataset=DATASET,
        system="uda",
        method="aggregate: count by month",
        profile="embedded",
        metrics={f"wall_{k}": v for k, v in summary.items() if k != "n"}
        | {"groups": groups, "pushed_down": 1.0 if pushed else 0.0},
        params={"size": size, "calls": len(counted)},
    )
    page1 = walls["page 1"]
    page50 = walls["page 50"]
    if page1 and page50:
        ratio = latency_summary(page50)["p50_ms"] / latency_summary(page1)["p50_ms"]
        result.add(
            dataset=DATASET,
            system="uda",
            method="structured: page 50 / page 1",
            profile="embedded",
            metrics={"p50_ratio": ratio},
            params={"size": size, "limit": LIMIT},
        )
    ctx.log(f"structured {size}: done")


def _cursor_before(client: Any, scope: list[str], page: int) -> str | None:
    """The cursor that page `page` of `list newest` starts from (None: the list is shorter)."""
    cursor: str | None = None
    for _ in range(page - 1):
        response = client.search(
            None, limit=LIMIT, clearance_scope=scope, order_by="-timestamp", cursor=cursor
        )
        cursor = response.next_cursor
        if cursor is None:
            return None
    return cursor
