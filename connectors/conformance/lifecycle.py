"""Conformance of every connector's life: idempotent connect/close, persistence, concurrency.

Each claimed capability contributes a small workload (`_Workload`): data to write, reads with
deterministic answers, and an observation of the whole store. Persistence compares the
observation before and after `reopen`; concurrency runs 20 mixed reads and writes one by one
on one fresh connector and all at once (`asyncio.gather`) on another, and compares both the
reads' answers and the final observations.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest_asyncio

from connectors.base import Connector, GraphCapable, RelationalCapable, TextCapable, VectorCapable
from connectors.conformance.data import (
    EDGES,
    chunk,
    edge,
    graph_nodes,
    near,
    random_vectors,
    rows,
    state,
)
from connectors.conformance.fixtures import ConformanceBase, Harness
from connectors.conformance.text import corpus as text_corpus
from connectors.contract.records import ChunkHit, GraphNode, SearchFilter
from connectors.contract.system_of_record import WriteBatch

PUBLIC = SearchFilter(max_sensitivity_rank=0)
CAPABILITIES: tuple[type, ...] = (VectorCapable, TextCapable, GraphCapable, RelationalCapable)
OPERATIONS = 20

Op = Callable[[], Awaitable[object]]


def scored(hits: list[ChunkHit]) -> list[tuple[str, str, int, float]]:
    """Hits as comparable tuples (scores rounded: float noise is not a difference)."""
    return [(h.chunk_id, h.element_id, h.version, round(h.score, 5)) for h in hits]


@dataclass(frozen=True, kw_only=True)
class _Workload:
    """What one capability contributes to the lifecycle tests."""

    preload: Callable[[], Awaitable[None]]
    writes: list[Op]
    reads: list[Op]
    observe: Callable[[], Awaitable[object]]


def _vector(store: VectorCapable, dimension: int, n: int) -> _Workload:
    base = [
        chunk(f"base-{i}", text=f"base {i}", embedding=v)
        for i, v in enumerate(random_vectors(30, dimension, seed=21))
    ]
    queries = random_vectors(n, dimension, seed=22)

    async def preload() -> None:
        await store.upsert_chunks(base)

    def write(j: int) -> Op:
        hidden = [
            chunk(
                f"w{j}-{i}",
                embedding=near(queries[j], seed=j * 10 + i, noise=0.2),
                sensitivity_rank=3,
            )
            for i in range(3)
        ]
        return lambda: store.upsert_chunks(hidden)

    def read(j: int) -> Op:
        async def run() -> object:
            return scored(await store.vector_search(queries[j], 5, PUBLIC))

        return run

    async def observe() -> object:
        hits = [scored(await store.vector_search(q, 5, PUBLIC)) for q in queries[:3]]
        return await store.chunk_states(), hits

    return _Workload(
        preload=preload,
        writes=[write(j) for j in range(n // 2)],
        reads=[read(j) for j in range(n - n // 2)],
        observe=observe,
    )


def _text(store: TextCapable, n: int) -> _Workload:
    queries = ["glacier harbour", "lantern", "copper meadow", "glacier", "quartz falcon orchard"]

    async def preload() -> None:
        await store.upsert_text_chunks(text_corpus())

    def write(j: int) -> Op:
        hidden = [chunk(f"w{j}", text="glacier harbour lantern copper", sensitivity_rank=3)]
        return lambda: store.upsert_text_chunks(hidden)

    def read(j: int) -> Op:
        async def run() -> object:
            return scored(await store.text_search(queries[j % len(queries)], 5, PUBLIC))

        return run

    async def observe() -> object:
        hits = [scored(await store.text_search(q, 5, PUBLIC)) for q in queries]
        return await store.text_chunk_states(), await store.text_index_drift(), hits

    return _Workload(
        preload=preload,
        writes=[write(j) for j in range(n // 2)],
        reads=[read(j) for j in range(n - n // 2)],
        observe=observe,
    )


def _graph(store: GraphCapable, n: int) -> _Workload:
    seeds = [["d1"], ["repo"], ["d2", "dec0"], ["ada"]]

    async def preload() -> None:
        await store.upsert_nodes(graph_nodes())
        await store.upsert_edges(EDGES)

    def write(j: int) -> Op:
        async def run() -> object:
            nodes = [GraphNode(element_id=f"x{j}", element_type="Document")]
            nodes.append(GraphNode(element_id=f"y{j}", element_type="Repository"))
            await store.upsert_nodes(nodes)
            await store.upsert_edges([edge(f"x{j}", "partOf", f"y{j}")])
            return None

        return run

    def read(j: int) -> Op:
        async def run() -> object:
            sub = await store.expand(seeds[j % len(seeds)], 2, None, None)
            return sorted(e.key for e in sub.edges), sorted(sub.nodes.items())

        return run

    async def observe() -> object:
        return await store.edge_states(), await store.node_ids()

    return _Workload(
        preload=preload,
        writes=[write(j) for j in range(n // 2)],
        reads=[read(j) for j in range(n - n // 2)],
        observe=observe,
    )


def _relational(store: RelationalCapable, dimension: int, n: int) -> _Workload:
    base_ids = ["b1", "b2", "b3"]

    async def preload() -> None:
        await store.commit(
            WriteBatch(
                states=[state(i, 1, 100) for i in base_ids],
                chunks=rows("b1", 1, ["one", "two"], dimension),
                edges=[edge("b1", "partOf", "b2"), edge("b3", "relatedTo", "b1")],
                stores=["vector:v"],
                hlc=100,
            )
        )

    def write(j: int) -> Op:
        batch = WriteBatch(
            states=[state(f"w{j}", 1, 1_000 + j)],
            chunks=rows(f"w{j}", 1, ["w"], dimension),
            edges=[edge(f"w{j}", "partOf", "b1", 1_000 + j)],
            stores=["vector:v"],
            hlc=1_000 + j,
        )
        return lambda: store.commit(batch)

    def read(j: int) -> Op:
        async def run() -> object:
            if j % 2:
                return await store.fetch(base_ids, None)
            return sorted(e.key for e in await store.load_edges([("b1", "partOf", "b2")]))

        return run

    async def observe() -> object:
        versions = await store.latest_versions()
        return (
            versions,
            await store.latest_states(sorted(versions)),
            await store.expected_chunks(),
            await store.expected_edges(),
            await store.pending_counts(),
            await store.last_hlc(),
            dict(await store.counts()),
            await store.live_element_ids(""),
        )

    return _Workload(
        preload=preload,
        writes=[write(j) for j in range(n // 2)],
        reads=[read(j) for j in range(n - n // 2)],
        observe=observe,
    )


def workloads(connector: Connector, dimension: int, total: int = OPERATIONS) -> list[_Workload]:
    """One workload per claimed capability, sharing `total` operations between them."""
    claimed = [c for c in CAPABILITIES if isinstance(connector, c)]
    n = max(4, total // max(len(claimed), 1))
    out: list[_Workload] = []
    if isinstance(connector, VectorCapable):
        out.append(_vector(connector, dimension, n))
    if isinstance(connector, TextCapable):
        out.append(_text(connector, n))
    if isinstance(connector, GraphCapable):
        out.append(_graph(connector, n))
    if isinstance(connector, RelationalCapable):
        out.append(_relational(connector, dimension, n))
    return out


def interleaved(loads: list[_Workload]) -> list[Op]:
    """Every workload's writes and reads, mixed: write, read, write, read... across them."""
    per_load = [
        [op for pair in itertools.zip_longest(w.writes, w.reads) for op in pair if op is not None]
        for w in loads
    ]
    return [op for group in itertools.zip_longest(*per_load) for op in group if op is not None]


