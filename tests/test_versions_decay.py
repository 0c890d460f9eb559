"""Versions, decay and `as_of`, end to end on the embedded backends (Chroma, networkx, SQLite).

Decay age runs from an element state's `timestamp` (valid time) to the query's `as_of`;
`as_of` selects states by HLC (transaction time).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import uda
from ontology import Document, Repository
from uda.embedding import Embedder
from uda.hlc import HybridLogicalClock, pack, to_datetime
from uda.query.fusion import Leg
from uda.query.results import SearchResponse

CLEAR = ["internal"]
SEMANTIC_ONLY = {"semantic": 1.0, "lexical": 0.0, "centrality": 0.0}
NOW = datetime.now(UTC)
THREE_YEARS_AGO = NOW - timedelta(days=3 * 365)


def _ids(res: SearchResponse) -> list[str]:
    return [r.element_id for r in res.results]


def _row(res: SearchResponse, element_id: str) -> dict[str, Any]:
    rows = [row for row in res.to_arrow().to_pylist() if row["element_id"] == element_id]
    assert len(rows) == 1, f"{element_id} appears {len(rows)} times"
    return rows[0]


# -- (a) versions -----------------------------------------------------------------------------
KAFKA_V1 = Document(
    element_id="doc-x",
    name="Kafka consumer rebalancing",
    text="Kafka consumer group rebalancing with the cooperative sticky assignor and session "
    "timeouts.",
)
POSTGRES_V2 = Document(
    element_id="doc-x",
    name="Postgres vacuum tuning",
    text="Tuning Postgres autovacuum thresholds to avoid transaction id wraparound.",
)
FILLER = Document(
    element_id="doc-filler",
    name="Redis eviction",
    text="Redis eviction policies: allkeys-lru, volatile-ttl and noeviction.",
)


def test_newer_state_replaces_older_in_search(client: uda.Client) -> None:
    v1 = client.ingest([KAFKA_V1, FILLER])
    assert v1.written == 2
    res = client.search("Kafka consumer group rebalancing", limit=5, clearance_scope=CLEAR)
    assert _ids(res)[0] == "doc-x"
    assert res.results[0].properties["version"] == 1

    v2 = client.ingest([POSTGRES_V2])
    assert v2.written == 1
    assert v2.unchanged == 0
    assert v2.hlc is not None
    assert v1.hlc is not None
    assert v2.hlc > v1.hlc

    # The query that matched v1's text must not bring v1 back: only v2 exists now.
    for query in ("Kafka consumer group rebalancing", "Postgres autovacuum wraparound"):
        res = client.search(query, limit=10, clearance_scope=CLEAR)
        ids = _ids(res)
        assert ids.count("doc-x") == 1, (query, ids)
        hit = next(r for r in res.results if r.element_id == "doc-x")
        assert hit.name == "Postgres vacuum tuning"
        assert hit.properties["version"] == 2
        assert hit.properties["hlc"] == v2.hlc
        assert hit.properties["text"] == POSTGRES_V2.text
        assert hit.snippet is not None
        assert "Kafka" not in hit.snippet
        assert "autovacuum" in hit.snippet
    res = client.search("Postgres autovacuum wraparound", limit=10, clearance_scope=CLEAR)
    assert _ids(res)[0] == "doc-x"
    assert len(res.to_arrow()) == len(set(res.to_arrow().column("element_id").to_pylist()))


def test_unchanged_reingest_is_skipped_and_keeps_version(client: uda.Client) -> None:
    first = client.ingest([KAFKA_V1])
    assert first.written == 1
    again = client.ingest([KAFKA_V1])
    assert again.written == 0
    assert again.unchanged == 1
    assert again.hlc is None
    # A later timestamp alone is not new content (the hash leaves timestamp out).
    later = KAFKA_V1.model_copy(update={"timestamp": NOW + timedelta(days=1)})
    assert client.ingest([later]).unchanged == 1

    res = client.search("Kafka consumer group rebalancing", limit=5, clearance_scope=CLEAR)
    assert _ids(res) == ["doc-x"]
    props = res.results[0].properties
    assert props["version"] == 1
    assert props["hlc"] == first.hlc

    # Changing only the name is new content: version 2.
    renamed = KAFKA_V1.model_copy(update={"name": "Kafka rebalancing notes"})
    assert client.ingest([renamed]).written == 1
    res = client.search("Kafka consumer group rebalancing", limit=5, clearance_scope=CLEAR)
    assert _ids(res) == ["doc-x"]
    assert res.results[0].name == "Kafka rebalancing notes"
    assert res.results[0].properties["version"] == 2


def test_reingest_after_delete_resurrects_with_next_version(client: uda.Client) -> None:
    client.ingest([KAFKA_V1])
    deleted = client.delete(["doc-x"])
    assert deleted.deleted == 1
    assert client.delete(["doc-x"]).not_found == 1
    back = client.ingest([KAFKA_V1])
    assert back.written == 1  # same content as v1, but the current state is a tombstone
    res = client.search("Kafka consumer group rebalancing", limit=5, clearance_scope=CLEAR)
    assert _ids(res) == ["doc-x"]
    assert res.results[0].properties["version"] == 3  # v1, tombstone v2, v3


# -- (b) decay --------------------------------------------------------------------------------
# Two near-equal documents (the fresh one has one extra unimportant word) and a pair where
# an old document is far more relevant than a fresh one.
NEAR_OLD = Document(
    element_id="near-old",
    name="Rotating TLS certificates",
    text="How to rotate the TLS certificates of the ingress gateway before they expire.",
    timestamp=THREE_YEARS_AGO,
)
NEAR_NEW = Document(
    element_id="near-new",
    name="Rotating TLS certificates",
    text="How to rotate the TLS certificates of the ingress gateway before they expire soon.",
    timestamp=NOW,
)
RELEVANT_OLD = Document(
    element_id="relevant-old",
    name="Kafka consumer rebalancing",
    text="Kafka consumer group rebalancing: cooperative sticky assignor, session timeouts and "
    "partition revocation.",
    timestamp=THREE_YEARS_AGO,
)
WEAK_NEW = Document(
    element_id="weak-new",
    name="Team offsite agenda",
    text="Agenda for the team offsite: lunch, a hike, and a short talk about message queues.",
    timestamp=NOW,
)
TLS_QUERY = "rotate TLS certificates ingress gateway"
KAFKA_QUERY = "Kafka consumer group rebalancing"


@pytest.fixture
def decay_client(client: uda.Client) -> uda.Client:
    client.ingest([NEAR_OLD, NEAR_NEW, RELEVANT_OLD, WEAK_NEW])
    return client


@pytest.mark.parametrize("weights", [SEMANTIC_ONLY, None], ids=["semantic-only", "defaults"])
def test_fresher_wins_between_near_equals(
    decay_client: uda.Client, weights: dict[str, float] | None
) -> None:
    opts: dict[str, Any] = {} if weights is None else {"weights": weights}
    plain = decay_client.search(TLS_QUERY, limit=4, clearance_scope=CLEAR, decay=False, **opts)
    old_raw = _row(plain, "near-old")["semantic_score"]
    new_raw = _row(plain, "near-new")["semantic_score"]
    # Precondition: the two are near-equal on relevance, and the old one is not worse.
    assert abs(old_raw - new_raw) < 0.05
    assert old_raw >= new_raw
    assert _ids(plain)[:2] == ["near-old", "near-new"]
    assert _row(plain, "near-old")["decay"] == 1.0
    assert _row(plain, "near-new")["decay"] == 1.0

    res = decay_client.search(TLS_QUERY, limit=4, clearance_scope=CLEAR, **opts)
    assert _ids(res)[:2] == ["near-new", "near-old"]
    old, new = _row(res, "near-old"), _row(res, "near-new")
    assert new["decay"] == pytest.approx(1.0, abs=1e-4)
    assert old["decay"] == pytest.approx(0.8)  # 3 years at half-life 365 d: clamped to floor
    # Decay multiplies the raw leg scores before ranking.
    assert old["semantic_score"] == pytest.approx(0.8 * old_raw, rel=1e-4)
    assert old["semantic_rank"] == 2
    assert new["semantic_rank"] == 1
    if weights is None:  # the lexical leg is decayed too
        assert old["lexical_rank"] == 2
        assert new["lexical_rank"] == 1
    assert res.results[0].score > res.results[1].score


@pytest.mark.parametrize("weights", [SEMANTIC_ONLY, None], ids=["semantic-only", "defaults"])
def test_much_more_relevant_old_beats_fresh_barely_relevant(
    decay_client: uda.Client, weights: dict[str, float] | None
) -> None:
    opts: dict[str, Any] = {} if weights is None else {"weights": weights}
    res = decay_client.search(KAFKA_QUERY, limit=4, clearance_scope=CLEAR, **opts)
    ids = _ids(res)
    assert ids[0] == "relevant-old"
    assert ids.index("relevant-old") < ids.index("weak-new")
    assert _row(res, "relevant-old")["decay"] == pytest.approx(0.8)
    assert _row(res, "weak-new")["decay"] == pytest.approx(1.0, abs=1e-4)

    explained = res.explain()
    top = explained.results[0]
    assert top.element_id == "relevant-old"
    assert top.decay == pytest.approx(0.8)
    semantic = top.legs[Leg.SEMANTIC]
    assert semantic.raw is not None
    assert semantic.score == pytest.approx(0.8 * semantic.raw, rel=1e-4)
    assert semantic.rank == 1
    assert semantic.contribution == pytest.approx(1.0 / 61)


def test_floor_zero_and_short_half_life_let_staleness_dominate(decay_client: uda.Client) -> None:
    """Without the floor the old document's score collapses: the fresh weak one wins."""
    res = decay_client.search(
        KAFKA_QUERY,
        limit=4,
        clearance_scope=CLEAR,
        weights=SEMANTIC_ONLY,
        half_life=30.0,
        decay_floor=0.0,
    )
    assert _ids(res)[0] == "weak-new"
    old = _row(res, "relevant-old")
    assert old["decay"] == pytest.approx(0.5 ** (3 * 365 / 30), rel=1e-3)


