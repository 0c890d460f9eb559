"""Clearance end to end, by hand-written cases on the embedded profile.

A restricted decision governing a public document (and, through it, its author) stays hidden
from every lower caller, in results, context, Arrow, typed elements and `explain()`, and is
seen whole by a restricted one; an unknown clearance entry is refused; a flood of hidden
matches does not starve the candidate pool. The generated properties are in
test_clearance_properties.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from clearance_fixtures import TIMESTAMP

import uda
from ontology import Decision, Document, Person, Repository

# -- the explicit case: a restricted decision governing a public document ---------------------

DOC = Document(
    element_id="doc-release",
    name="Release checklist",
    text="How to cut a release: tag the commit, build the wheel, publish it to the index.",
    sensitivity="public",
    timestamp=TIMESTAMP,
)
REPO = Repository(
    element_id="repo-tools", name="release tooling", sensitivity="public", timestamp=TIMESTAMP
)
DECISION = Decision(
    element_id="adr-quorum-lease",
    name="Adopt Zanzibar quorum leases",
    text="We release only after a quorum lease is granted; publishing without it is forbidden.",
    sensitivity="restricted",
    timestamp=TIMESTAMP,
)
AUTHOR = Person(element_id="person-xq", name="Xanthippe Quill", sensitivity="public")
SECRET_MARKS = ("adr-quorum-lease", "Zanzibar", "person-xq", "Xanthippe")


@pytest.fixture
def governed(client: uda.Client) -> uda.Client:
    client.ingest(
        [DOC, REPO, DECISION, AUTHOR],
        [
            ("doc-release", "partOf", "repo-tools"),
            ("doc-release", "governedBy", "adr-quorum-lease"),
            # Reachable only through the restricted decision.
            ("adr-quorum-lease", "authoredBy", "person-xq"),
        ],
    )
    return client


@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("scope", [[], ["public"], ["confidential", "project:*"]])
def test_restricted_decision_stays_hidden_from_lower_callers(
    governed: uda.Client, depth: int, scope: list[str]
) -> None:
    res = governed.search("how do we publish a release", clearance_scope=scope, expand_depth=depth)
    assert [r.element_id for r in res.results] == ["doc-release"]
    ctx = res.results[0].context_nodes
    assert [(n["element_id"], n["relation"], n["direction"], n["depth"]) for n in ctx] == [
        ("repo-tools", "partOf", "out", 1)
    ]

    table = res.to_arrow()
    assert table.column("element_id").to_pylist() == ["doc-release"]
    assert table.column("centrality").to_pylist() == [1.0]  # the repository edge only
    arrow_ctx = table.column("context_nodes").to_pylist()
    assert [[n["element_id"] for n in nodes] for nodes in arrow_ctx] == [["repo-tools"]]

    [doc] = res.to_elements()
    assert doc.decisions == []
    assert doc.related("governedBy") == []
    assert doc.repository is not None
    assert doc.repository.name == "release tooling"
    assert [link.element.element_id for link in doc.context] == ["repo-tools"]

    text = str(res.explain())
    rows = table.to_pylist()
    for mark in SECRET_MARKS:
        assert mark not in text, f"{mark!r} leaks through explain()"
        assert mark not in repr(rows), f"{mark!r} leaks through to_arrow()"
        assert mark not in repr(res.results), f"{mark!r} leaks through results"


@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("scope", [["restricted"], ["internal", "restricted"]])
def test_restricted_caller_sees_document_and_decision(
    governed: uda.Client, depth: int, scope: list[str]
) -> None:
    res = governed.search("how do we publish a release", clearance_scope=scope, expand_depth=depth)
    by_id = {r.element_id: r for r in res.results}
    assert set(by_id) == {"doc-release", "adr-quorum-lease"}

    doc_ctx = {
        n["element_id"]: (n["relation"], n["direction"], n["depth"], n["via"])
        for n in by_id["doc-release"].context_nodes
    }
    expected = {
        "repo-tools": ("partOf", "out", 1, "doc-release"),
        "adr-quorum-lease": ("governedBy", "out", 1, "doc-release"),
    }
    if depth == 2:
        expected["person-xq"] = ("authoredBy", "out", 2, "adr-quorum-lease")
    assert doc_ctx == expected

    decision_ctx = {n["element_id"] for n in by_id["adr-quorum-lease"].context_nodes}
    assert decision_ctx == (
        {"doc-release", "person-xq"} | ({"repo-tools"} if depth == 2 else set())
    )

    table = res.to_arrow()
    centrality = dict(
        zip(
            table.column("element_id").to_pylist(),
            table.column("centrality").to_pylist(),
            strict=True,
        )
    )
    assert centrality == {"doc-release": 2.0, "adr-quorum-lease": 2.0}

    docs = {e.element_id: e for e in res.to_elements()}
    doc = docs["doc-release"]
    assert isinstance(doc, Document)
    assert [d.element_id for d in doc.decisions] == ["adr-quorum-lease"]
    assert doc.decisions[0].sensitivity.value == "restricted"
    assert "adr-quorum-lease" in str(res.explain())


def test_unknown_clearance_entry_is_rejected_by_search(governed: uda.Client) -> None:
    with pytest.raises(uda.UnknownClearanceError) as info:
        governed.search("release", clearance_scope=["public", "top-secret"])
    assert info.value.field == "clearance_scope"
    assert info.value.value == "top-secret"


def test_a_flood_of_hidden_matches_does_not_starve_the_pool(client: uda.Client) -> None:
    # More hidden chunks than the candidate pool (max(10 * limit, 50) = 50), each a better
    # match than the visible document, all linked to it: a post-filter would return nothing.
    query = "quarterly security audit of the storage cluster"
    visible = Document(
        element_id="doc-visible",
        name="storage notes",
        text="Notes on the storage cluster and its audit trail.",
        sensitivity="public",
        timestamp=TIMESTAMP,
    )
    client.ingest([visible])

    def observe() -> list[dict[str, Any]]:
        res = client.search(query, limit=1, clearance_scope=["internal"], expand_depth=2)
        return res.to_arrow().to_pylist()

    before = observe()
    assert [row["element_id"] for row in before] == ["doc-visible"]

    flood = [
        Document(
            element_id=f"hidden-{i:03d}",
            name="quarterly security audit",
            text=f"{query}, part {i}.",
            sensitivity="confidential" if i % 2 else "internal",
            scope=None if i % 2 else "project:vault",
            timestamp=TIMESTAMP,
        )
        for i in range(120)
    ]
    relations = [(d.element_id, "relatedTo", "doc-visible") for d in flood]
    report = client.ingest(flood, relations)
    assert report.written == 120
    assert report.edges == 120

    after = observe()
    assert after == before
    # The flood is there for a caller who may see it, and outranks the visible document.
    everyone = client.search(query, limit=5, clearance_scope=["confidential", "project:*"])
    assert len(everyone) == 5
    assert "doc-visible" not in [r.element_id for r in everyone.results]
