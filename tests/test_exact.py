"""Exact matches first (uda/query/exact.py): the token rules, the matching, and the ranking.

Pure functions and `rank()` over hand-made evidence; the end-to-end behaviour on real stores
is in tests/test_exact_matches.py.
"""

from __future__ import annotations

import itertools
import json

import pytest
from ranking_fixtures import stored_document

from uda.config import SearchDefaults
from uda.query.auto.choice import choose
from uda.query.contracts import SearchRequest
from uda.query.exact import (
    BOOST_FACTOR,
    ExactMatch,
    ExactQuery,
    MatchKind,
    exact_boost,
    identifiers,
    is_identifier,
    phrases,
    score_ceiling,
)
from uda.query.explanation import Explanation
from uda.query.fusion import DEFAULT_WEIGHTS, RRF_K, Leg, ReciprocalRankFusion
from uda.query.plan import make_plan
from uda.query.ranking import Evidence, rank
from uda.query.results import SearchResponse

# -- which tokens are identifiers ------------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    [
        "zx0000q",  # the marker words of the motivating failure
        "PAY-1234",
        "KEP-1287",
        "kep-1287",
        "rs647161",
        "v2.100",
        "123e4567-e89b-12d3-a456-426614174000",  # a UUID
        "expand_depth",  # snake case
        "MAX_POOL",
        "x_y",
        "3f2a9c1",  # a short commit hash
        "DEADBEEF42",
    ],
)
def test_identifier_like_tokens(token: str) -> None:
    assert is_identifier(token)


@pytest.mark.parametrize(
    "token",
    [
        # ordinary words, hyphenated words, abbreviations, numbers
        "payments",
        "well-known",
        "T-cell",
        "e.g",
        "2024",
        "1,000",
        "12345",
        # the short mixed tokens of scientific prose (SciFact claims)
        "p53",
        "IL-6",
        "APOE4",
        "H3K4me3",
        "H3K79me2",
        "COVID-19",
        "IPv6",
        "BRCA1",
        "HTTP3",
        "v1.2.3",
        "KEP-12",
        # not one run of letters and digits joined by single - _ .
        "k8s.io/component-base",
        "PAY--1234",
        "_private",
        "a+b123",
        "PAY-1234é",
        # hex without a digit, or too short
        "deadbeef",
        "3f2a9c",
        "ab",
    ],
)
def test_not_identifier_like(token: str) -> None:
    assert not is_identifier(token)


def test_identifiers_are_query_words_without_edge_punctuation() -> None:
    query = 'Where is (PAY-1234)? Also "zx0000q," and pay-1234 again, p53, expand_depth.'
    assert identifiers(query) == ("PAY-1234", "zx0000q", "expand_depth")


def test_quoted_phrases() -> None:
    query = 'the "rate   limit." of “Van Gogh” bundles, "" and "..." and an "unbalanced one'
    assert phrases(query) == ("rate limit", "Van Gogh")
    assert phrases('"Rate limit" or "rate LIMIT"') == ("Rate limit",)
    assert phrases("it's Ada's plan") == ()


def test_ordinary_questions_have_nothing_to_match_but_a_name() -> None:
    for query in (
        "how do payments and deployments work?",
        "ALDH1 expression is associated with poorer prognosis in breast cancer.",
        "CX3CR1 on the Th2 cells promotes airway inflammation.",
        "IPv4/IPv6 dual-stack support",
    ):
        exact = ExactQuery.of(query)
        assert exact.terms == (), query
        assert exact.match("Something else", [query + " and more"]) is None


# -- how a candidate matches -----------------------------------------------------------------


def test_name_equal_to_the_query_case_and_whitespace_folded() -> None:
    exact = ExactQuery.of("  release\tCHECKLIST ")
    found = exact.match("Release  checklist", [])
    assert found == ExactMatch(kind=MatchKind.NAME, term="release checklist")
    assert exact.match("Release checklists", ["release checklist"]) is None
    assert exact.match("The release checklist", []) is None


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("see PAY-1234 for details", True),
        ("(PAY-1234).", True),
        ("pay-1234", True),  # case-insensitive
        ("PAY-1234: done", True),
        ("PAY-1234\nnext line", True),
        ("PAY-12345", False),
        ("PAY-1234-2", False),
        ("xPAY-1234", False),
        ("PAY-1234_old", False),
        ("PAY-1234.md", False),
        ("api.PAY-1234", False),
        ("PAY 1234", False),  # the lexical analyzer's terms, not the token
        ("PAY1234", False),
    ],
)
def test_identifier_occurs_as_a_whole_token(text: str, matches: bool) -> None:
    found = ExactQuery.of("what happened in PAY-1234?").match("Notes", [text])
    expected = ExactMatch(kind=MatchKind.IDENTIFIER, term="PAY-1234") if matches else None
    assert found == expected


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("The Rate  Limit, as agreed", True),
        ("rate\nlimit", True),
        ("a rate limiter", False),
        ("first-rate limit", True),  # '-' is not a word character
        ("corporate limit", False),
        ("rate-limit", False),
    ],
)
def test_quoted_phrase_occurs_verbatim(text: str, matches: bool) -> None:
    found = ExactQuery.of('the "rate limit" of the API').match("Notes", [text])
    assert (found is not None) is matches
    if found is not None:
        assert found == ExactMatch(kind=MatchKind.PHRASE, term="rate limit")


