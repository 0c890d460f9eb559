"""Structured retrieval (`search(query=None, order_by=...)`) and cursors, embedded and server.

The reference answers are computed here from the corpus itself (who may see what, which
values it has), never from the planner: a structured answer must be every visible match in
exactly the documented order, pages must be disjoint and add up to one deep answer, and a
cursor must be refused whenever it would not be the same question asked by the same caller.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import uda
from ontology import Decision, Document, Element, Relation, Repository
from uda.config import Profile, embedded_profile
from uda.embedding import Embedder
from uda.errors import InvalidRequestError
from uda.services.base import ServiceInfo

ProfileFactory = Callable[[str], Profile]
START = datetime(2025, 1, 1, tzinfo=UTC)
RANKS = {"public": 0, "internal": 1, "confidential": 2, "restricted": 3}
LEVELS = list(RANKS)
STATUSES = ["accepted", "proposed", "superseded", None]
CLEARANCES: list[list[str]] = [
    ["public"],
    ["internal"],
    ["confidential", "project:alpha"],
    ["restricted", "project:*"],
]


def corpus() -> tuple[list[Element], list[Relation]]:
    """Two repositories; 36 documents and 12 decisions of every level, some in projects."""
    repos = [
        Repository(element_id="repo:pay", name="payments", sensitivity="public"),
        Repository(element_id="repo:ops", name="operations", sensitivity="confidential"),
    ]
    elements: list[Element] = [*repos]
    relations: list[Relation] = []
    for n in range(36):
        scope = [None, None, "project:alpha", "project:beta"][n % 4]
        doc = Document(
            element_id=f"doc:{n:02d}",
            # Some names repeat, so that ties fall back to element_id.
            name=f"Note {n % 9} on payments and operations",
            text=f"Payments and operations note number {n}: retries, ledgers and deploys.",
            sensitivity=LEVELS[n % 4],
            scope=scope,
            timestamp=START + timedelta(days=(n * 7) % 30),
        )
        elements.append(doc)
        repo = repos[n % 2]
        relations.append(
            Relation(source_id=doc.element_id, relation="partOf", target_id=repo.element_id)
        )
    for n in range(12):
        status = STATUSES[n % 4]
        elements.append(
            Decision(
                element_id=f"adr:{n:02d}",
                name=f"Decision {n} on payments",
                text=f"We decided point {n} about payments and operations.",
                sensitivity=LEVELS[(n + 1) % 4],
                status=None if status is None else status,
                timestamp=START + timedelta(days=n),
            )
        )
    return elements, relations


ELEMENTS, RELATIONS = corpus()
ASSETS = [e for e in ELEMENTS if type(e).knowledge_asset]


def visible(element: Element, clearance: list[str]) -> bool:
    """The clearance rule, restated: level at most the caller's, project one of theirs."""
    level = max(RANKS[e] for e in clearance if e in RANKS)
    projects = {e for e in clearance if e.startswith("project:")}
    in_scope = element.scope is None or "project:*" in projects or element.scope in projects
    return RANKS[element.sensitivity.value] <= level and in_scope


def reference(
    clearance: list[str],
    keep: Callable[[Element], bool] = lambda _: True,
    key: Callable[[Element], Any] | None = None,
    descending: bool = False,
) -> list[str]:
    """Every visible asset `keep` accepts, by `key` (missing last), then element id."""
    chosen = [e for e in ASSETS if visible(e, clearance) and keep(e)]
    if key is None:
        return sorted(e.element_id for e in chosen)
    present = [e for e in chosen if key(e) is not None]
    missing = sorted(e.element_id for e in chosen if key(e) is None)
    present.sort(key=lambda e: e.element_id)
    present.sort(key=key, reverse=descending)  # stable: ties stay by element id
    return [e.element_id for e in present] + missing


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
    with uda.Client(make_profile("main"), embedder=embedder) as client:
        client.ingest(ELEMENTS, RELATIONS)
        yield client