def test_decay_values_follow_half_life_and_floor(decay_client: uda.Client) -> None:
    # 3 years at a 3-year half-life, no floor: one half-life.
    res = decay_client.search(
        TLS_QUERY, limit=4, clearance_scope=CLEAR, half_life=3 * 365.0, decay_floor=0.0
    )
    assert _row(res, "near-old")["decay"] == pytest.approx(0.5, rel=1e-4)
    assert _row(res, "near-new")["decay"] == pytest.approx(1.0, abs=1e-4)
    # 3 years at 1.5-year half-life: two half-lives.
    res = decay_client.search(
        TLS_QUERY, limit=4, clearance_scope=CLEAR, half_life=1.5 * 365, decay_floor=0.0
    )
    assert _row(res, "near-old")["decay"] == pytest.approx(0.25, rel=1e-4)
    # decay=False: every factor is exactly 1 and scores are the raw ones.
    res = decay_client.search(TLS_QUERY, limit=4, clearance_scope=CLEAR, decay=False)
    table = res.to_arrow()
    assert table.column("decay").to_pylist() == [1.0] * len(table)
    for row in table.to_pylist():
        raw = next(r for r in res.explain().results if r.element_id == row["element_id"])
        sem = raw.legs[Leg.SEMANTIC]
        assert sem.raw == pytest.approx(sem.score)
    assert res.explain().plan.decay is False