def test_a_phrase_of_symbols_matches_where_its_ends_are_not_word_characters() -> None:
    exact = ExactQuery.of('build with "C++" only')
    assert exact.match("Notes", ["we use C++17 here"]) is not None
    assert exact.match("Notes", ["we use C here"]) is None


def test_match_in_the_name_or_in_any_leg_chunk() -> None:
    exact = ExactQuery.of("zx0042q")
    assert exact.match("zx0042q notes", []) is not None
    assert exact.match("Notes", ["nothing", "marker zx0042q"]) is not None
    assert exact.match("Notes", ["marker zx0043q", "zx00042q"]) is None


def test_no_match_across_two_texts() -> None:
    exact = ExactQuery.of('"release checklist" zx0042q')
    assert exact.match("Release", ["checklist of the day", "zx0042"]) is None
    assert exact.match("Release", ["q zx0042", "q"]) is None
    # A text's end bounds a token as a space would.
    assert exact.match("zx0042q", ["zx0042q"]) is not None
    assert exact.match("Notes", ["x", "ends with zx0042q"]) is not None


def test_the_strongest_kind_wins() -> None:
    query = '"release checklist" PAY-1234'
    exact = ExactQuery.of(query)
    assert exact.match(query.upper(), []) == ExactMatch(kind=MatchKind.NAME, term=query.lower())
    both = exact.match("Notes", ["PAY-1234: the release checklist"])
    assert both == ExactMatch(kind=MatchKind.PHRASE, term="release checklist")
    assert exact.match("Notes", ["PAY-1234"]) == ExactMatch(
        kind=MatchKind.IDENTIFIER, term="PAY-1234"
    )


def test_no_query_matches_nothing() -> None:
    assert ExactQuery.of(None).match("", [""]) is None
    assert ExactQuery.of("").match("", ["zx0000q"]) is None


# -- the boost -------------------------------------------------------------------------------


def test_boost_is_above_every_fused_score_rrf_can_give() -> None:
    fusion = ReciprocalRankFusion()
    ceiling = score_ceiling(fusion, DEFAULT_WEIGHTS)
    assert ceiling == pytest.approx(sum(DEFAULT_WEIGHTS.values()) / (RRF_K + 1))
    boost = exact_boost(fusion, DEFAULT_WEIGHTS, [])
    assert boost == pytest.approx(BOOST_FACTOR * ceiling)
    # Every combination of ranks 1..5 on every leg, with a leg missing or not.
    options = [None, 1, 2, 3, 5]
    for ranks in itertools.product(options, repeat=len(Leg)):
        legs = {leg: {"x": r} for leg, r in zip(Leg, ranks, strict=True) if r is not None}
        fused = sum(fusion.contributions(legs, DEFAULT_WEIGHTS).get("x", {}).values())
        assert fused < boost


def test_boost_when_nothing_can_score() -> None:
    zero = dict.fromkeys(Leg, 0.0)
    assert exact_boost(ReciprocalRankFusion(), zero, [0.0, 0.0]) == 1.0


# -- rank(): perfect matches first, by fused score among themselves ---------------------------


def _rank(query: str, names: dict[str, str], semantic: dict[str, str], lexical: dict[str, str]):
    """Rank candidates: semantic and lexical give (text) in order, best first."""
    plan = make_plan(
        SearchRequest(query=query, limit=10, decay=False),
        SearchDefaults(),
        vector=("v",),
        text=("t",),
        graph=(),
        system_of_record="s",
        auto=choose(None),
    )
    states = {eid: stored_document(eid, name) for eid, name in names.items()}
    semantic_raw = {eid: (1.0 - i / 100, text) for i, (eid, text) in enumerate(semantic.items())}
    lexical_raw = {eid: (10.0 - i, text) for i, (eid, text) in enumerate(lexical.items())}
    candidates = sorted(names)
    evidence = rank(
        plan, ReciprocalRankFusion(), candidates, states, semantic_raw, lexical_raw, [], {}
    )
    return plan, evidence, candidates, states


def _fused(evidence: Evidence, eid: str) -> float:
    return sum(evidence.contributions.get(eid, {}).values())


