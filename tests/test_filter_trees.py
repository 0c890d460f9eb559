"""Filter trees in `search()` on real stores, embedded and server: every operator, tree shapes,
relation paths in both directions, and non-interference of hidden neighbours.

The reference for each answer is computed here from the corpus itself (which elements the
caller may see, and which of those match), not from the planner.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import uda
from ontology import Decision, Document, Element, Person, Relation, Repository
from uda.config import Profile, embedded_profile
from uda.embedding import Embedder
from uda.errors import MissingCapabilityError, UnknownFilterFieldError
from uda.services.base import ServiceInfo

QUERY = "how do payments and deployments work?"
EVERYONE = ["restricted", "project:*"]

ProfileFactory = Callable[[str], Profile]


def corpus(*, with_secret: bool = True) -> tuple[list[Element], list[Relation]]:
    """Three repositories (one confidential), decisions, authors and documents linking them."""
    repos = [
        Repository(element_id="repo:payments", name="payments", sensitivity="public"),
        Repository(element_id="repo:platform", name="platform", sensitivity="public"),
    ]
    if with_secret:
        repos.append(
            Repository(element_id="repo:secret", name="secret", sensitivity="confidential")
        )
    people = [
        Person(element_id="person:ada", name="Ada Lovelace", sensitivity="public"),
        Person(element_id="person:grace", name="Grace Hopper", sensitivity="public"),
    ]
    decisions = [
        Decision(
            element_id="adr:1",
            name="Retry payments with idempotency keys",
            text="Payments are retried with an idempotency key per attempt.",
            status="accepted",
            sensitivity="public",
            timestamp="2025-03-10T00:00:00Z",
        ),
        Decision(
            element_id="adr:2",
            name="Deploy on Tuesdays",
            text="Deployments happen on Tuesdays, never on Fridays.",
            status="superseded",
            sensitivity="public",
            timestamp="2024-11-02T00:00:00Z",
        ),
    ]
    docs = [
        Document(
            element_id="doc:retries",
            name="Retry policy",
            text="Payment calls are retried three times with exponential backoff.",
            sensitivity="public",
            timestamp="2025-04-01T00:00:00Z",
        ),
        Document(
            element_id="doc:deploys",
            name="Deploy guide",
            text="How deployments of the platform work, step by step.",
            sensitivity="public",
            timestamp="2025-01-15T00:00:00Z",
        ),
        Document(
            element_id="doc:ledger",
            name="Ledger notes (draft)",
            text="Payments are booked in the ledger when they settle; deployments wait.",
            sensitivity="public",
            timestamp="2025-05-20T00:00:00Z",
        ),
    ]
    relations = [
        Relation(source_id="doc:retries", relation="partOf", target_id="repo:payments"),
        Relation(source_id="doc:retries", relation="governedBy", target_id="adr:1"),
        Relation(source_id="doc:retries", relation="authoredBy", target_id="person:ada"),
        Relation(source_id="doc:deploys", relation="partOf", target_id="repo:platform"),
        Relation(source_id="doc:deploys", relation="governedBy", target_id="adr:2"),
        Relation(source_id="doc:deploys", relation="authoredBy", target_id="person:grace"),
        Relation(source_id="adr:1", relation="partOf", target_id="repo:payments"),
        Relation(source_id="adr:2", relation="partOf", target_id="repo:platform"),
    ]
    if with_secret:
        relations.append(
            Relation(source_id="doc:ledger", relation="partOf", target_id="repo:secret")
        )
    return [*repos, *people, *decisions, *docs], relations


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ServiceInfo]]:
    pytest.importorskip("psycopg")
    pytest.importorskip("arcadedb_embedded")
    from arcadedb_fixtures import running_arcadedb
    from postgres_fixtures import running_postgres

    root = tmp_path_factory.mktemp("servers")
    with running_postgres(root / "pg") as (_, url), running_arcadedb(root / "arc") as (_, info):
        yield url, info


@pytest.fixture(params=["embedded", "server"])
def make_profile(request: pytest.FixtureRequest, tmp_path: Path) -> ProfileFactory:
    """A function giving a fresh, empty store of the parametrised profile per name."""
    if request.param == "embedded":
        return lambda name: embedded_profile(tmp_path / name)
    url, arcade = request.getfixturevalue("servers")

    def server(name: str) -> Profile:
        from arcadedb_fixtures import server_profile

        unique = f"{name}_{uuid.uuid4().hex[:10]}"
        return server_profile(
            tmp_path / name, url, arcade, schema=f"s_{unique}", database=f"d_{unique}", exact=True
        )

    return server


@pytest.fixture
def store(make_profile: ProfileFactory, embedder: Embedder) -> Iterator[uda.Client]:
    elements, relations = corpus()
    with uda.Client(make_profile("main"), embedder=embedder) as client:
        client.ingest(elements, relations)
        yield client


def ids(client: uda.Client, filters: Any, clearance: list[str] | None = None) -> list[str]:
    res = client.search(
        QUERY, limit=20, clearance_scope=clearance or EVERYONE, context_filters=filters
    )
    return sorted(r.element_id for r in res.results)


ALL_ASSETS = ["adr:1", "adr:2", "doc:deploys", "doc:ledger", "doc:retries"]

CASES: list[tuple[str, Any, list[str]]] = [
    ("no filter", {}, ALL_ASSETS),
    ("$eq", {"status": "accepted"}, ["adr:1"]),
    (
        "$ne keeps elements without the field",
        {"status": {"$ne": "accepted"}},
        ["adr:2", "doc:deploys", "doc:ledger", "doc:retries"],
    ),
    ("$in", {"element_id": ["doc:retries", "adr:2"]}, ["adr:2", "doc:retries"]),
    (
        "$nin",
        {"element_type": {"$nin": ["Decision"]}},
        ["doc:deploys", "doc:ledger", "doc:retries"],
    ),
    ("$gt on a datetime", {"timestamp": {"$gt": "2025-04-01T00:00:00Z"}}, ["doc:ledger"]),
    ("$gte", {"timestamp": {"$gte": "2025-04-01T00:00:00Z"}}, ["doc:ledger", "doc:retries"]),
    ("$lt", {"timestamp": {"$lt": "2025-01-15T00:00:00Z"}}, ["adr:2"]),
    ("$lte", {"timestamp": {"$lte": "2025-01-15T00:00:00Z"}}, ["adr:2", "doc:deploys"]),
    (
        "$between is inclusive",
        {"timestamp": {"$between": ["2025-01-15T00:00:00Z", "2025-04-01T00:00:00Z"]}},
        ["adr:1", "doc:deploys", "doc:retries"],
    ),
    ("$like", {"name": {"$like": "%policy"}}, ["doc:retries"]),
    ("$like is case-sensitive", {"name": {"$like": "%POLICY"}}, []),
    ("$ilike", {"name": {"$ilike": "%POLICY"}}, ["doc:retries"]),
    ("$like with _ and an escape", {"name": {"$like": "Ledger notes \\(draft_"}}, ["doc:ledger"]),
    ("$exists true", {"status": {"$exists": True}}, ["adr:1", "adr:2"]),
    ("$exists false", {"status": {"$exists": False}}, ["doc:deploys", "doc:ledger", "doc:retries"]),
    (
        "$or",
        {"$or": [{"status": "superseded"}, {"name": "Retry policy"}]},
        ["adr:2", "doc:retries"],
    ),
    ("$not", {"$not": {"element_type": "Document"}}, ["adr:1", "adr:2"]),
    ("siblings are ANDed", {"element_type": "Decision", "status": "accepted"}, ["adr:1"]),
    (
        "nested",
        {
            "$and": [
                {"$or": [{"element_type": "Document"}, {"status": "accepted"}]},
                {"$not": {"name": {"$like": "Deploy%"}}},
            ]
        },
        ["adr:1", "doc:ledger", "doc:retries"],
    ),
    ("outgoing relation path", {"partOf.name": "payments"}, ["adr:1", "doc:retries"]),
    (
        "relation path with an operator",
        {"governedBy.status": {"$in": ["superseded"]}},
        ["doc:deploys"],
    ),
    (
        "relation path under $not",
        {"$not": {"authoredBy.name": {"$like": "Ada%"}}},
        ["adr:1", "adr:2", "doc:deploys", "doc:ledger"],
    ),
    ("incoming relation path", {"~governedBy.element_id": "doc:retries"}, ["adr:1"]),
    (
        "incoming relation path, any",
        {"~governedBy.element_type": {"$exists": True}},
        ["adr:1", "adr:2"],
    ),
    (
        "seed form",
        {
            "op": "OR",
            "children": [
                {"path": "status", "condition": {"op": "eq", "value": "accepted"}},
                {"path": "partOf.name", "condition": {"op": "like", "value": "PLAT%"}},
            ],
        },
        ["adr:1", "adr:2", "doc:deploys"],
    ),
]


@pytest.mark.parametrize(("case", "filters", "expected"), CASES, ids=[c[0] for c in CASES])
def test_filter_trees_select_exactly_the_matches(
    store: uda.Client, case: str, filters: Any, expected: list[str]
) -> None:
    assert ids(store, filters) == expected, case


def test_a_hidden_neighbour_behaves_as_if_it_did_not_exist(
    make_profile: ProfileFactory, embedder: Embedder
) -> None:
    """`partOf.name == "secret"` must not tell a public caller that a secret repository exists."""
    probes: list[Any] = [
        {"partOf.name": "secret"},
        {"partOf.name": {"$like": "s%"}},
        {"partOf.element_id": {"$exists": True}},
        {"$not": {"partOf.name": "secret"}},
        {"$not": {"partOf.sensitivity": "confidential"}},
        {"$or": [{"partOf.name": "secret"}, {"status": "accepted"}]},
    ]
    answers: dict[str, list[Any]] = {}
    for label, with_secret in (("stored", True), ("absent", False)):
        elements, relations = corpus(with_secret=with_secret)
        with uda.Client(make_profile(label), embedder=embedder) as client:
            client.ingest(elements, relations)
            answers[label] = [
                [
                    (r.element_id, r.score, sorted(n["element_id"] for n in r.context_nodes))
                    for r in client.search(
                        QUERY,
                        limit=20,
                        clearance_scope=["internal"],
                        context_filters=probe,
                        decay=False,
                    ).results
                ]
                for probe in probes
            ]
            # The caller who may see it finds it through the same path.
            assert ids(client, {"partOf.name": "secret"}, ["confidential"]) == (
                ["doc:ledger"] if with_secret else []
            )
    assert answers["stored"] == answers["absent"]
    assert [r[0] for r in answers["stored"][0]] == []  # nothing is part of a visible "secret"


def test_relation_paths_need_a_graph_store(tmp_path: Path, embedder: Embedder) -> None:
    base = embedded_profile(tmp_path / "nograph")
    profile = Profile(
        name="no-graph",
        root=base.root,
        connectors=tuple(c for c in base.connectors if c.name != "networkx"),
    )
    elements, relations = corpus()
    with uda.Client(profile, embedder=embedder) as client:
        client.ingest(elements, relations)
        assert ids(client, {"status": "accepted"}) == ["adr:1"]  # own fields still work
        with pytest.raises(MissingCapabilityError, match="GraphCapable"):
            ids(client, {"partOf.name": "payments"})


def test_bad_trees_name_the_json_path(store: uda.Client) -> None:
    cases: list[tuple[Any, str, str]] = [
        (
            {"$or": [{"status": "accepted"}, {"stauts": "x"}]},
            "context_filters.$or[1].stauts",
            "did you mean 'status'",
        ),
        ({"partOf.nmae": "x"}, "context_filters.partOf.nmae", "did you mean 'name'"),
        ({"partof.name": "x"}, "context_filters.partof.name", "did you mean 'partOf'"),
        ({"$xor": []}, "context_filters.$xor", "unknown logical operator"),
        ({"$or": {"status": "accepted"}}, "context_filters.$or", "non-empty list"),
        ({"$and": [{}]}, "context_filters.$and[0]", "non-empty filter object"),
        ({"timestamp": {"$like": "2025%"}}, "context_filters.timestamp", "compares strings"),
        ({"status": {"$gt": True}}, "context_filters.status", "orders values"),
        ({"status": {"$gte": "accepted"}}, "context_filters.status", "is an enumeration"),
        ({"name": {"$between": ["b", "a"]}}, "context_filters.name", "above the high bound"),
        ({"name": {"$exists": "yes"}}, "context_filters.name", "true or false"),
    ]
    for filters, field, message in cases:
        with pytest.raises(UnknownFilterFieldError) as caught:
            ids(store, filters)
        assert caught.value.field == field, (filters, str(caught.value))
        assert message in str(caught.value), (filters, str(caught.value))


async def test_http_takes_the_same_trees(tmp_path: Path, embedder: Embedder) -> None:
    """`/v1/search` reads trees and relation paths, under the principal's clearance."""
    from http_fixtures import Keys, serve

    elements, relations = corpus()
    keys = Keys()
    async with serve(tmp_path, embedder, keys=keys, elements=elements, relations=relations) as svc:

        async def found(key: str, filters: Any) -> list[str]:
            body = {"query": QUERY, "limit": 20, "context_filters": filters}
            answer = await svc.http.post("/v1/search", json=body, headers={"X-API-Key": key})
            assert answer.status_code == 200, answer.text
            return sorted(r["element_id"] for r in answer.json()["results"])

        tree = {"$or": [{"partOf.name": "secret"}, {"~governedBy.element_id": "doc:retries"}]}
        assert await found(keys.admin, tree) == ["adr:1", "doc:ledger"]
        assert await found(keys.public, tree) == ["adr:1"]  # the secret repository is hidden
        bad = await svc.http.post(
            "/v1/search",
            json={"query": QUERY, "context_filters": {"$or": [{"partOf.nmae": "x"}]}},
            headers={"X-API-Key": keys.public},
        )
        assert bad.status_code == 422
        assert bad.json()["field"] == "context_filters.$or[0].partOf.nmae"
