"""Bounded answers (issue 23): how big an answer is on large documents, by default and whole.

The corpus (`LargeCorpus`, seeded; benchmarks/large_corpus.py): the preset's `answers_docs`
`Document`s of about `answers_doc_chars` characters each (200,000 in quick and full), every
one a sequence of real English passages drawn with replacement from a fixed pool of
`answers_pool` of them
(a seeded sample of SciFact's abstracts and the five multi-hop sets' passages, read in
place). Each passage is a section: a markdown heading paragraph (`## <passage title>`) and
the passage's text, blank-line separated. The chunker starts a new chunk at a heading
(`uda.write.chunking`), so a passage's chunks are the same in every document that holds it:
the corpus has about (pool x 1.5) distinct chunk texts however many documents it has, and
the embedding cache does the rest. Documents differ by which passages they hold, in which
order. Each document is `partOf` one of up to 10 `Repository` elements and `governedBy` one
of up to 10 `Decision`s (one per 10 documents, at least one), each a knowledge asset with a
text as long, so the context nodes of a result carry long text too. Everything is
`internal`, and so is the caller.

The writer embeds each chunk with the element's name before it (`f"{name}\n{chunk}"`,
uda/write/writer.py), and documents have names of their own, so every (document, chunk)
pair would be a text of its own: 358,000 in the full preset, hours of embedding here.
`PassageEmbedder` gives the run's embedder each chunk's text without that name line: the
vectors are the model's vectors of the chunks' own text (each passage's first chunk opens
with its title). They rank much as the writer's would; this suite measures sizes and times,
not ranking quality.

Per profile of the run, the corpus is written through `client.ingest` (timed: the first
profile's time includes the model's embedding, which the notes give apart), then
`answers_queries` questions (a sentence of a random passage of a random document, seeded)
are asked with limit 10, twice each — the default answer and `fields=["*"]` (whole
elements) — interleaved, the order alternating per question, so both see the same machine
state. Per answer:

- `json`: bytes of the CLI's JSON (`uda.cli.render.as_json([response], explain=False)`, UTF-8);
- `arrow`: bytes of the Arrow IPC stream of `response.to_batches()`;
- `http`: bytes of the JSON body of POST /v1/search from the real FastAPI app
  (`uda.http.create_app`) served in process over the same client (httpx's ASGI transport),
  with an API key cleared `internal`;
- `p50_ms`: the client's `search` call (`await client.search(...)`), query vectors cached;
  `p50_ms_with_results` adds building the typed results (`response.results`);
- `context_nodes_mean`: context nodes per result. A default answer's size depends on them
  (each is about 540 bytes of JSON), and so on the graph mode the planner chose
  (`response.plan.auto.mode`, `expand_depth`), which the notes and the rows' params give.
  By the planner's rule over the graph's shape (uda/query/auto/choice.py), the estate's
  repositories and decisions are hubs at 1,000 documents (about 200 assets two hops from
  an asset): `context` (one hop); at 10 or 100 documents (9 and 20) they are not:
  `associative` (two hops, 12 and 22 context nodes per result measured).

A build whose search does not accept `fields` yet has its whole-element rows left out and
says so in the notes.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pyarrow as pa

from benchmarks.embedding import warm_queries
from benchmarks.large_corpus import INGEST_BATCH, LargeCorpus, PassageEmbedder, read_passages
from benchmarks.metrics import latency_summary, percentile
from benchmarks.suites import Context, SuiteResult
from benchmarks.systems import IngestStats, ingest, make_profile, open_client, profile_name_of

DATASET = "large documents"
LIMIT = 10
CALLER: tuple[str, ...] = ("internal",)
WARMUP = 2  # questions asked once each way before anything is timed
DEFAULT = "default answer"
WHOLE = 'whole elements (fields=["*"])'
WHOLE_OPTIONS: dict[str, Any] = {"fields": ["*"]}
KINDS = ("json", "arrow", "http")


# -- measuring --------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Mode:
    """One way of asking: its method name and the search options it adds."""

    method: str
    options: dict[str, Any]


MODES = (Mode(method=DEFAULT, options={}), Mode(method=WHOLE, options=WHOLE_OPTIONS))


@dataclass(kw_only=True)
class Seen:
    """What the answers of one mode measured, one entry per question."""

    call_ms: list[float] = field(default_factory=list[float])
    results_ms: list[float] = field(default_factory=list[float])
    sizes: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    results: list[float] = field(default_factory=list[float])
    clipped: list[float] = field(default_factory=list[float])
    longest: list[float] = field(default_factory=list[float])
    context_nodes: list[float] = field(default_factory=list[float])  # per result
    graph: Counter[tuple[str, int]] = field(default_factory=Counter[tuple[str, int]])

    def figures(self) -> dict[str, float]:
        """The row's metrics (numbers only)."""
        out: dict[str, float] = {}
        for kind, values in self.sizes.items():
            if values:
                out[f"answer_bytes_{kind}_p50"] = percentile(values, 50)
                out[f"answer_bytes_{kind}_max"] = max(values)
        calls = latency_summary(self.call_ms)
        out |= {k: v for k, v in calls.items() if k != "n"}
        if self.results_ms:
            out["p50_ms_with_results"] = percentile(self.results_ms, 50)
        out["results_mean"] = sum(self.results) / len(self.results)
        out["clipped_fields_mean"] = sum(self.clipped) / len(self.clipped)
        out["longest_string_chars_max"] = max(self.longest)
        if self.context_nodes:
            out["context_nodes_mean"] = sum(self.context_nodes) / len(self.context_nodes)
            out["context_nodes_max"] = max(self.context_nodes)
        return out

    def graph_modes(self) -> str:
        """The graph modes the planner chose, with their expansion depth and how often."""
        return ", ".join(
            f"{mode} (expand_depth {depth}) x{n}" for (mode, depth), n in self.graph.most_common()
        )