def every_page(
    client: Any, limit: int, cursor: str | None = None, **request: Any
) -> list[list[str]]:
    """The element ids of every page from `cursor` (None: the first) to the last."""
    pages: list[list[str]] = []
    while True:
        response = client.search(limit=limit, cursor=cursor, **request)
        pages.append([r.element_id for r in response.results])
        cursor = response.next_cursor
        if cursor is None:
            return pages
        assert len(pages) < 100, "the cursors never end"


ORDERS: list[tuple[str, Callable[[Element], Any], bool]] = [
    ("timestamp", lambda e: e.timestamp, False),
    ("-timestamp", lambda e: e.timestamp, True),
    ("name", lambda e: e.name, False),
    ("-name", lambda e: e.name, True),
    ("status", lambda e: getattr(e, "status", None), False),
    ("-status", lambda e: getattr(e, "status", None), True),
]


@pytest.mark.parametrize(("order_by", "key", "descending"), ORDERS, ids=[o[0] for o in ORDERS])
def test_structured_retrieval_is_every_visible_match_in_order(
    store: uda.Client, order_by: str, key: Callable[[Element], Any], descending: bool
) -> None:
    for clearance in CLEARANCES:
        got = store.search(None, limit=100, order_by=order_by, clearance_scope=clearance)
        assert [r.element_id for r in got.results] == reference(
            clearance, key=key, descending=descending
        ), clearance
        assert got.next_cursor is None


def test_structured_retrieval_with_filters_and_relation_paths(store: uda.Client) -> None:
    clearance = ["restricted", "project:*"]
    since = START + timedelta(days=14)
    got = store.search(
        None,
        limit=100,
        clearance_scope=clearance,
        context_filters={"partOf.name": "payments", "timestamp": {"$gte": since.isoformat()}},
        order_by="-timestamp",
    )
    expected = reference(
        clearance,
        keep=lambda e: (
            e.element_id.startswith("doc:")
            and int(e.element_id[4:]) % 2 == 0
            and e.timestamp >= since
        ),
        key=lambda e: e.timestamp,
        descending=True,
    )
    assert expected, "the case must select something"
    assert [r.element_id for r in got.results] == expected
    # The context nodes come as for a ranked search, and only visible ones.
    assert all(any(n["element_id"] == "repo:pay" for n in r.context_nodes) for r in got.results)
    public = store.search(
        None, limit=100, clearance_scope=["public"], context_filters={"partOf.name": "operations"}
    )
    assert public.results == [], "a hidden repository's name selects nothing"


@pytest.mark.parametrize("limit", [1, 4, 7])
def test_structured_pages_are_disjoint_and_add_up_to_the_whole(
    store: uda.Client, limit: int
) -> None:
    for clearance in CLEARANCES:
        request = {"query": None, "order_by": "-timestamp", "clearance_scope": clearance}
        pages = every_page(store, limit, **request)
        flat = [eid for page in pages for eid in page]
        assert flat == reference(clearance, key=lambda e: e.timestamp, descending=True)
        assert all(len(page) == limit for page in pages[:-1])
        assert len(flat) == len(set(flat))


def test_ranked_pages_are_slices_of_one_deep_search(store: uda.Client) -> None:
    clearance = ["restricted", "project:*"]
    request = {"query": "payment retries", "clearance_scope": clearance, "pool_size": 30}
    pages = every_page(store, 4, **request)
    deep = store.search(limit=100, **request)
    flat = [eid for page in pages for eid in page]
    assert flat == [r.element_id for r in deep.results]
    assert len(flat) == len(set(flat))
    assert len(pages) > 2


