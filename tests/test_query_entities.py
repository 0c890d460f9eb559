"""Query entities (ADR 47): a graph node the query names lifts the candidates linked to it.

The rules are unit-tested on `uda.query.entities`; the leg end to end on the embedded profile
(Chroma, networkx, SQLite): it ranks, `explain()` says why, a weight of 0 turns it off, the
associative mode leaves it off, and a node the caller may not see names nothing.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import uda
from ontology import Decision, Relation, SystemComponent
from uda.agent import UDADeps
from uda.agent.models import GetResultArgs, SearchArgs
from uda.agent.tools import get_result, search
from uda.embedding import Embedder
from uda.query.auto.choice import AutoMode, leg_weight_overrides, profile_choice
from uda.query.entities import QueryWords, linked_candidates, may_name_any, words
from uda.query.fusion import Leg

EVERYONE = ["restricted", "project:*"]


# -- the rules ------------------------------------------------------------------------------
def test_words_are_folded_and_trimmed_of_outer_punctuation() -> None:
    assert words("Which KEP replaced  Decouple PodGroup API?") == (
        "which",
        "kep",
        "replaced",
        "decouple",
        "podgroup",
        "api",
    )
    assert words("(SIG-Apps), sig-apps! -- ...") == ("sig-apps", "sig-apps")


@pytest.mark.parametrize(
    ("name", "named"),
    [
        ("sig-apps", True),  # one word, joined
        ("SIG-Apps", True),  # case-folded
        ("Decouple PodGroup API", True),  # words in order, next to each other
        ("apps", False),  # part of a word is not a word of the query
        ("sig", False),
        ("PodGroup Decouple", False),  # out of order
        ("Decouple API", False),  # not next to each other
        ("api", False),  # one word of letters only: ordinary language
        ("PodGroup", False),
        ("k8s", False),  # not a word of this query
        ("ap", False),  # too short
        ("2021", False),  # no letter
        ("", False),
        ("sig-apps decouple podgroup api and more", False),  # longer than the query
    ],
)
def test_a_name_is_named_when_its_words_occur_in_order(name: str, named: bool) -> None:
    asked = QueryWords.of("sig-apps: decouple PodGroup API")
    assert asked.names(name) is named


def test_linked_candidates_need_the_graph_and_a_visible_name() -> None:
    adj = {
        "doc:1": [("sig:apps", "partOf", "out")],
        "doc:2": [("sig:node", "partOf", "out")],
        "doc:3": [("sig:hidden", "partOf", "out")],
        "sig:apps": [("doc:1", "partOf", "in")],
    }
    names = {
        "doc:1": "Rollouts",
        "doc:2": "Rollouts again",
        "doc:3": "Rollouts too",
        "doc:4": "sig-apps",  # named, but not in the graph: no entity
        "sig:apps": "sig-apps",
        "sig:node": "sig-node",
        # sig:hidden has no name here: the caller may not see it
    }
    linked = linked_candidates(
        "sig-apps rollouts", ["doc:1", "doc:2", "doc:3", "doc:4", "sig:apps"], adj, names
    )
    assert linked == {"doc:1": ("sig-apps",), "sig:apps": ("sig-apps",)}
    assert linked_candidates("", ["doc:1"], adj, names) == {}


# Names and queries from a few words, spaces, line breaks and punctuation, so that first
# words, trimming, empty and one-word names and breaks inside a name all come up often.
_PIECES = st.sampled_from(
    ["sig-apps", "SIG", "apps", "k8s", "Kube", "ß", "ss", "é", "2021", "_x_", "(", ")", "-"]
)
_GAPS = st.sampled_from([" ", "  ", "\n", "\t", "", "?", "-", "_"])
_TEXT = st.lists(st.tuples(_PIECES, _GAPS), max_size=5).map(
    lambda parts: "".join(piece + gap for piece, gap in parts)
)


@settings(max_examples=400, deadline=None)
@given(query=_TEXT, names=st.lists(_TEXT, max_size=6))
def test_the_quick_scan_never_hides_a_named_node(query: str, names: list[str]) -> None:
    """`may_name_any` may say yes wrongly, never no: it only spares the test per node."""
    asked = QueryWords.of(query)
    if any(asked.names(name) for name in names):
        assert may_name_any(asked, names)


def test_the_quick_scan_says_no_when_no_first_word_is_asked() -> None:
    asked = QueryWords.of("apps rollout proposals")
    assert not may_name_any(asked, ["sig-apps", "SIG apps", "Rollouts too"])
    assert may_name_any(asked, ["(Apps) team", "sig-node"])


# -- end to end -----------------------------------------------------------------------------
def _corpus(sig_apps_sensitivity: str = "public") -> tuple[list, list[Relation]]:
    """Two SIGs; the sig-node decision is about rollouts too, and says so more often."""
    elements = [
        SystemComponent(
            element_id="sig:apps", name="sig-apps", kind="sig", sensitivity=sig_apps_sensitivity
        ),
        SystemComponent(element_id="sig:node", name="sig-node", kind="sig"),
        Decision(
            element_id="kep:apps",
            name="Deployment pause",
            text="Pause a deployment while it is rolled out.",
        ),
        Decision(
            element_id="kep:node",
            name="Rollout of node images",
            text="Rollout proposals: how node images roll out, rollout by rollout.",
        ),
    ]
    relations = [
        Relation(source_id="kep:apps", relation="partOf", target_id="sig:apps"),
        Relation(source_id="kep:node", relation="partOf", target_id="sig:node"),
    ]
    return elements, relations


QUERY = "sig-apps rollout proposals"


def test_a_named_node_lifts_what_is_linked_to_it(client: uda.Client) -> None:
    elements, relations = _corpus()
    client.ingest(elements, relations)
    off = client.search(QUERY, limit=5, clearance_scope=EVERYONE, weights={Leg.ENTITY: 0.0})
    assert off.results[0].element_id == "kep:node"  # the text alone prefers the other SIG's
    on = client.search(QUERY, limit=5, clearance_scope=EVERYONE)
    assert [r.element_id for r in on.results][:2] == ["kep:apps", "kep:node"]
    explained = {r.element_id: r for r in on.explain().results}
    assert explained["kep:apps"].entities == ("sig-apps",)
    assert explained["kep:apps"].legs[Leg.ENTITY].rank == 1
    assert explained["kep:apps"].legs[Leg.ENTITY].contribution > 0
    assert explained["kep:node"].entities == ()
    assert explained["kep:node"].legs[Leg.ENTITY].rank is None
    assert "linked to sig-apps" in str(on.explain())
    table = on.to_arrow()
    assert isinstance(table, pa.Table)
    assert table.column("entity_rank").to_pylist()[:2] == [1, None]
    # Through the plain-data form too (what travels over HTTP).
    again = type(on.explain()).from_dict(on.explain().to_dict())
    assert again.results[0].entities == ("sig-apps",)


def test_a_hidden_node_names_nothing(client: uda.Client) -> None:
    elements, relations = _corpus(sig_apps_sensitivity="confidential")
    client.ingest(elements, relations)
    public = client.search(QUERY, limit=5, clearance_scope=["public"])
    unlinked = client.search(QUERY, limit=5, clearance_scope=["public"], weights={Leg.ENTITY: 0.0})
    assert [r.element_id for r in public.results] == [r.element_id for r in unlinked.results]
    assert [r.score for r in public.results] == [r.score for r in unlinked.results]
    assert all(r.entities == () for r in public.explain().results)
    cleared = client.search(QUERY, limit=5, clearance_scope=["confidential"])
    assert cleared.results[0].element_id == "kep:apps"


async def test_the_agent_is_told_what_a_result_is_linked_to(
    tmp_path: Path, embedder: Embedder
) -> None:
    elements, relations = _corpus(sig_apps_sensitivity="confidential")
    async with uda.aconnect(path=tmp_path / "uda", embedder=embedder) as client:
        await client.ingest(elements, relations)
        cleared = UDADeps(client=client, clearance_scope=["confidential"])
        answer = await search(cleared, SearchArgs(query=QUERY))
        best = await get_result(cleared, GetResultArgs(query_id=answer.query_id, rank=1))
        assert (best.element_id, best.linked_to) == ("kep:apps", ["sig-apps"])
        assert best.legs["entity"].rank == 1
        second = await get_result(cleared, GetResultArgs(query_id=answer.query_id, rank=2))
        assert second.linked_to == []
        # The caller who may not see sig-apps is not told of it.
        public = UDADeps(client=client, clearance_scope=["public"])
        answer = await search(public, SearchArgs(query=QUERY))
        for rank in range(1, len(answer.hits) + 1):
            shown = await get_result(public, GetResultArgs(query_id=answer.query_id, rank=rank))
            assert shown.linked_to == []
            assert "sig-apps" not in shown.model_dump_json()


def test_the_associative_mode_leaves_the_leg_off() -> None:
    associative = leg_weight_overrides(profile_choice(AutoMode.ASSOCIATIVE))
    assert associative[Leg.ENTITY] == 0.0
    assert Leg.ENTITY not in leg_weight_overrides(profile_choice(AutoMode.CONTEXT))