def test_future_timestamp_is_not_boosted(client: uda.Client) -> None:
    future = NEAR_NEW.model_copy(
        update={"element_id": "near-future", "timestamp": NOW + timedelta(days=400)}
    )
    # Dated at ingest time, not at import: with a one-day half-life minutes already count.
    fresh = NEAR_NEW.model_copy(update={"timestamp": datetime.now(UTC)})
    client.ingest([future, fresh])
    res = client.search(TLS_QUERY, limit=4, clearance_scope=CLEAR, half_life=1.0, decay_floor=0.0)
    assert _row(res, "near-future")["decay"] == 1.0
    assert _row(res, "near-new")["decay"] == pytest.approx(1.0, abs=1e-3)


def test_decay_age_is_measured_to_as_of(tmp_path: Path, embedder: Embedder) -> None:
    """Age runs from the state's timestamp to `as_of`, not to the wall clock of the query.

    The states are written with an HLC two years in the past; one is dated three years ago,
    the other two years ago. As of the write, they are one year and zero years old.
    """
    written_ms = int((NOW - timedelta(days=2 * 365)).timestamp() * 1000)
    clock = HybridLogicalClock(clock=lambda: written_ms)
    old = NEAR_OLD  # dated NOW - 3 years
    new = NEAR_NEW.model_copy(update={"timestamp": NOW - timedelta(days=2 * 365)})
    with uda.connect(path=tmp_path / "uda", embedder=embedder, clock=clock) as c:
        report = c.ingest([old, new])
        assert report.hlc is not None
        opts: dict[str, Any] = {"half_life": 365.0, "decay_floor": 0.0, "clearance_scope": CLEAR}
        then = c.search(TLS_QUERY, limit=4, as_of=report.hlc, **opts)
        assert _row(then, "near-old")["decay"] == pytest.approx(0.5, rel=1e-3)
        assert _row(then, "near-new")["decay"] == pytest.approx(1.0, rel=1e-3)
        now = c.search(TLS_QUERY, limit=4, **opts)
        assert _row(now, "near-old")["decay"] == pytest.approx(0.125, rel=1e-3)
        assert _row(now, "near-new")["decay"] == pytest.approx(0.25, rel=1e-3)


