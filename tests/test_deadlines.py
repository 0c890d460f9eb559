"""Deadlines and degraded answers in the planner, over test doubles of the optional backends
(a graph store and vector stores that hang or fail on demand) and a real SQLite system of
record. The same behaviour on real servers stopped mid-search is in test_chaos.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_planner_unit import (
    FixedEmbedder,
    RecordingGraphDouble,
    RecordingVectorDouble,
)

from connectors.base import Connector
from connectors.contract.records import ChunkHit, SearchFilter, Subgraph
from connectors.sqlite.connector import SQLiteConnector
from ontology import Document, Relation, Repository
from uda.config import SearchDefaults
from uda.errors import BackendUnavailableError
from uda.hlc import HybridLogicalClock
from uda.query.contracts import SearchRequest
from uda.query.deadlines import Breakers, Deadlines
from uda.query.fusion import Leg
from uda.query.planner import Planner
from uda.write.writer import Writer, derived_stores

FAST = Deadlines(call_s=0.2, search_s=1.5)
BOUND_S = 1.5 + 1.0  # the search deadline and a generous margin for a loaded machine


class FaultyGraphDouble(RecordingGraphDouble):
    """Test double of a graph store that answers, hangs or fails, as the test sets `mode`."""

    name = "graph-double"

    def __init__(self) -> None:
        super().__init__()
        self.mode = "ok"

    async def expand(
        self,
        element_ids: Sequence[str],
        depth: int,
        relations: Sequence[str] | None,
        as_of: int | None,
        backward_hops: int | None = None,
    ) -> Subgraph:
        if self.mode == "hang":
            await asyncio.sleep(3600)
        if self.mode == "fail":
            raise ConnectionResetError("connection reset by peer")
        return await super().expand(element_ids, depth, relations, as_of, backward_hops)


class FaultyVectorDouble(RecordingVectorDouble):
    """Test double of a vector store that answers, hangs or fails, as the test sets `mode`."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.mode = "ok"

    async def vector_search(
        self, embedding: Sequence[float], k: int, search_filter: SearchFilter
    ) -> list[ChunkHit]:
        if self.mode == "hang":
            self.search_calls += 1
            await asyncio.sleep(3600)
        if self.mode == "fail":
            self.search_calls += 1
            raise ConnectionRefusedError("connection refused")
        return await super().vector_search(embedding, k, search_filter)


DOCS = [
    Document(
        element_id=f"d{i}",
        name=f"payment note {i}",
        text=f"payment retries and refunds, note {i}",
        sensitivity="public" if i % 2 == 0 else "confidential",
    )
    for i in range(12)
]
REPO = Repository(element_id="repo", name="payments", sensitivity="public")


async def _planner(
    tmp_path: Path, connectors: list[Connector], deadlines: Deadlines = FAST
) -> tuple[Planner, SQLiteConnector]:
    sor = SQLiteConnector(tmp_path / "sor.sqlite3")
    await sor.connect()
    everything: list[Connector] = [sor, *connectors]
    embedder = FixedEmbedder()
    writer = Writer(
        system_of_record=sor,
        stores=derived_stores(everything),
        embedder=embedder,
        clock=HybridLogicalClock(),
    )
    await writer.ingest(
        [REPO, *DOCS],
        [Relation(source_id=d.element_id, relation="partOf", target_id="repo") for d in DOCS],
    )
    planner = Planner(
        connectors=everything,
        system_of_record=sor,
        embedder=embedder,
        defaults=SearchDefaults(deadlines=deadlines),
    )
    return planner, sor


def _request(clearance: list[str], **extra: object) -> SearchRequest:
    return SearchRequest.model_validate(
        {"query": "payment retries", "limit": 5, "clearance_scope": clearance, **extra}
    )


async def _timed_search(planner: Planner, request: SearchRequest) -> tuple[object, float]:
    started = time.monotonic()
    response = await planner.search(request)
    return response, time.monotonic() - started


async def test_a_hung_graph_costs_its_deadline_and_the_answer_says_so(tmp_path: Path) -> None:
    graph = FaultyGraphDouble()
    planner, sor = await _planner(tmp_path, [FaultyVectorDouble("vec"), graph])
    try:
        full = await planner.search(_request(["internal"]))
        assert full.degraded == []
        assert any(r.context_nodes for r in full.results)
        graph.mode = "hang"
        response, seconds = await _timed_search(planner, _request(["internal"]))
        assert seconds < BOUND_S
        assert [(d.backend, d.leg) for d in response.degraded] == [("graph-double", "graph")]
        assert "no answer within" in response.degraded[0].reason
        # Results without graph context, still only what the caller may see.
        assert response.results
        assert all(not r.context_nodes for r in response.results)
        assert all(r.properties["sensitivity"] == "public" for r in response.results)
        assert "degraded: graph-double (graph)" in str(response.explain())
        assert response.to_batches().schema.metadata[b"uda.degraded"]
    finally:
        await planner.close()
        await sor.close()


