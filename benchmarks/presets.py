"""Presets: how much of every suite a run does.

`smoke` checks the harness end to end in a few minutes (it runs in `make test`), `quick`
gives real quality figures on the full public sets and a 10k-chunk scale point, `full` adds
the 100k and 1M-chunk scale points and the server profile for quality too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from benchmarks.datasets import MULTIHOP_SETS

PresetName = Literal["smoke", "quick", "full"]
SUITES = (
    "scifact",
    "multihop",
    "keps",
    "scale",
    "ingest",
    "structured",
    "resilience",
    "service",
    "replicas",
    "cluster",
    "partitions",
    "answers",
)

# (centrality, centrality weight, graph_candidates) for the multi-hop graph rows.
GraphVariant = tuple[Literal["degree", "pagerank"], float, bool]
DEFAULT_VARIANTS: tuple[GraphVariant, ...] = (("degree", 0.2, False), ("pagerank", 4.0, True))
# Degree at 0.2 is the search default; PPR at 4 with graph candidates lets the walk rank and
# the dense score break its ties (benchmarks/README.md, multi-hop, says why and what it gave).
MORE_VARIANTS: tuple[GraphVariant, ...] = (
    ("degree", 0.2, False),
    ("pagerank", 1.0, False),
    ("pagerank", 1.0, True),
    ("pagerank", 2.0, True),
    ("pagerank", 4.0, True),
    # The associative mode's own weight, chosen for each set on the other sets' questions
    # (docs/adr/0045): the graph alone at the setting the defaults use.
    ("pagerank", 16.0, True),
)


@dataclass(frozen=True, kw_only=True)
class Preset:
    """Sizes of every suite. None means 'all of it'."""

    name: PresetName
    # quality
    scifact_queries: int | None
    scifact_docs: int | None
    multihop_sets: tuple[str, ...]
    multihop_queries: int | None
    multihop_docs: int | None
    graph_variants: tuple[GraphVariant, ...]
    keps_limit: int | None
    keps_max_words: int | None
    keps_lookups: int | None
    quality_profiles: tuple[str, ...]
    quality_limit: int = 100
    # speed and scale
    scale_sizes: tuple[int, ...]
    server_max_chunks: int
    siloed_max_chunks: int
    txtai_max_chunks: int
    floor_bm25_max_chunks: int
    scale_queries: int
    warmup_queries: int = 5
    throughput_queries: int
    concurrency: tuple[int, ...]
    ingest_docs: int | None
    # resilience (issue 17): concurrent searchers for `seconds`, a backend away `fault_s`
    resilience_clients: int = 16
    resilience_seconds: float = 60.0
    resilience_fault_s: float = 20.0
    resilience_chunks: int = 2000
    # service (issue 18): `uda serve` under N concurrent callers for `seconds` per step
    service_docs: int = 3000
    service_concurrency: tuple[int, ...] = (1, 8, 32)
    service_seconds: float = 25.0
    service_warmup_s: float = 5.0
    # partitions (issue 19): the vector store with and without scope partitions
    partition_sizes: tuple[int, ...] = (20_000,)
    partition_queries: int = 200
    # answers (issue 23): default and whole answers on documents of about 200 KB each, made of
    # passages drawn from a pool of `answers_pool` (about 1.5 distinct chunks per passage)
    answers_docs: int = 1000
    answers_doc_chars: int = 200_000
    answers_pool: int = 6_000
    answers_queries: int = 20

    def without_sizes_above(self, max_chunks: int) -> Preset:
        """The same preset without scale points above `max_chunks`."""
        return replace(
            self,
            scale_sizes=tuple(s for s in self.scale_sizes if s <= max_chunks),
            partition_sizes=tuple(s for s in self.partition_sizes if s <= max_chunks),
        )


PRESETS: dict[str, Preset] = {
    "smoke": Preset(
        name="smoke",
        scifact_queries=10,
        scifact_docs=100,
        multihop_sets=("hipporag_musique",),
        multihop_queries=10,
        multihop_docs=100,
        graph_variants=DEFAULT_VARIANTS,
        keps_limit=8,
        keps_max_words=150,
        keps_lookups=None,
        quality_profiles=("embedded",),
        scale_sizes=(1000,),
        server_max_chunks=1000,
        siloed_max_chunks=1000,
        txtai_max_chunks=1000,
        floor_bm25_max_chunks=1000,
        scale_queries=12,
        warmup_queries=2,
        throughput_queries=12,
        concurrency=(1, 2),
        ingest_docs=30,
        resilience_clients=4,
        resilience_seconds=8.0,
        resilience_fault_s=3.0,
        resilience_chunks=200,
        service_docs=200,
        service_concurrency=(1, 8),
        service_seconds=3.0,
        service_warmup_s=1.0,
        partition_sizes=(2000,),
        partition_queries=20,
        answers_docs=10,
        answers_doc_chars=20_000,
        answers_pool=100,
        answers_queries=10,
    ),
    "quick": Preset(
        name="quick",
        scifact_queries=None,
        scifact_docs=None,
        multihop_sets=MULTIHOP_SETS,
        multihop_queries=None,
        multihop_docs=None,
        graph_variants=MORE_VARIANTS,
        keps_limit=None,
        keps_max_words=600,
        keps_lookups=100,
        quality_profiles=("embedded",),
        scale_sizes=(10_000,),
        server_max_chunks=10_000,
        siloed_max_chunks=10_000,
        txtai_max_chunks=10_000,
        floor_bm25_max_chunks=10_000,
        scale_queries=100,
        throughput_queries=100,
        concurrency=(1, 2, 4, 8),
        ingest_docs=1000,
        service_seconds=20.0,
        answers_docs=100,
    ),
    "full": Preset(
        name="full",
        scifact_queries=None,
        scifact_docs=None,
        multihop_sets=MULTIHOP_SETS,
        multihop_queries=None,
        multihop_docs=None,
        graph_variants=MORE_VARIANTS,
        keps_limit=None,
        keps_max_words=None,
        keps_lookups=200,
        quality_profiles=("embedded", "server"),
        scale_sizes=(10_000, 100_000, 1_000_000),
        # 1M runs for the embedded profile and the floor only (see benchmarks/README.md).
        server_max_chunks=100_000,
        siloed_max_chunks=100_000,
        txtai_max_chunks=100_000,
        floor_bm25_max_chunks=1_000_000,
        scale_queries=200,
        throughput_queries=200,
        concurrency=(1, 2, 4, 8),
        ingest_docs=None,
        partition_sizes=(100_000, 1_000_000),
    ),
}
