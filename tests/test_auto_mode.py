"""The planner's automatic mode: graph settings chosen from the graph's shape (uda/query/auto).

The rule is tested on shapes; the planner on a real embedded store (SQLite, Chroma,
networkx): the mode follows the store as this client writes it, a caller's mode depends
only on what it may see, a later page keeps its first page's mode, and every explicit
option (request or profile) wins.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ranking_fixtures import planned

import uda
from connectors.contract.graph_shape import GraphShape
from ontology import Document, Person
from uda.config import ConfigError, SearchDefaults, _search_defaults  # pyright: ignore[reportPrivateUsage]
from uda.embedding import Embedder
from uda.query.auto.choice import (
    ASSOCIATIVE_CENTRALITY_WEIGHT,
    SELECTIVE_NEIGHBOURS,
    AutoChoice,
    AutoMode,
    choose,
)
from uda.query.fusion import Leg
from uda.query.plan import Plan


def shape(*, assets: int = 100, bridges: int = 10, pairs: int = 200) -> GraphShape:
    return GraphShape(
        assets=assets, edges=2 * bridges, bridges=bridges, asset_pairs=pairs, widest_bridge=3
    )


# -- the rule -------------------------------------------------------------------------------
def test_no_shape_and_no_bridges_are_the_context_mode() -> None:
    assert choose(None).mode is AutoMode.CONTEXT
    assert choose(shape(bridges=0, pairs=0)).mode is AutoMode.CONTEXT
    assert choose(
        GraphShape(assets=0, edges=0, bridges=0, asset_pairs=0, widest_bridge=0)
    ).mode is (AutoMode.CONTEXT)


def test_selective_bridges_are_associative_and_hubs_are_context() -> None:
    limit = int(SELECTIVE_NEIGHBOURS)
    assert choose(shape(assets=100, pairs=100 * limit)).mode is AutoMode.ASSOCIATIVE
    hubs = choose(shape(assets=100, pairs=100 * limit + 1))
    assert hubs.mode is AutoMode.CONTEXT
    assert "hubs" in hubs.reason


def test_the_reason_never_carries_the_stores_counts() -> None:
    """A caller reads the reason in explain(): it names the rule, not how much there is."""
    for counted in (shape(assets=12345, pairs=54321), shape(assets=777, pairs=9_999_999)):
        reason = choose(counted).reason
        assert not any(str(n) in reason for n in (12345, 54321, 777, 9_999_999))


# -- the plan -------------------------------------------------------------------------------
def plan_of(auto: AutoMode, defaults: SearchDefaults | None = None, **fields: object) -> Plan:
    return planned(AutoChoice(mode=auto, reason="test"), defaults, **fields)


def test_the_mode_fills_what_the_request_leaves_unset() -> None:
    associative = plan_of(AutoMode.ASSOCIATIVE)
    assert (associative.expand_depth, associative.traverse) == (2, "association")
    assert (associative.centrality, associative.graph_candidates) == ("pagerank", True)
    assert associative.weights[Leg.CENTRALITY] == ASSOCIATIVE_CENTRALITY_WEIGHT
    context = plan_of(AutoMode.CONTEXT)
    assert (context.expand_depth, context.traverse) == (1, "context")
    assert (context.centrality, context.graph_candidates) == ("degree", False)
    assert context.weights[Leg.CENTRALITY] == SearchDefaults().weights[Leg.CENTRALITY]
    assert "auto: associative mode" in associative.describe()
    assert associative.to_dict()["auto"] == {"mode": "associative", "reason": "test"}
    # The retrieval legs meet by score in the context mode, by rank in the associative one.
    assert (context.relevance, associative.relevance) == ("scores", "ranks")
    assert "fused by score" in context.describe()
    assert context.to_dict()["relevance"] == "scores"


def test_explicit_options_win_over_the_mode() -> None:
    plan = plan_of(
        AutoMode.ASSOCIATIVE,
        expand_depth=1,
        traverse="context",
        centrality="degree",
        graph_candidates=False,
        weights={"centrality": 0.5},
    )
    assert (plan.expand_depth, plan.traverse, plan.centrality) == (1, "context", "degree")
    assert plan.graph_candidates is False
    assert plan.weights[Leg.CENTRALITY] == 0.5


def test_a_weight_the_profile_sets_is_kept() -> None:
    defaults = _search_defaults({"weights": {"centrality": 0.7}})
    assert plan_of(AutoMode.ASSOCIATIVE, defaults).weights[Leg.CENTRALITY] == 0.7
    unpinned = _search_defaults({"weights": {"lexical": 0.5}})
    plan = plan_of(AutoMode.ASSOCIATIVE, unpinned)
    assert plan.weights[Leg.CENTRALITY] == ASSOCIATIVE_CENTRALITY_WEIGHT
    assert plan.weights[Leg.LEXICAL] == 0.5


def test_the_profile_graph_mode_is_checked() -> None:
    assert _search_defaults({}).graph_mode == "auto"
    assert _search_defaults({"graph_mode": "context"}).graph_mode == "context"
    with pytest.raises(ConfigError) as caught:
        _search_defaults({"graph_mode": "sideways"})
    assert caught.value.field == "search.graph_mode"


# -- the planner on a real store ------------------------------------------------------------
def documents(prefix: str, n: int, sensitivity: str = "public") -> list[Document]:
    return [
        Document(
            element_id=f"{prefix}{i}",
            name=f"{prefix} note {i}",
            text=f"Harbour logistics note number {i} about cranes, tides and berth {i}.",
            sensitivity=sensitivity,
        )
        for i in range(n)
    ]


def mode_of(client: uda.Client, scope: list[str], **options: object) -> AutoChoice:
    response = client.search("harbour cranes", limit=2, clearance_scope=scope, **options)  # type: ignore[arg-type]
    return response.explain().plan.auto


def test_the_mode_follows_the_store_as_this_client_writes_it(client: uda.Client) -> None:
    client.ingest(documents("d", 6))
    assert mode_of(client, ["public"]).mode is AutoMode.CONTEXT
    # A chain of documents: each inner one joins its two neighbours, selectively.
    client.ingest([], [(f"d{i}", "relatedTo", f"d{i + 1}") for i in range(5)])
    chosen = mode_of(client, ["public"])
    assert chosen.mode is AutoMode.ASSOCIATIVE
    plan = client.search("harbour cranes", clearance_scope=["public"]).explain().plan
    assert (plan.expand_depth, plan.centrality, plan.graph_candidates) == (2, "pagerank", True)
    stats = client.stats()["graph"]
    assert stats["auto_mode"] == "associative"
    assert (stats["assets"], stats["bridges"], stats["asset_pairs"]) == (6, 4, 8)
    # The request's own settings win.
    asked = client.search(
        "harbour cranes", clearance_scope=["public"], expand_depth=1, centrality="degree"
    )
    assert (asked.explain().plan.expand_depth, asked.explain().plan.centrality) == (1, "degree")


def test_a_hub_keeps_the_context_mode(client: uda.Client) -> None:
    count = int(SELECTIVE_NEIGHBOURS) + 2  # one author of everything: a walk reaches all
    author = Person(element_id="author", name="Ada", sensitivity="public")
    client.ingest(
        [author, *documents("h", count)],
        [(f"h{i}", "authoredBy", "author") for i in range(count)],
    )
    chosen = mode_of(client, ["public"])
    assert chosen.mode is AutoMode.CONTEXT
    assert "hubs" in chosen.reason


def test_a_callers_mode_depends_only_on_what_it_may_see(client: uda.Client) -> None:
    """Restricted documents link the public ones; a public caller must not feel them."""
    public = documents("p", 4)
    secret = documents("s", 2, sensitivity="restricted")
    links = [(f"p{i}", "relatedTo", f"s{i % 2}") for i in range(4)]
    client.ingest([*public, *secret], links)
    assert mode_of(client, ["public"]).mode is AutoMode.CONTEXT
    assert mode_of(client, ["restricted"]).mode is AutoMode.ASSOCIATIVE
    # The same store, the same public caller: its answer is the one of a store without
    # the restricted part (the mode and every score).
    seen = client.search("harbour cranes", limit=4, clearance_scope=["public"])
    assert all(r.element_id.startswith("p") for r in seen.results)


def test_a_later_page_keeps_the_first_pages_mode(client: uda.Client) -> None:
    client.ingest(documents("d", 8))
    first = client.search("harbour cranes", limit=2, clearance_scope=["public"])
    assert first.explain().plan.auto.mode is AutoMode.CONTEXT
    assert first.next_cursor is not None
    client.ingest([], [(f"d{i}", "relatedTo", f"d{i + 1}") for i in range(7)])
    assert mode_of(client, ["public"]).mode is AutoMode.ASSOCIATIVE
    second = client.search(
        "harbour cranes", limit=2, clearance_scope=["public"], cursor=first.next_cursor
    )
    kept = second.explain().plan
    assert kept.auto.mode is AutoMode.CONTEXT
    assert (kept.expand_depth, kept.centrality, kept.graph_candidates) == (1, "degree", False)
    again = client.rerun(first.query_id or "")
    assert again.explain().plan.auto.mode is AutoMode.CONTEXT
    assert [r.element_id for r in again.results] == [r.element_id for r in first.results]


def test_a_profile_mode_is_used_without_reading_the_shape(
    tmp_path: Path, embedder: Embedder
) -> None:
    profile_file = tmp_path / "uda.toml"
    profile_file.write_text('[uda]\npath = "store"\n\n[search]\ngraph_mode = "associative"\n')
    with uda.connect(str(profile_file), embedder=embedder) as client:
        client.ingest(documents("d", 3))
        chosen = mode_of(client, ["public"])
    assert chosen.mode is AutoMode.ASSOCIATIVE
    assert "graph_mode" in chosen.reason