def arrow_bytes(response: Any) -> int:
    """Bytes of the Arrow IPC stream of a response's record batches."""
    reader: pa.RecordBatchReader = response.to_batches()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, reader.schema) as writer:
        for batch in reader:
            writer.write_batch(batch)
    return sink.getvalue().size


def cli_json(response: Any) -> str:
    """The CLI's JSON of one page (`uda search --json`), without the explanation."""
    from uda.cli.render import as_json

    return as_json([response], explain=False)


def longest_string(value: object) -> int:
    """Characters of the longest string anywhere in a JSON value."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        items = list(cast("dict[Any, Any]", value).values())
    elif isinstance(value, list):
        items = cast("list[Any]", value)
    else:
        return 0
    return max((longest_string(v) for v in items), default=0)


def fields_supported() -> bool:
    """Whether this build's search accepts `fields` (issue 23)."""
    from uda.query.contracts import SearchRequest

    return "fields" in SearchRequest.model_fields


def run(ctx: Context, result: SuiteResult) -> None:
    """Every profile of the run: write the corpus, then ask each question both ways."""
    passages = read_passages(ctx.data)
    if not passages:
        result.status, result.reason = "skipped", f"no SciFact or multi-hop data under {ctx.data}"
        return
    preset = ctx.preset
    corpus = LargeCorpus(
        passages=passages,
        docs=preset.answers_docs,
        doc_chars=preset.answers_doc_chars,
        pool=preset.answers_pool,
    )
    queries = corpus.queries(preset.answers_queries)
    modes = MODES if fields_supported() else MODES[:1]
    if len(modes) < len(MODES):
        result.notes.append(
            "whole elements not measured: this build's search does not accept `fields` yet"
        )
    sizes = corpus.sizes
    result.notes.append(
        f"answers: {corpus.docs:,} documents and {corpus.decisions} decision(s) of about "
        f"{corpus.doc_chars:,} characters, {corpus.repositories} repositories, "
        f"{sizes['chars'] / 1e6:.1f} MB of text in sections drawn from a pool of "
        f"{sizes['pool']:,.0f} of {len(passages):,} passages; "
        f"{len(queries)} questions, limit {LIMIT}"
    )
    model = ctx.embedder
    embedder = PassageEmbedder(model, corpus.names())
    warm_queries(embedder, queries)
    for profile_name in ctx.profiles:
        profile = make_profile(profile_name_of(profile_name), "answers", ctx.work, ctx.servers)
        ctx.log(f"answers ({profile_name}): ingest {corpus.docs} documents")
        before = (model.embedded, model.seconds, model.from_disk)
        with open_client(profile, embedder) as client:
            stats = _write(ctx, client, corpus)
        embedded, embed_s, from_disk = (
            now - then
            for now, then in zip(
                (model.embedded, model.seconds, model.from_disk), before, strict=True
            )
        )
        result.notes.append(
            f"answers ({profile_name}): {stats.elements:,} elements, {stats.chunks:,} chunks, "
            f"{stats.relations:,} edges ingested in {stats.seconds:.1f} s "
            f"({stats.chunks / max(stats.seconds, 1e-9):,.0f} chunks/s); "
            f"{len(embedder.distinct):,} distinct chunk texts, of which the model embedded "
            f"{embedded:,.0f} in {embed_s:.1f} s (in the ingest's time) and the run's vector "
            f"cache on disk gave {from_disk:,.0f}; every other chunk's vector came from memory"
        )
        if embedder.stripped < embedder.given:
            result.notes.append(
                f"answers ({profile_name}): {embedder.given - embedder.stripped:,} of the "
                f"{embedder.given:,} texts the writer embedded did not start with their "
                "element's name line: the writer no longer forms `name\\nchunk`, see "
                "`PassageEmbedder`"
            )
        ctx.log(
            f"answers ({profile_name}): {stats.chunks} chunks in {stats.seconds:.0f} s "
            f"({len(embedder.distinct)} distinct, {embedded:.0f} embedded in {embed_s:.0f} s); "
            f"asking {len(queries)} questions"
        )
        seen = asyncio.run(_ask(profile, embedder, queries, modes))
        graphs = {
            mode.method: f"graph mode {seen[mode.method].graph_modes()}; "
            f"{seen[mode.method].figures().get('context_nodes_mean', 0.0):.1f} context nodes "
            f"per result (max {seen[mode.method].figures().get('context_nodes_max', 0.0):.0f})"
            for mode in modes
        }
        if len(set(graphs.values())) == 1:
            result.notes.append(f"answers ({profile_name}, either way): {graphs[DEFAULT]}")
        else:
            result.notes += [f"answers ({profile_name}, {m}): {g}" for m, g in graphs.items()]
        for mode in modes:
            figures = seen[mode.method].figures()
            graph = seen[mode.method].graph_modes()
            if mode.options and figures["longest_string_chars_max"] < corpus.doc_chars:
                result.notes.append(
                    f"answers ({profile_name}): {mode.method} held no whole text: its longest "
                    f"string has {figures['longest_string_chars_max']:,.0f} characters"
                )
            ctx.log(
                f"  {mode.method}: json max {figures['answer_bytes_json_max']:,.0f} B, "
                f"http max {figures['answer_bytes_http_max']:,.0f} B, "
                f"p50 {figures['p50_ms']:.1f} ms, graph {graph}, "
                f"{figures.get('context_nodes_mean', 0.0):.1f} context nodes per result"
            )
            result.add(
                dataset=DATASET,
                system="uda",
                method=mode.method,
                profile=profile_name,
                metrics=figures,
                params={
                    "docs": corpus.docs,
                    "doc_chars": corpus.doc_chars,
                    "decisions": corpus.decisions,
                    "repositories": corpus.repositories,
                    "corpus_mb": sizes["chars"] / 1e6,
                    "pool": int(sizes["pool"]),
                    "chunks": stats.chunks,
                    "distinct_chunks": len(embedder.distinct),
                    "ingest_s": stats.seconds,
                    "graph_mode": graph,
                    "queries": len(queries),
                    "limit": LIMIT,
                    "clearance": list(CALLER),
                    "clip_chars": getattr(profile.search, "clip_chars", None),
                    "context_clip_chars": getattr(profile.search, "context_clip_chars", None),
                    "options": mode.options,
                },
            )


