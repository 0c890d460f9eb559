"""The `auto_search` router: a pure function from query text to a strategy and a reason."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uda.agent.router import (
    hybrid_weights,
    is_question,
    lexical_signals,
    proper_nouns,
    route_query,
    strategy_weights,
)
from uda.query.fusion import Leg

LEXICAL = [
    '"idempotency key"',
    'the "exponential backoff" settings',
    "retry_policy",
    "MAX_RETRIES",
    "SearchRequest",
    "ArcadeDBConnector",
    "PAY-1234",
    "JIRA-42 status",
    "uda/agent/router.py",
    "docs/adr",
    "config.toml",
    "connectors.base.VectorCapable",
    "uda.connect()",
    "--clearance flag",
    "v1.2.3 release",
    "commit 3f9a2c1d",
    "`expand_depth`",
]
LEXICAL_QUESTIONS = [
    "what does retry_policy do?",
    "Where is SearchRequest validated?",
    'why is "project:*" allowed?',
    'where is "exponential backoff" configured',
    "how does PAY-1234 change billing?",
]
NAMES = [
    "retries by Ada Lovelace",
    "decisions about Postgres",
    "HLC skew",
    "BM25 statistics",
    "outbox for Chroma",
]
NAME_QUESTIONS = [
    "what did Ada Lovelace decide?",
    "How does UDA use RRF?",
]
SEMANTIC = [
    "how are failed payments retried?",
    "Why are lexical statistics computed per caller?",
    "what happens if an ingest is killed half way",
    "Which decisions govern the payment service?",
    "explain how recency is weighed against relevance",
    "can a public caller see internal documents?",
    "Is the graph leg weighted lower than the others?",
]
KEYWORDS = ["decay", "payment retries", "graph expansion depth"]
CONCEPTS = [
    "the trade-off between freshness and relevance in ranking",
    "keeping stores consistent after a crash during writes",
]


@pytest.mark.parametrize("query", LEXICAL)
def test_identifiers_and_quotes_lean_lexical(query: str) -> None:
    route = route_query(query)
    assert route.strategy == "hybrid"
    assert route.text_weight == 0.8, route
    assert "exact-word signals" in route.reason
    assert route.signals


@pytest.mark.parametrize("query", LEXICAL_QUESTIONS)
def test_identifiers_in_questions_lean_lexical_less(query: str) -> None:
    route = route_query(query)
    assert route.strategy == "hybrid"
    assert route.text_weight == 0.6, route
    assert "in a question" in route.reason


@pytest.mark.parametrize("query", NAMES)
def test_names_and_acronyms_lean_lexical_a_little(query: str) -> None:
    route = route_query(query)
    assert route.strategy == "hybrid"
    assert route.text_weight == 0.65, route
    assert "names or acronyms" in route.reason


@pytest.mark.parametrize("query", NAME_QUESTIONS)
def test_names_in_questions_weigh_both_legs(query: str) -> None:
    route = route_query(query)
    assert (route.strategy, route.text_weight) == ("hybrid", 0.5), route


@pytest.mark.parametrize("query", SEMANTIC)
def test_plain_questions_go_semantic(query: str) -> None:
    route = route_query(query)
    assert (route.strategy, route.text_weight) == ("semantic", 0.0), route
    assert "meaning" in route.reason


@pytest.mark.parametrize("query", KEYWORDS)
def test_short_keywords_use_both_legs_equally(query: str) -> None:
    route = route_query(query)
    assert (route.strategy, route.text_weight) == ("hybrid", 0.5), route


@pytest.mark.parametrize("query", CONCEPTS)
def test_descriptive_phrases_lean_semantic(query: str) -> None:
    route = route_query(query)
    assert route.strategy == "hybrid"
    assert route.text_weight == 0.3, route
    assert "leaning on meaning" in route.reason


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('"idempotency key"', "quoted phrase: idempotency key"),
        ("what does retry_policy do", "snake_case identifier: retry_policy"),
        ("SearchRequest fields", "CamelCase identifier: SearchRequest"),
        ("PAY-1234", "ticket or key: PAY-1234"),
        ("see uda/agent/router.py", "path: uda/agent/router.py"),
        ("HLC skew", "acronym: HLC"),
        ("retries by Ada Lovelace", "proper noun: Ada"),
    ],
)
def test_signals_name_what_they_saw(query: str, expected: str) -> None:
    assert expected in lexical_signals(query)


@pytest.mark.parametrize(
    "query",
    ["e.g. the retry policy", "I think retries matter", "What is a decision record", "OK then"],
)
def test_ordinary_prose_has_no_lexical_signals(query: str) -> None:
    assert lexical_signals(query) == []


def test_sentence_initial_capitals_are_not_names() -> None:
    assert proper_nouns("Retries are slow. Payments too; Ada knows") == ["Ada"]


def test_questions_are_recognised_by_mark_or_first_word() -> None:
    assert is_question("retries?")
    assert is_question("how do retries work")
    assert not is_question("retry policy")


def test_reason_names_the_signals() -> None:
    route = route_query("where is retry_policy in uda/agent/router.py?")
    assert "retry_policy" in route.reason
    assert "uda/agent/router.py" in route.reason


def test_strategy_weights() -> None:
    assert strategy_weights("default", None) is None
    assert strategy_weights("semantic", None) == {Leg.SEMANTIC: 1.0, Leg.LEXICAL: 0.0}
    assert strategy_weights("hybrid", 0.5) == {Leg.SEMANTIC: 1.0, Leg.LEXICAL: 1.0}
    assert strategy_weights("hybrid", 1.0) == {Leg.SEMANTIC: 0.0, Leg.LEXICAL: 1.0}
    with pytest.raises(ValueError, match="text_weight"):
        hybrid_weights(1.5)


@given(st.floats(min_value=0.0, max_value=1.0))
def test_hybrid_weights_keep_the_ratio_and_the_stronger_leg_at_one(t: float) -> None:
    weights = hybrid_weights(t)
    semantic, lexical = weights[Leg.SEMANTIC], weights[Leg.LEXICAL]
    assert max(semantic, lexical) == pytest.approx(1.0)
    assert lexical * (1 - t) == pytest.approx(semantic * t, abs=1e-9)


@given(st.text(max_size=200))
def test_route_never_fails_and_always_explains(query: str) -> None:
    route = route_query(query)
    assert route.strategy in {"semantic", "hybrid"}
    assert 0.0 <= route.text_weight <= 1.0
    assert route.reason
