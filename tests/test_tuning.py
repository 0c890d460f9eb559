"""`uda tune`: the associative mode's PageRank weight chosen on the store's own data.

The choice rule and the recorded document are tested on their own; tuning, recording and
using the weight on a real embedded store (SQLite, Chroma, networkx) with a graph whose
documents share nodes; every surface that shows it: stats, explain, the CLI.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from ranking_fixtures import planned

import uda
from connectors.base import RelationalCapable
from ontology import Document, Sensitivity
from uda.cli.commands import EXIT_OK, EXIT_USAGE, main
from uda.config import SearchDefaults
from uda.embedding import Embedder
from uda.errors import InvalidRequestError, NothingToTuneError
from uda.query.auto.choice import ASSOCIATIVE_CENTRALITY_WEIGHT, AutoChoice, AutoMode
from uda.query.fusion import Leg
from uda.tuning import Tuning
from uda.tuning.measure import GRID, MIN_QUERIES, Halves, choose

PUBLIC = ["public"]
# A tuned weight that is not the mode's own, so that a test can tell which one a search used.
TUNED = 8.0
assert TUNED != ASSOCIATIVE_CENTRALITY_WEIGHT


def tuning(weight: float, **fields: object) -> Tuning:
    values: dict[str, object] = {
        "centrality_weight": weight,
        "default_weight": ASSOCIATIVE_CENTRALITY_WEIGHT,
        "tuned_at": "2026-11-26T09:00:00+00:00",
        "queries": 100,
        "seed": 0,
        **fields,
    }
    return Tuning(**values)  # type: ignore[arg-type]


# -- the recorded document ------------------------------------------------------------------
def test_the_document_reads_back_as_written() -> None:
    written = tuning(16.0, recall={"choose": {"4": 0.5, "16": 0.7}}, reason="because")
    assert Tuning.from_json(written.to_json()) == written
    assert Tuning.from_json(None) is None
    assert "16" in written.describe()
    assert "uda tune" in written.describe()


@pytest.mark.parametrize(
    "document",
    [
        "not json",
        "[]",
        '{"version": 99, "centrality_weight": 8}',
        '{"version": 1}',
        json.dumps({**json.loads(tuning(8.0).to_json()), "centrality_weight": "NaN"}),
        json.dumps({**json.loads(tuning(8.0).to_json()), "centrality_weight": -1}),
    ],
)
def test_an_unreadable_document_is_ignored_with_a_warning(
    document: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert Tuning.from_json(document) is None
    assert "tuning cannot be read" in caplog.text


# -- the choice -----------------------------------------------------------------------------
def halves(choose_: dict[float, float], confirm: dict[float, float]) -> Halves:
    return Halves(choose=choose_, confirm=confirm)


def test_a_weight_confirmed_on_the_other_half_is_chosen() -> None:
    chosen = choose(
        halves({2: 0.4, 4: 0.5, 8: 0.6, 16: 0.55}, {2: 0.4, 4: 0.5, 8: 0.58, 16: 0.5}),
        queries=100,
        seed=3,
        default=4.0,
    )
    assert (chosen.centrality_weight, chosen.default_weight) == (8, 4)
    assert chosen.changed
    assert chosen.seed == 3
    assert chosen.queries == 100
    assert chosen.recall["choose"]["8"] == 0.6
    assert chosen.recall["confirm"]["16"] == 0.5


def test_a_weight_the_other_half_does_not_confirm_leaves_the_modes_own() -> None:
    chosen = choose(halves({4: 0.5, 8: 0.6}, {4: 0.55, 8: 0.55}), queries=100, seed=0, default=4.0)
    assert chosen.centrality_weight == 4
    assert not chosen.changed
    assert "not on those that confirmed it" in chosen.reason


def test_a_tie_goes_to_the_modes_own_then_to_the_nearer() -> None:
    assert (
        choose(
            halves({2: 0.5, 4: 0.5}, {2: 0.9, 4: 0.1}), queries=9, seed=0, default=4.0
        ).centrality_weight
        == 4
    )
    nearer = choose(
        halves({1: 0.6, 8: 0.6, 4: 0.5}, {1: 0.7, 8: 0.7, 4: 0.5}), queries=9, seed=0, default=4.0
    )
    assert nearer.centrality_weight == 8  # one doubling from 4, where 1 is two


# -- where the weight applies ---------------------------------------------------------------
def test_the_tuned_weight_is_the_associative_modes_below_the_profile_and_the_request() -> None:
    associative = AutoChoice(mode=AutoMode.ASSOCIATIVE, reason="test").tuned(TUNED)
    assert planned(associative).weights[Leg.CENTRALITY] == TUNED
    asked = planned(associative, weights={"centrality": 2.0})
    assert asked.weights[Leg.CENTRALITY] == 2.0
    pinned = SearchDefaults(weights={Leg.CENTRALITY: 0.5}, pinned=frozenset({Leg.CENTRALITY}))
    assert planned(associative, pinned).weights[Leg.CENTRALITY] == 0.5
    context = AutoChoice(mode=AutoMode.CONTEXT, reason="test").tuned(TUNED)
    assert context.tuned_weight is None  # the context mode keeps the profile's weight
    assert planned(context).weights[Leg.CENTRALITY] == SearchDefaults().weights[Leg.CENTRALITY]
    described = planned(associative).describe()
    assert "PageRank weight 8 tuned on this store" in described


# -- on a real store ------------------------------------------------------------------------
def chain(client: uda.Client, n: int) -> None:
    """Documents in a chain: each inner one joins its two neighbours (n - 2 bridges)."""
    topics = ["cranes", "tides", "berths", "pilots", "tugs", "cargo", "customs", "storms"]
    client.ingest(
        [
            Document(
                element_id=f"d{i}",
                name=f"Harbour note {i}",
                text=(
                    f"The harbour log for day {i} records work on {topics[i % 8]} and "
                    f"{topics[(i * 3 + 1) % 8]} near berth {i}. Crews reported the "
                    f"{topics[(i + 5) % 8]} were handled before the evening shift {i}."
                ),
                sensitivity=Sensitivity.PUBLIC,
            )
            for i in range(n)
        ],
        [(f"d{i}", "relatedTo", f"d{i + 1}") for i in range(n - 1)],
    )


def test_tune_records_a_weight_that_searches_then_use(client: uda.Client) -> None:
    chain(client, MIN_QUERIES + 12)
    assert client.stats()["tuning"] is None
    before = client.search("harbour cranes", clearance_scope=PUBLIC).explain().plan
    assert before.auto.mode is AutoMode.ASSOCIATIVE
    assert before.auto.tuned_weight is None
    seen: list[tuple[int, int]] = []
    tuned = client.tune(
        queries=MIN_QUERIES, progress=lambda done, total: seen.append((done, total))
    )
    assert tuned.queries == MIN_QUERIES
    assert set(tuned.recall) == {"choose", "confirm"}
    assert set(tuned.recall["choose"]) == {f"{w:g}" for w in GRID}
    assert tuned.centrality_weight in GRID
    assert seen[-1] == (MIN_QUERIES * len(GRID), MIN_QUERIES * len(GRID))
    assert client.stats()["tuning"] == tuned.to_dict()
    plan = client.search("harbour cranes", clearance_scope=PUBLIC).explain().plan
    assert plan.auto.tuned_weight == tuned.centrality_weight
    assert plan.weights[Leg.CENTRALITY] == tuned.centrality_weight
    # The same store and seed measure the same queries: the same figures, nothing recorded.
    again = client.tune(queries=MIN_QUERIES, dry_run=True)
    assert again.recall == tuned.recall
    client.forget_tuning()
    assert client.stats()["tuning"] is None
    forgotten = client.search("harbour cranes", clearance_scope=PUBLIC).explain().plan
    assert forgotten.auto.tuned_weight is None
    assert forgotten.weights[Leg.CENTRALITY] == ASSOCIATIVE_CENTRALITY_WEIGHT


def test_a_store_with_too_little_graph_has_nothing_to_tune(client: uda.Client) -> None:
    chain(client, 6)
    with pytest.raises(NothingToTuneError) as caught:
        client.tune(queries=MIN_QUERIES)
    assert caught.value.field == "queries"
    assert "Nothing was recorded" in str(caught.value)
    assert client.stats()["tuning"] is None
    with pytest.raises(InvalidRequestError) as bad:
        client.tune(queries=MIN_QUERIES - 1)
    assert bad.value.field == "queries"


def record(client: uda.Client, weight: float) -> None:
    """Record a tuning as another process would, and let this client read it."""
    sor = next(c for c in client.connectors if isinstance(c, RelationalCapable))
    client._call(sor.record_tuning(tuning(weight).to_json()))
    client._call(client._async._require()[0].tuning.read())


def test_a_later_page_keeps_the_first_pages_tuned_weight(client: uda.Client) -> None:
    chain(client, 12)
    record(client, TUNED)
    first = client.search("harbour cranes", limit=2, clearance_scope=PUBLIC)
    assert first.explain().plan.weights[Leg.CENTRALITY] == TUNED
    assert first.next_cursor is not None
    record(client, 1.0)
    assert (
        client.search("harbour cranes", clearance_scope=PUBLIC).explain().plan.auto.tuned_weight
        == 1.0
    )
    second = client.search(
        "harbour cranes", limit=2, clearance_scope=PUBLIC, cursor=first.next_cursor
    )
    assert second.explain().plan.auto.tuned_weight == TUNED
    assert second.explain().plan.weights[Leg.CENTRALITY] == TUNED
    again = client.rerun(first.query_id or "")
    assert again.explain().plan.weights[Leg.CENTRALITY] == TUNED
    assert [r.element_id for r in again.results] == [r.element_id for r in first.results]


def test_a_new_client_of_the_store_reads_the_tuning(tmp_path: Path, embedder: Embedder) -> None:
    with uda.connect(path=tmp_path / "uda", embedder=embedder) as first:
        chain(first, 12)
        record(first, 8.0)
    with uda.connect(path=tmp_path / "uda", embedder=embedder) as second:
        plan = second.search("harbour cranes", clearance_scope=PUBLIC).explain().plan
    assert plan.auto.tuned_weight == 8.0


# -- the command line -----------------------------------------------------------------------
def test_uda_tune_and_stats(
    tmp_path: Path, embedder: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    with uda.connect(path=store, embedder=embedder) as client:
        chain(client, MIN_QUERIES + 12)
    assert main(["--path", str(store), "stats"]) == EXIT_OK
    assert "tuning: not tuned (run `uda tune`)" in capsys.readouterr().out
    args = ["--path", str(store), "tune", "--queries", str(MIN_QUERIES)]
    assert main([*args, "--dry-run", "--format", "json"]) == EXIT_OK
    shown = json.loads(capsys.readouterr().out)
    assert shown["recorded"] is False
    assert shown["queries"] == MIN_QUERIES
    assert main(["--path", str(store), "stats"]) == EXIT_OK
    assert "not tuned" in capsys.readouterr().out
    assert main(args) == EXIT_OK
    table = capsys.readouterr().out
    assert "Recall@5 of the second hop" in table
    assert ", recorded:" in table
    assert main(["--path", str(store), "stats"]) == EXIT_OK
    assert "from `uda tune`" in capsys.readouterr().out
    assert main([*args[:3], "--queries", "3"]) == EXIT_USAGE
    assert "queries" in capsys.readouterr().err
    small = tmp_path / "small"
    with uda.connect(path=small, embedder=embedder) as client:
        chain(client, 6)
    assert main(["--path", str(small), "tune"]) == EXIT_OK  # not a mistake: nothing to do
    assert "nothing to tune: only" in capsys.readouterr().out
    assert main(["--path", str(small), "tune", "--format", "json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["recorded"] is False
    assert main([*args[:3], "--reset"]) == EXIT_OK
    capsys.readouterr()
    assert main(["--path", str(store), "stats"]) == EXIT_OK
    assert "not tuned" in capsys.readouterr().out