def _write(ctx: Context, client: Any, corpus: LargeCorpus) -> IngestStats:
    """The repositories and decisions, then the documents in batches; the summed stats."""
    total = IngestStats()
    parts = [ingest(client, corpus.context_elements(), corpus.context_relations())]
    for n, (elements, relations) in enumerate(corpus.batches(), start=1):
        parts.append(ingest(client, elements, relations, batch=INGEST_BATCH))
        if n % 10 == 0:
            ctx.log(f"  {min(n * INGEST_BATCH, corpus.docs)}/{corpus.docs} documents")
    for stats in parts:
        total.seconds += stats.seconds
        total.elements += stats.elements
        total.relations += stats.relations
        total.chunks += stats.chunks
        total.embedded += stats.embedded
    return total


async def _ask(
    profile: Any, embedder: Any, queries: Sequence[str], modes: Sequence[Mode]
) -> dict[str, Seen]:
    """Each question in every mode, through the client and the HTTP service on one store."""
    import httpx

    import uda
    from uda.http import Authenticator, create_app, hash_api_key
    from uda.http.auth import ApiKey
    from uda.http.wire import API_KEY_HEADER
    from uda.query.clearance import Clearance

    key = secrets.token_urlsafe(24)
    auth = Authenticator(
        api_keys=[
            ApiKey(
                name="answers-reader",
                sha256=hash_api_key(key),
                clearance=Clearance.parse(list(CALLER)),
            )
        ]
    )
    seen = {mode.method: Seen() for mode in modes}
    async with uda.AsyncClient(profile, embedder=embedder) as client:
        app = create_app(client, auth)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://uda.bench",
            headers={API_KEY_HEADER: key},
            timeout=120.0,
        ) as http:

            async def ask(query: str, mode: Mode, into: Seen | None) -> None:
                started = time.perf_counter()
                response = await client.search(
                    query, limit=LIMIT, clearance_scope=list(CALLER), **mode.options
                )
                called = time.perf_counter()
                results = response.results
                hydrated = time.perf_counter()
                text = cli_json(response)
                arrow = arrow_bytes(response)
                body = {"query": query, "limit": LIMIT, "clearance_scope": list(CALLER)}
                answer = await http.post("/v1/search", json=body | mode.options)
                if answer.status_code != 200:
                    raise RuntimeError(
                        f"POST /v1/search ({mode.method}): {answer.status_code} {answer.text[:500]}"
                    )
                if into is None:
                    return
                into.call_ms.append((called - started) * 1000)
                into.results_ms.append((hydrated - started) * 1000)
                into.sizes["json"].append(float(len(text.encode("utf-8"))))
                into.sizes["arrow"].append(float(arrow))
                into.sizes["http"].append(float(len(answer.content)))
                payload = json.loads(text)
                into.results.append(float(len(results)))
                into.clipped.append(
                    float(sum(len(r.get("truncated") or {}) for r in payload["results"]))
                )
                into.longest.append(float(longest_string(payload["results"])))
                into.context_nodes.extend(
                    float(len(r.get("context_nodes") or [])) for r in payload["results"]
                )
                plan = response.plan
                into.graph[(str(plan.auto.mode), int(plan.expand_depth))] += 1

            for query in queries[:WARMUP]:
                for mode in modes:
                    await ask(query, mode, None)
            for n, query in enumerate(queries):
                # Interleaved, the order alternating: both modes see the same machine state.
                for mode in modes if n % 2 == 0 else tuple(reversed(modes)):
                    await ask(query, mode, seen[mode.method])
    return seen
