"""KEPs: the whole ontology pipeline on real decision records (benchmarks/keps.py).

UDA answers every question kind as each caller, with graph context (depth 1) and, for the
metadata questions, context filters. The floor and txtai answer the questions without filters
(`lookup`, `exact_title`, `identifier`, `replaced_by`; as results only: they have no graph
context in their answer) under the same clearance (a numpy mask; txtai's SQL). A hit on a
proposal's README counts as the proposal.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from benchmarks import kep_questions as questions
from benchmarks import keps as kep_data
from benchmarks.baselines.floor import LEVELS, FlatCorpus, NumpyFloor
from benchmarks.baselines.txtai_peer import TxtaiPeer
from benchmarks.metrics import latency_summary
from benchmarks.suites import Context, SuiteResult
from benchmarks.systems import ingest, make_profile, open_client
from uda.query.clearance import Clearance

DATASET = "keps"
LIMIT = 10


def _as_decision(element_id: str) -> str:
    return (
        "kep:" + element_id.removeprefix("kepdoc:")
        if element_id.startswith("kepdoc:")
        else element_id
    )


def _dedupe(ids: list[str]) -> list[str]:
    return list(dict.fromkeys(_as_decision(e) for e in ids))


def run(ctx: Context, result: SuiteResult) -> None:
    """Run the KEP rows."""
    root = ctx.data / "keps" / "keps"
    if not root.is_dir():
        result.status, result.reason = "skipped", "no KEP data"
        return
    preset = ctx.preset
    keps = kep_data.read_keps(root, limit=preset.keps_limit)
    elements, relations = kep_data.kep_elements(keps, max_words=preset.keps_max_words)
    queries = questions.kep_queries(keps, lookups=preset.keps_lookups, elements=elements)
    kinds = sorted({q.kind for q in queries})
    result.notes.append(
        f"keps: {len(keps)} proposals -> {len(elements)} elements, {len(relations)} relations; "
        f"{len(queries)} questions ({', '.join(kinds)}) x {len(questions.CALLERS)} callers; "
        f"README text capped at {preset.keps_max_words or 'no'} words"
    )
    for profile_name in ctx.quality_profiles():
        profile = make_profile(profile_name, DATASET, ctx.work, ctx.servers)  # type: ignore[arg-type]
        ctx.log(f"keps: ingest {len(elements)} elements ({profile_name})")
        with open_client(profile, ctx.embedder) as client:
            stats = ingest(client, elements, relations, progress=ctx.log)
            times: list[float] = []

            def ask(
                q: questions.KepQuery, caller: tuple[str, ...], times: list[float] = times
            ) -> questions.Answer:
                options: dict[str, Any] = dict(q.options)
                started = time.perf_counter()
                res = client.search(q.text, limit=LIMIT, clearance_scope=list(caller), **options)
                rows = res.results
                times.append((time.perf_counter() - started) * 1000)
                context: dict[str, list[tuple[str, str, str]]] = {}
                for r in rows:
                    context.setdefault(_as_decision(r.element_id), []).extend(
                        (n["element_id"], n["relation"], n["direction"]) for n in r.context_nodes
                    )
                # A README shares its proposal's clearance: mapping it loses no leak check.
                return questions.Answer(ids=_dedupe([r.element_id for r in rows]), context=context)

            figures = questions.evaluate(queries, keps, ask, limit=LIMIT)
        _report(result, figures, "uda", profile_name, times, {"chunks": stats.chunks})
    _baselines(ctx, result, keps)


def _report(
    result: SuiteResult,
    figures: dict[str, dict[str, float]],
    system: str,
    profile: str | None,
    times: list[float],
    params: dict[str, Any],
) -> None:
    for kind, metrics in sorted(figures.items()):
        if kind == "all":
            continue
        result.add(
            dataset=DATASET,
            system=system,
            method=kind,
            profile=profile,
            metrics=metrics,
            params=params,
        )
    summary = latency_summary(times) if times else {}
    result.add(
        dataset=DATASET,
        system=system,
        method="clearance",
        profile=profile,
        metrics={**figures["all"], **({"p50_ms": summary["p50_ms"]} if summary else {})},
        params=params,
    )


def _baselines(ctx: Context, result: SuiteResult, keps: list[kep_data.Kep]) -> None:
    elements, _ = kep_data.kep_elements(keps, max_words=ctx.preset.keps_max_words)
    assets = [e for e in elements if hasattr(e, "text")]
    ids = [e.element_id for e in assets]
    texts = [f"{e.name}\n{e.text}" for e in assets]  # type: ignore[attr-defined]
    table = kep_data.clearance_table(keps)
    ranks = np.array([LEVELS.index(table[i][0]) for i in ids], dtype=np.int8)
    scopes = [table[i][1] for i in ids]
    queries = [
        q
        for q in questions.kep_queries(keps, lookups=ctx.preset.keps_lookups, elements=elements)
        if not q.options
    ]
    ctx.log(f"keps: floor and txtai over {len(ids)} records")
    floor = NumpyFloor(
        FlatCorpus(
            vectors=ctx.embedder.embed_documents(texts),
            owner=np.arange(len(ids), dtype=np.int64),
            asset_ids=ids,
            asset_rank=ranks,
            asset_scope=scopes,
        ),
        bm25=False,
    )
    times: list[float] = []

    def floor_ask(q: questions.KepQuery, caller: tuple[str, ...]) -> questions.Answer:
        vector = ctx.embedder.embed_query(q.text)
        started = time.perf_counter()
        hits = floor.search(
            vector,
            q.text,
            limit=LIMIT,
            depth=0,
            clearance=Clearance.parse(caller),
            weights={"lexical": 0.0, "centrality": 0.0},
        )
        times.append((time.perf_counter() - started) * 1000)
        return questions.Answer(ids=_dedupe([h.element_id for h in hits]))

    _report(
        result, questions.evaluate(queries, keps, floor_ask, limit=LIMIT), "floor", None, times, {}
    )

    peer = TxtaiPeer(hybrid=True)
    peer.index(
        (i, {"text": f"{e.name}. {e.text}", "eid": i, "rank": int(r), "scope": s or ""})  # type: ignore[attr-defined]
        for i, e, r, s in zip(ids, assets, ranks, scopes, strict=True)
    )
    txtai_times: list[float] = []
    try:

        def txtai_ask(q: questions.KepQuery, caller: tuple[str, ...]) -> questions.Answer:
            started = time.perf_counter()
            rows = peer.search_cleared(q.text, LIMIT, Clearance.parse(caller))
            txtai_times.append((time.perf_counter() - started) * 1000)
            return questions.Answer(ids=_dedupe([str(r["eid"]) for r in rows]))

        figures = questions.evaluate(queries, keps, txtai_ask, limit=LIMIT)
    finally:
        peer.close()
    _report(
        result,
        figures,
        "txtai",
        None,
        txtai_times,
        {"filter": "SQL where rank/scope", "hybrid": True},
    )