async def test_one_vector_store_down_leaves_the_others_and_the_lexical_leg(
    tmp_path: Path,
) -> None:
    a, b = FaultyVectorDouble("vec-a"), FaultyVectorDouble("vec-b")
    planner, sor = await _planner(tmp_path, [a, b, FaultyGraphDouble()])
    try:
        a.mode = "fail"
        response = await planner.search(_request(["restricted"]))
        assert [(d.backend, d.leg) for d in response.degraded] == [("vec-a", "semantic")]
        assert "ConnectionRefusedError" in response.degraded[0].reason
        assert response.results
        b.mode = "hang"
        both, seconds = await _timed_search(planner, _request(["restricted"]))
        assert seconds < BOUND_S
        # Every vector store gone: the lexical leg alone answers.
        assert {d.backend for d in both.degraded} == {"vec-a", "vec-b"}
        assert both.results
        assert all(r.legs[Leg.SEMANTIC].rank is None for r in both.explain().results)
    finally:
        await planner.close()
        await sor.close()


async def test_the_system_of_record_is_never_optional(tmp_path: Path) -> None:
    planner, sor = await _planner(tmp_path, [FaultyVectorDouble("vec"), FaultyGraphDouble()])
    await sor.close()  # the store is gone: clearance cannot be checked
    with pytest.raises(BackendUnavailableError) as caught:
        await planner.search(_request(["internal"]))
    assert caught.value.connector == "sqlite"


async def test_no_retrieval_leg_answering_is_an_error_not_an_empty_answer(
    tmp_path: Path,
) -> None:
    vector = FaultyVectorDouble("vec")
    planner, sor = await _planner(tmp_path, [vector, FaultyGraphDouble()])
    try:
        vector.mode = "fail"
        request = _request(["internal"], weights={"lexical": 0.0})  # the lexical leg is off
        with pytest.raises(BackendUnavailableError) as caught:
            await planner.search(request)
        assert "no retrieval leg answered" in str(caught.value)
    finally:
        await planner.close()
        await sor.close()


async def test_a_failing_backend_is_skipped_then_probed_and_used_again(tmp_path: Path) -> None:
    vector, graph = FaultyVectorDouble("vec"), FaultyGraphDouble()
    planner, sor = await _planner(tmp_path, [vector, graph])
    now = [0.0]
    planner.breakers = Breakers(failures=2, cool_down_s=30.0, clock=lambda: now[0])
    try:
        graph.mode = "fail"
        for _ in range(2):
            await planner.search(_request(["internal"]))
        assert planner.breakers.state("graph-double") == "open"
        calls = len(graph.expand_calls)
        skipped = await planner.search(_request(["internal"]))
        assert len(graph.expand_calls) == calls  # not called at all
        assert "circuit open" in skipped.degraded[0].reason
        graph.mode = "ok"
        now[0] += 31.0  # the cool-down is over: the next search probes it
        probed = await planner.search(_request(["internal"]))
        assert probed.degraded == []
        assert planner.breakers.state("graph-double") == "closed"
        assert any(r.context_nodes for r in probed.results)
    finally:
        await planner.close()
        await sor.close()


async def test_a_request_timeout_bounds_the_whole_search(tmp_path: Path) -> None:
    graph = FaultyGraphDouble()
    slow = Deadlines(call_s=30.0, search_s=30.0)  # only the request's timeout can save it
    planner, sor = await _planner(tmp_path, [FaultyVectorDouble("vec"), graph], slow)
    try:
        graph.mode = "hang"
        response, seconds = await _timed_search(planner, _request(["internal"], timeout=0.5))
        assert seconds < 0.5 + 1.0
        assert [d.leg for d in response.degraded] == ["graph"]
    finally:
        await planner.close()
        await sor.close()


def test_breakers_open_after_repeated_failures_and_close_after_a_good_probe() -> None:
    now = [100.0]
    breakers = Breakers(failures=3, cool_down_s=10.0, clock=lambda: now[0])
    for _ in range(2):
        breakers.failed("pg")
    assert breakers.allows("pg")  # two failures: still closed
    breakers.failed("pg")
    assert breakers.state("pg") == "open"
    assert not breakers.allows("pg")
    now[0] += 10.0
    assert breakers.allows("pg")  # the one probe
    assert breakers.state("pg") == "half_open"
    assert not breakers.allows("pg")  # nobody else while it probes
    breakers.failed("pg")  # the probe failed: open again, a new cool-down
    assert not breakers.allows("pg")
    now[0] += 10.0
    assert breakers.allows("pg")
    breakers.succeeded("pg")
    assert breakers.state("pg") == "closed"
    assert breakers.states() == {"pg": "closed"}


def test_a_standby_passed_over_is_shown_but_leaves_nothing_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from types import SimpleNamespace

    from uda.cli.render import warn_if_degraded
    from uda.query.deadlines import Degradation

    replica = Degradation(backend="postgres standby 1", leg="replica", reason="behind")
    graph = Degradation(backend="networkx", leg="graph", reason="timed out")
    assert not replica.incomplete
    assert graph.incomplete
    assert "from another server" in replica.describe()
    # `--strict` exits 3 only when something is missing; both are shown either way.
    assert not warn_if_degraded([SimpleNamespace(degraded=[replica])])  # pyright: ignore[reportArgumentType]
    assert warn_if_degraded([SimpleNamespace(degraded=[replica, graph])])  # pyright: ignore[reportArgumentType]
    err = capsys.readouterr().err
    assert err.count("postgres standby 1") == 2
    assert "networkx" in err