def test_an_ingest_between_pages_moves_nothing(store: uda.Client) -> None:
    clearance = ["restricted", "project:*"]
    for request in (
        {"query": None, "order_by": "timestamp", "clearance_scope": clearance},
        {"query": "payment retries", "clearance_scope": clearance, "pool_size": 40},
    ):
        before = every_page(store, 100, **request)[0]
        first = store.search(limit=5, **request)
        assert first.next_cursor is not None
        # New elements that would sort first, and a new version of one already shown.
        store.ingest(
            [
                Document(
                    element_id=f"doc:new-{uuid.uuid4().hex[:6]}",
                    name="Note 0 on payments and operations",
                    text="Payment retries and ledgers, written between two pages.",
                    sensitivity="public",
                    timestamp=START - timedelta(days=1),
                ),
                ASSETS[0].model_copy(update={"name": "Renamed between pages"}),
            ]
        )
        rest = every_page(store, 5, cursor=first.next_cursor, **request)
        pages = [[r.element_id for r in first.results], *rest]
        assert [eid for page in pages for eid in page] == before, request


def test_a_cursor_is_refused_for_another_question(store: uda.Client) -> None:
    clearance = ["restricted", "project:*"]
    request: dict[str, Any] = {
        "query": None,
        "order_by": "name",
        "clearance_scope": clearance,
        "context_filters": {"element_type": "Document"},
    }
    cursor = store.search(limit=3, **request).next_cursor
    assert cursor is not None
    others: list[dict[str, Any]] = [
        {**request, "clearance_scope": ["public"]},
        {**request, "clearance_scope": ["confidential", "project:alpha"]},
        {**request, "context_filters": {"element_type": "Decision"}},
        {**request, "context_filters": {}},
        {**request, "order_by": "-name"},
        {**request, "query": "payments", "order_by": None},
    ]
    for other in others:
        with pytest.raises(InvalidRequestError) as caught:
            store.search(limit=3, cursor=cursor, **other)
        assert caught.value.field == "cursor", other
    # Another limit is the same question.
    assert store.search(limit=5, cursor=cursor, **request).results


def test_a_tampered_cursor_is_refused(store: uda.Client) -> None:
    request: dict[str, Any] = {"query": None, "order_by": "name", "clearance_scope": ["public"]}
    cursor = store.search(limit=2, **request).next_cursor
    assert cursor is not None
    body, _, mac = cursor.partition(".")
    flipped = body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1]
    for bad in (f"{flipped}.{mac}", f"{body}.{mac[::-1]}", body, "not-a-cursor", "e30.e30"):
        with pytest.raises(InvalidRequestError) as caught:
            store.search(limit=2, cursor=bad, **request)
        assert caught.value.field == "cursor"


def test_a_cursor_outlives_the_client_but_not_the_store(
    make_profile: ProfileFactory, embedder: Embedder
) -> None:
    profile = make_profile("kept")
    request: dict[str, Any] = {
        "query": None,
        "order_by": "timestamp",
        "clearance_scope": ["internal"],
    }
    with uda.Client(profile, embedder=embedder) as client:
        client.ingest(ELEMENTS, RELATIONS)
        first = client.search(limit=3, **request)
        expected = every_page(client, 100, **request)[0]
    assert first.next_cursor is not None
    with uda.Client(profile, embedder=embedder) as reopened:
        rest = every_page(reopened, 3, cursor=first.next_cursor, **request)
    assert [r.element_id for r in first.results] + [e for p in rest for e in p] == expected
    with uda.Client(make_profile("other"), embedder=embedder) as other:
        other.ingest(ELEMENTS, RELATIONS)
        with pytest.raises(InvalidRequestError):
            other.search(limit=3, cursor=first.next_cursor, **request)


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        ({"query": None}, "query"),
        ({"query": "payments", "order_by": "name"}, "order_by"),
        ({"query": None, "order_by": "nmae"}, "order_by"),
        ({"query": None, "order_by": "extras"}, "order_by"),
        ({"query": None, "order_by": ""}, "order_by"),
    ],
)
def test_bad_structured_requests_name_the_field(
    client: uda.Client, request_fields: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        client.search(**request_fields)
    assert caught.value.field == field