# -- (c) as_of --------------------------------------------------------------------------------
def test_as_of_returns_the_state_valid_then(client: uda.Client) -> None:
    before = client.ingest([FILLER])
    v1 = client.ingest([KAFKA_V1])
    v2 = client.ingest([POSTGRES_V2])
    assert before.hlc is not None
    assert v1.hlc is not None
    assert v2.hlc is not None
    assert before.hlc < v1.hlc < v2.hlc

    old = client.search(KAFKA_QUERY, limit=5, clearance_scope=CLEAR, as_of=v1.hlc)
    assert "doc-x" in _ids(old)
    hit = next(r for r in old.results if r.element_id == "doc-x")
    assert hit.name == "Kafka consumer rebalancing"
    assert hit.properties["version"] == 1
    assert hit.properties["hlc"] == v1.hlc
    assert hit.properties["text"] == KAFKA_V1.text
    assert hit.snippet is not None
    assert "Kafka" in hit.snippet
    assert _ids(old).count("doc-x") == 1
    assert old.explain().plan.as_of == v1.hlc

    # Just before v2 is still v1; exactly at v2's stamp it is v2.
    edge = client.search(KAFKA_QUERY, limit=5, clearance_scope=CLEAR, as_of=v2.hlc - 1)
    assert next(r for r in edge.results if r.element_id == "doc-x").properties["version"] == 1
    at_v2 = client.search(KAFKA_QUERY, limit=5, clearance_scope=CLEAR, as_of=v2.hlc)
    assert next(r for r in at_v2.results if r.element_id == "doc-x").properties["version"] == 2

    now = client.search(KAFKA_QUERY, limit=5, clearance_scope=CLEAR)
    hit = next(r for r in now.results if r.element_id == "doc-x")
    assert hit.name == "Postgres vacuum tuning"
    assert hit.properties["version"] == 2
    assert hit.properties["text"] == POSTGRES_V2.text

    # Before doc-x existed: only the filler is there.
    early = client.search(KAFKA_QUERY, limit=5, clearance_scope=CLEAR, as_of=before.hlc)
    assert _ids(early) == ["doc-filler"]
    assert client.search(KAFKA_QUERY, limit=5, clearance_scope=CLEAR, as_of=v1.hlc - 1).results
    assert "doc-x" not in _ids(
        client.search(KAFKA_QUERY, limit=5, clearance_scope=CLEAR, as_of=v1.hlc - 1)
    )
    nothing = client.search(KAFKA_QUERY, limit=5, clearance_scope=CLEAR, as_of=before.hlc - 1)
    assert _ids(nothing) == []