def test_a_perfect_match_ranks_before_every_better_fused_score() -> None:
    names = {"a": "Alpha", "b": "Beta", "c": "Gamma", "m": "Marker note"}
    semantic = {"a": "alpha text", "b": "beta text", "c": "gamma text"}
    lexical = {"b": "beta text", "m": "holds zx0000q here", "a": "alpha text"}
    _, evidence, candidates, _ = _rank("zx0000q", names, semantic, lexical)
    # Without the boost the marker note would be last but one: it is only second on one leg.
    by_fused = sorted(candidates, key=lambda e: (-_fused(evidence, e), e))
    assert by_fused.index("m") > 0
    assert evidence.best(10)[0] == "m"
    assert evidence.matches == {"m": ExactMatch(kind=MatchKind.IDENTIFIER, term="zx0000q")}
    assert evidence.scores["m"] == pytest.approx(_fused(evidence, "m") + evidence.boost)
    # The others keep their fused scores and their order.
    others = [e for e in evidence.best(10) if e != "m"]
    assert others == [e for e in by_fused if e != "m"]
    assert all(evidence.scores[e] == _fused(evidence, e) for e in others)


def test_perfect_matches_rank_among_themselves_by_fused_score() -> None:
    names = {"a": "Alpha", "b": "Beta", "c": "Gamma", "d": "Delta", "e": "Ticket PAY-1234"}
    semantic = {"a": "alpha", "b": "beta PAY-1234", "c": "gamma", "d": "delta PAY-1234"}
    lexical = {"d": "delta PAY-1234", "b": "beta PAY-1234", "a": "alpha"}
    _, evidence, _candidates, _ = _rank("pay-1234", names, semantic, lexical)
    ordered = evidence.best(10)
    perfect = ["b", "d", "e"]
    assert set(evidence.matches) == set(perfect)
    assert evidence.matches["e"].kind is MatchKind.IDENTIFIER  # the name holds the token
    assert ordered[:3] == sorted(perfect, key=lambda e: (-_fused(evidence, e), e))
    assert ordered[3:] == sorted(["a", "c"], key=lambda e: (-_fused(evidence, e), e))
    scores = [evidence.scores[e] for e in ordered]
    assert scores == sorted(scores, reverse=True)


def test_the_name_match_ranks_first_and_the_result_says_so() -> None:
    names = {"a": "Release checklist for mobile", "b": "Release  CHECKLIST", "c": "Other"}
    semantic = {"a": "release checklist release checklist", "c": "x", "b": "unrelated"}
    lexical = {"a": "release checklist release checklist"}
    plan, evidence, _candidates, states = _rank("release checklist", names, semantic, lexical)
    assert _fused(evidence, "a") > _fused(evidence, "b")
    ordered = evidence.best(10)
    assert ordered[0] == "b"
    result = evidence.result(states["b"], [])
    assert result.exact == ExactMatch(kind=MatchKind.NAME, term="release checklist")
    assert result.boost == evidence.boost > 0
    assert result.score == evidence.scores["b"]
    other = evidence.result(states["a"], [])
    assert (other.exact, other.boost) == (None, 0.0)

    # explain(): the kind of match, the term, the boost; and it survives the wire.
    response = SearchResponse(plan=plan, ranked=[evidence.result(states[e], []) for e in ordered])
    explained = response.explain()
    first, second = explained.results[0], explained.results[1]
    assert first.match_kind is MatchKind.NAME
    assert first.exact == ExactMatch(kind=MatchKind.NAME, term="release checklist")
    assert first.fused == pytest.approx(_fused(evidence, "b"))
    assert (second.match_kind, second.boost, second.fused) == (None, 0.0, second.score)
    data = explained.to_dict()
    assert data["results"][0]["exact"] == {"kind": "name", "term": "release checklist"}
    assert data["results"][0]["boost"] == first.boost
    assert data["results"][1]["exact"] is None
    again = Explanation.from_dict(json.loads(json.dumps(data)))
    assert again.results == explained.results
    lines = str(explained).splitlines()
    row = next(line for line in lines if line.lstrip().startswith("1 "))
    assert " name " in row
    assert "Release  CHECKLIST" in row
    # An explanation from before exact matches reads as having none.
    for r in data["results"]:
        del r["exact"], r["boost"]
    old = Explanation.from_dict(data)
    assert all(r.exact is None and r.boost == 0.0 for r in old.results)


def test_without_a_perfect_match_nothing_changes() -> None:
    names = {"a": "Alpha", "b": "Beta", "c": "Gamma"}
    semantic = {"a": "alpha", "b": "beta", "c": "gamma"}
    lexical = {"c": "gamma", "a": "alpha"}
    _, evidence, candidates, _ = _rank("greek letters", names, semantic, lexical)
    assert evidence.matches == {}
    assert evidence.boost == 0.0
    assert evidence.scores == {e: _fused(evidence, e) for e in candidates}
