"""Exact matches first, end to end on the embedded profile (Chroma, networkx, SQLite).

A perfect match (the query is the element's name, or a quoted phrase or an identifier of the
query occurs verbatim in it) ranks before every other result, and `explain()` names the kind
of match. The rules themselves are unit-tested in tests/test_exact.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import uda
from ontology import Document, Relation, Repository, Sensitivity
from uda.query.exact import MatchKind
from uda.query.results import SearchResponse

EVERYONE = ["restricted", "project:*"]
NOTES = 300
TOPICS = ("payments", "deployments", "billing", "search", "onboarding", "storage")


def _marker(i: int) -> str:
    return f"zx{i:04d}q"


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    """A folder of many short notes, alike but for a topic word and a unique marker word."""
    root = tmp_path / "notes"
    (root / "notes").mkdir(parents=True)
    for i in range(NOTES):
        topic = TOPICS[i % len(TOPICS)]
        (root / "notes" / f"{i:04d}.md").write_text(
            f"# Standup {i}\n\nWe went through the {topic} backlog, the on-call rota and the "
            f"next release. Follow-ups are tracked under {_marker(i)}.\n"
        )
    return root


def _fused_best_elsewhere(res: SearchResponse, element_id: str) -> bool:
    """Whether another result has a higher fused score than `element_id` (boost aside)."""
    explained = {r.element_id: r for r in res.explain().results}
    mine = explained[element_id].fused
    return any(r.fused > mine for eid, r in explained.items() if eid != element_id)


def test_each_marker_word_finds_its_note_first(client: uda.Client, notes: Path) -> None:
    report = client.ingest_source(notes)
    assert report.loaded == NOTES + 1  # the notes and their repository
    prefix = report.id_prefix
    needed = 0
    for i in range(0, NOTES, 7):
        note_id = f"{prefix}notes/{i:04d}.md"
        res = client.search(_marker(i), limit=5, clearance_scope=EVERYONE)
        ids = [r.element_id for r in res.results]
        assert ids[0] == note_id, (_marker(i), ids)
        first = res.explain().results[0]
        assert first.match_kind is MatchKind.IDENTIFIER
        assert first.exact is not None
        assert first.exact.term == _marker(i)
        # No other result holds the marker: none is a perfect match.
        assert all(r.exact is None for r in res.explain().results[1:])
        needed += _fused_best_elsewhere(res, note_id)
    # The boost is what puts the note first: without it, some other note would have been.
    assert needed > 0


def test_identifier_case_and_punctuation_in_the_query(client: uda.Client, notes: Path) -> None:
    report = client.ingest_source(notes)
    res = client.search(f"where is ({_marker(42).upper()})?", limit=5, clearance_scope=EVERYONE)
    assert res.results[0].element_id == f"{report.id_prefix}notes/0042.md"
    assert res.explain().results[0].match_kind is MatchKind.IDENTIFIER


RELEASE = [
    Document(
        element_id="doc:checklist",
        name="Release checklist",
        text="Tag the build, publish the artefacts, announce it in the channel.",
        sensitivity=Sensitivity.PUBLIC,
    ),
    *(
        Document(
            element_id=f"doc:release-{i}",
            name=f"Release checklist review {i}",
            text="The release checklist: the release checklist items, release checklist "
            f"owners and the release checklist sign-off for release {i}.",
            sensitivity=Sensitivity.PUBLIC,
        )
        for i in range(5)
    ),
]


def test_the_element_named_by_the_query_ranks_first(client: uda.Client) -> None:
    client.ingest(RELEASE)
    res = client.search("  RELEASE   checklist ", limit=5, clearance_scope=EVERYONE)
    ids = [r.element_id for r in res.results]
    assert ids[0] == "doc:checklist", ids
    explained = res.explain()
    first = explained.results[0]
    assert first.match_kind is MatchKind.NAME
    assert first.boost > 0
    assert first.score == pytest.approx(first.fused + first.boost)
    assert all(r.exact is None for r in explained.results[1:])
    # It did not have the best fused score: the match is what put it first.
    assert _fused_best_elsewhere(res, "doc:checklist")
    assert " name " in str(explained)
    # Scores still go down the list, and the Arrow table carries the boosted one.
    scores = [r.score for r in res.results]
    assert scores == sorted(scores, reverse=True)
    assert res.to_arrow().column("score").to_pylist()[0] == first.score


def test_a_quoted_phrase_ranks_the_elements_holding_it_first(client: uda.Client) -> None:
    phrase_doc = Document(
        element_id="doc:phrase",
        name="Retry notes",
        text="Retries back off exponentially; a circuit breaker stops the calls.",
        sensitivity=Sensitivity.PUBLIC,
    )
    client.ingest([*RELEASE, phrase_doc])
    # Words weigh little here, so fusion alone would not put the phrase's holder first (with
    # equal weights its rare words alone now do: the legs meet by score, ADR 37).
    res = client.search(
        'release checklist "circuit breaker"',
        limit=5,
        clearance_scope=EVERYONE,
        weights={"semantic": 1.0, "lexical": 0.3},
    )
    first = res.explain().results[0]
    assert first.element_id == "doc:phrase"
    assert first.match_kind is MatchKind.PHRASE
    assert first.exact is not None
    assert first.exact.term == "circuit breaker"
    assert _fused_best_elsewhere(res, "doc:phrase")


def _public_notes() -> tuple[list[Document | Repository], list[Relation]]:
    repo = Repository(element_id="repo:ops", name="ops", sensitivity=Sensitivity.PUBLIC)
    docs = [
        Document(
            element_id=f"doc:note-{i}",
            name=f"Ops note {i}",
            text=f"Notes on the {TOPICS[i % len(TOPICS)]} incident review and its follow-ups.",
            sensitivity=Sensitivity.PUBLIC,
        )
        for i in range(20)
    ]
    relations = [
        Relation(source_id=d.element_id, relation="partOf", target_id="repo:ops") for d in docs
    ]
    return [repo, *docs], relations


def test_a_perfect_match_the_caller_may_not_see_is_never_shown_and_changes_nothing(
    client: uda.Client,
) -> None:
    elements, relations = _public_notes()
    client.ingest(elements, relations)
    query = "follow-ups of zx9999q"

    def observe() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
        res = client.search(query, limit=10, clearance_scope=["public"], decay=False)
        return res.to_arrow().to_pylist(), res.explain().to_dict()["results"]

    before = observe()
    secret = Document(
        element_id="doc:secret",
        name="Secret note",
        text="The zx9999q incident: follow-ups of the secret review.",
        sensitivity=Sensitivity.CONFIDENTIAL,
    )
    client.ingest(
        [secret], [Relation(source_id="doc:secret", relation="partOf", target_id="repo:ops")]
    )
    after = observe()
    assert "doc:secret" not in {r["element_id"] for r in after[0]}
    assert all(r["exact"] is None for r in after[1])
    assert after == before

    # It is a perfect match, for a caller who may see it.
    res = client.search(query, limit=10, clearance_scope=["confidential"], decay=False)
    first = res.explain().results[0]
    assert (first.element_id, first.match_kind) == ("doc:secret", MatchKind.IDENTIFIER)