def test_deleted_element_visible_only_before_delete(client: uda.Client) -> None:
    client.ingest([FILLER])
    written = client.ingest([KAFKA_V1])
    assert written.hlc is not None
    gone = client.delete(["doc-x"])
    assert gone.deleted == 1
    assert gone.hlc is not None
    assert gone.hlc > written.hlc

    now = client.search(KAFKA_QUERY, limit=5, clearance_scope=CLEAR)
    assert "doc-x" not in _ids(now)
    assert "doc-filler" in _ids(now)
    then = client.search(KAFKA_QUERY, limit=5, clearance_scope=CLEAR, as_of=written.hlc)
    assert _ids(then)[0] == "doc-x"
    assert then.results[0].properties["version"] == 1
    after = client.search(KAFKA_QUERY, limit=5, clearance_scope=CLEAR, as_of=gone.hlc)
    assert "doc-x" not in _ids(after)


def test_relation_added_later_is_not_context_as_of_earlier(client: uda.Client) -> None:
    repo = Repository(element_id="repo-kafka", name="kafka-tools", sensitivity="public")
    v1 = client.ingest([KAFKA_V1, repo])
    assert v1.hlc is not None
    linked = client.ingest(relations=[("doc-x", "partOf", "repo-kafka")])
    assert linked.edges == 1
    assert linked.written == 0
    assert linked.hlc is not None
    assert linked.hlc > v1.hlc

    now = client.search(KAFKA_QUERY, limit=5, clearance_scope=CLEAR)
    hit = next(r for r in now.results if r.element_id == "doc-x")
    assert [(n["element_id"], n["relation"], n["direction"]) for n in hit.context_nodes] == [
        ("repo-kafka", "partOf", "out")
    ]
    assert _row(now, "doc-x")["centrality"] == 1.0

    then = client.search(KAFKA_QUERY, limit=5, clearance_scope=CLEAR, as_of=v1.hlc)
    hit = next(r for r in then.results if r.element_id == "doc-x")
    assert hit.properties["version"] == 1
    assert hit.context_nodes == []
    row = _row(then, "doc-x")
    assert row["centrality"] == 0.0
    assert row["centrality_rank"] is None

    # Deleting the repository closes the edge: gone now, still there as of before.
    client.delete(["repo-kafka"])
    after = client.search(KAFKA_QUERY, limit=5, clearance_scope=CLEAR)
    assert next(r for r in after.results if r.element_id == "doc-x").context_nodes == []
    back = client.search(KAFKA_QUERY, limit=5, clearance_scope=CLEAR, as_of=linked.hlc)
    assert [
        n["element_id"]
        for n in next(r for r in back.results if r.element_id == "doc-x").context_nodes
    ] == ["repo-kafka"]


def test_as_of_datetime_includes_the_whole_millisecond(tmp_path: Path, embedder: Embedder) -> None:
    """`as_of=to_datetime(report.hlc)` must see the state stamped in that millisecond.

    The wall clock is injected at 2039-05-06T00:45:03.713Z, a millisecond whose float
    seconds (2188255503.713) times 1000 is 2188255503712.9998.
    """
    wall = [2_188_255_503_713]
    clock = HybridLogicalClock(clock=lambda: wall[0])
    with uda.connect(path=tmp_path / "uda", embedder=embedder, clock=clock) as c:
        v1 = c.ingest([KAFKA_V1])
        wall[0] += 10_000
        v2 = c.ingest([POSTGRES_V2])
        assert v1.hlc is not None
        assert v2.hlc is not None
        assert v1.hlc == pack(2_188_255_503_713, 0)

        midway = to_datetime(pack(2_188_255_503_713 + 5_000, 0))
        res = c.search(KAFKA_QUERY, clearance_scope=CLEAR, as_of=midway)
        assert res.results[0].properties["version"] == 1

        before = to_datetime(v1.hlc) - timedelta(milliseconds=1)
        assert _ids(c.search(KAFKA_QUERY, clearance_scope=CLEAR, as_of=before)) == []

        exact = c.search(KAFKA_QUERY, clearance_scope=CLEAR, as_of=to_datetime(v1.hlc))
        assert _ids(exact) == ["doc-x"]
        assert exact.results[0].properties["version"] == 1
        assert to_datetime(v2.hlc) > to_datetime(v1.hlc)