async def observe_all(loads: list[_Workload]) -> list[object]:
    """Every workload's observation of the store."""
    return [await w.observe() for w in loads]


class LifecycleConformance(ConformanceBase):
    """Tests every connector runs, for whichever capabilities it claims."""

    @pytest_asyncio.fixture
    async def connector(self, harness: Harness) -> Connector:
        """A fresh connector (no capability required)."""
        return await harness.new()

    async def test_lifecycle_connect_and_close_are_idempotent(
        self, connector: Connector, harness: Harness
    ) -> None:
        """connect() on a connected connector and close() twice are harmless; data stays."""
        loads = workloads(connector, harness.dimension)
        for load in loads:
            await load.preload()
        seen = await observe_all(loads)
        await connector.connect()
        assert await observe_all(loads) == seen
        await connector.close()
        await connector.close()
        reopened = await harness.reopen(connector)
        await reopened.connect()
        assert await observe_all(workloads(reopened, harness.dimension)) == seen

    async def test_lifecycle_persists_across_reopen(
        self, connector: Connector, harness: Harness
    ) -> None:
        """Everything written through every claimed capability survives close and reopen."""
        loads = workloads(connector, harness.dimension)
        for load in loads:
            await load.preload()
            for write in load.writes:
                await write()
        before = await observe_all(loads)
        reopened = await harness.reopen(connector)
        after = await observe_all(workloads(reopened, harness.dimension))
        assert after == before

    async def test_lifecycle_concurrent_use_matches_sequential(self, harness: Harness) -> None:
        """20 mixed reads and writes at once answer and leave what they do one by one."""
        one, other = await harness.new(), await harness.new()
        sequential, concurrent = (
            workloads(one, harness.dimension),
            workloads(other, harness.dimension),
        )
        for load in (*sequential, *concurrent):
            await load.preload()
        ops_one, ops_other = interleaved(sequential), interleaved(concurrent)
        assert len(ops_one) == len(ops_other)
        answers_one = [await op() for op in ops_one]
        answers_other = list(await asyncio.gather(*(op() for op in ops_other)))
        assert answers_other == answers_one
        assert await observe_all(concurrent) == await observe_all(sequential)

    async def test_lifecycle_members_match_capability_signatures(
        self, connector: Connector
    ) -> None:
        """Every member of every claimed capability is a coroutine with the base's parameters."""
        assert isinstance(type(connector).name, str)
        assert type(connector).name, "name must equal the registry key"
        mismatches: list[str] = []
        for capability in (Connector, *CAPABILITIES):
            if not isinstance(connector, capability):
                continue
            for member in sorted(getattr(capability, "__abstractmethods__", ())):
                base = getattr(capability, member)
                impl = getattr(type(connector), member)
                if not inspect.iscoroutinefunction(impl):
                    mismatches.append(f"{capability.__name__}.{member} is not async")
                    continue
                want = [(p.name, p.kind) for p in inspect.signature(base).parameters.values()]
                got = [(p.name, p.kind) for p in inspect.signature(impl).parameters.values()]
                if got != want:
                    mismatches.append(f"{capability.__name__}.{member}: {got} != {want}")
        assert not mismatches, "\n".join(mismatches)
