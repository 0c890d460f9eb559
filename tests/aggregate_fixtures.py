"""The corpus of the aggregate tests, its brute-force reference, and stores holding it.

Shared by the test modules of `client.aggregate` (tests/test_aggregates*.py). Every expected
answer is computed from the corpus itself — who may see what (the rule restated in
test_paging.visible), which neighbours an element has, which period a moment falls in — never
from the engine. `both` holds both ways of counting to it: the one statement in the system of
record and the Python reference (`pushdown=False`).

`servers`, `profiles` and `store` are module-scoped fixtures: a test module imports all three
(`profiles` asks for `servers` by name) and lists them in its `__all__`.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from enum import Enum
from typing import Any

import pytest
from test_paging import visible

import uda
from ontology import Decision, Document, Element, Evidence, Relation, Repository, Sensitivity
from uda.config import Profile, embedded_profile
from uda.embedding import Embedder
from uda.query.aggregates import AggregateResponse, aggregate_request

LEVELS = ["public", "internal", "confidential", "restricted"]
CLEARANCES: list[list[str]] = [
    ["public"],
    ["internal"],
    ["confidential", "project:alpha"],
    ["restricted", "project:*"],
]
START = datetime(2024, 11, 28, 23, 30, tzinfo=UTC)
ProfileFactory = Callable[[str], Profile]


# -- the corpus ---------------------------------------------------------------------------
def corpus() -> tuple[list[Element], list[Relation]]:
    """Three repositories (one confidential, one in a project), 30 documents, 8 decisions
    governing some of them, 6 pieces of evidence with confidences; times across a year's
    end, midnights and the epoch."""
    repos = [
        Repository(element_id="repo:pay", name="payments", sensitivity="public"),
        Repository(element_id="repo:ops", name="operations", sensitivity="confidential"),
        Repository(
            element_id="repo:alpha",
            name="alpha tools",
            sensitivity="internal",
            scope="project:alpha",
        ),
    ]
    elements: list[Element] = [*repos]
    relations: list[Relation] = []
    statuses = ["accepted", "proposed", "superseded", None]
    for n in range(8):
        elements.append(
            Decision(
                element_id=f"adr:{n}",
                name=f"Decision {n % 5}",  # names repeat: one group for two decisions
                text=f"We decided point {n} about payments.",
                sensitivity=LEVELS[(n + 1) % 4],
                status=statuses[n % 4],
                decided_on=None if n % 3 == 2 else date(2024, 1 + n, 3 * n + 1),
                timestamp=START + timedelta(days=40 * n),
            )
        )
    for n in range(30):
        moment = START + timedelta(days=11 * n, hours=n)
        if n == 29:
            moment = datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)  # before the epoch
        elements.append(
            Document(
                element_id=f"doc:{n:02d}",
                name=f"Note {n % 7}",
                text=f"Payments note {n}: retries, ledgers and deploys.",
                sensitivity=LEVELS[n % 4],
                scope=[None, None, "project:alpha", "project:beta"][(n // 4) % 4],
                timestamp=moment,
            )
        )
        if n % 6 != 5:
            relations.append(_rel(f"doc:{n:02d}", "partOf", repos[n % 3].element_id))
        if n % 5 == 0 and n % 3 != 0:
            relations.append(_rel(f"doc:{n:02d}", "partOf", "repo:pay"))  # two repositories
        if n % 3 == 0:
            relations.append(_rel(f"doc:{n:02d}", "governedBy", f"adr:{(n // 3) % 8}"))
        if n % 9 == 0:  # a second decision; for doc:00 one of the same name ("Decision 0")
            relations.append(_rel(f"doc:{n:02d}", "governedBy", "adr:5"))
    for n, confidence in enumerate([0.1, 0.2, 0.3, None, 0.7, 1.0]):
        elements.append(
            Evidence(
                element_id=f"ev:{n}",
                name=f"Evidence {n}",
                text=f"Evidence {n} that payments are retried.",
                sensitivity=LEVELS[n % 3],
                confidence=confidence,
                timestamp=START - timedelta(days=50 * n, minutes=n),
            )
        )
    return elements, relations


def _rel(source: str, relation: str, target: str) -> Relation:
    return Relation(source_id=source, relation=relation, target_id=target)


ELEMENTS, RELATIONS = corpus()
DELETED = "doc:07"
RECLASSIFIED = "doc:04"  # public, then restricted: its history must not count either


def current() -> list[Element]:
    """The corpus after the fixture's delete and reclassification."""
    out: list[Element] = []
    for element in ELEMENTS:
        if element.element_id == DELETED:
            continue
        if element.element_id == RECLASSIFIED:
            element = element.model_copy(update={"sensitivity": Sensitivity.RESTRICTED})
        out.append(element)
    return out


CURRENT = {e.element_id: e for e in current()}


# -- the reference --------------------------------------------------------------------------
def neighbours(element_id: str, path: str, clearance: list[str]) -> set[Any]:
    """Distinct present values of the path's field among visible neighbours."""
    relation, _, field = path.removeprefix("~").partition(".")
    incoming = path.startswith("~")
    found: set[Any] = set()
    for r in RELATIONS:
        if r.relation != relation:
            continue
        if (r.target_id if incoming else r.source_id) != element_id:
            continue
        other = CURRENT.get(r.source_id if incoming else r.target_id)
        if other is not None and visible(other, clearance):
            value = shown(other, field)
            if value is not None:
                found.add(value)
    return found


def shown(element: Element, field: str) -> Any:
    """A field's value as an aggregate row shows it."""
    if field == "element_type":
        return type(element).__name__
    value = getattr(element, field, None)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat(timespec="milliseconds")
    if isinstance(value, date):
        return value.isoformat()
    return value


def period(moment: date, unit: str) -> str:
    match unit:
        case "day":
            start = moment
        case "week":
            start = moment - timedelta(days=moment.weekday())
        case "month":
            start = moment.replace(day=1)
        case "quarter":
            start = moment.replace(month=(moment.month - 1) // 3 * 3 + 1, day=1)
        case _:
            start = moment.replace(month=1, day=1)
    return start.isoformat()


def matches(
    clearance: list[str], keep: Callable[[Element], bool] = lambda _: True
) -> list[Element]:
    return [
        e for e in CURRENT.values() if type(e).knowledge_asset and visible(e, clearance) and keep(e)
    ]


def expected_groups(
    clearance: list[str],
    group_by: list[str],
    keep: Callable[[Element], bool] = lambda _: True,
    unit: str | None = None,
    when: Callable[[Element], date | None] = lambda e: e.timestamp.date(),
) -> dict[tuple[Any, ...], list[Element]]:
    """(key values..., bucket) -> the matches in that group, brute force."""
    groups: dict[tuple[Any, ...], list[Element]] = defaultdict(list)
    for element in matches(clearance, keep):
        options: list[list[Any]] = []
        for path in group_by:
            if "." in path:
                options.append(sorted(neighbours(element.element_id, path, clearance)) or [None])
            else:
                options.append([shown(element, path)])
        bucket: tuple[Any, ...] = ()
        if unit is not None:
            moment = when(element)
            bucket = (None if moment is None else period(moment, unit),)
        combos: list[tuple[Any, ...]] = [()]
        for values in options:
            combos = [(*c, v) for c in combos for v in values]
        for combo in combos:
            groups[(*combo, *bucket)].append(element)
    return groups


def got_counts(response: AggregateResponse, group_by: list[str]) -> dict[tuple[Any, ...], int]:
    names = [*group_by, *(["bucket"] if any(c.name == "bucket" for c in response.columns) else [])]
    return {tuple(row[n] for n in names): row["count"] for row in response.rows}


# -- fixtures -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    pytest.importorskip("psycopg")
    pytest.importorskip("arcadedb_embedded")
    from arcadedb_fixtures import running_arcadedb
    from postgres_fixtures import running_postgres

    root = tmp_path_factory.mktemp("servers")
    with running_postgres(root / "pg") as (_, url), running_arcadedb(root / "arc") as (_, info):
        yield url, info


@pytest.fixture(scope="module", params=["embedded", "server"])
def profiles(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> ProfileFactory:
    """Fresh, empty stores of the parametrised profile, one per name."""
    root = tmp_path_factory.mktemp(f"aggregates-{request.param}")
    if request.param == "embedded":
        return lambda name: embedded_profile(root / name)
    url, arcade = request.getfixturevalue("servers")

    def server(name: str) -> Profile:
        from arcadedb_fixtures import server_profile

        unique = f"{name}_{uuid.uuid4().hex[:10]}"
        return server_profile(
            root / name, url, arcade, schema=f"s_{unique}", database=f"d_{unique}", exact=True
        )

    return server


@pytest.fixture(scope="module")
def store(profiles: ProfileFactory, embedder: Embedder) -> Iterator[uda.Client]:
    with uda.Client(profiles("main"), embedder=embedder) as client:
        client.ingest(ELEMENTS, RELATIONS)
        client.delete([DELETED])
        client.ingest([CURRENT[RECLASSIFIED]])
        yield client


def both(client: uda.Client, clearance: list[str], **fields: Any) -> AggregateResponse:
    """The answer both ways; they must be identical. Returns the default (fast) one."""
    request = aggregate_request(None, clearance, fields.pop("context_filters", None), **fields)
    fast = client.run_aggregate(request)
    reference = client.run_aggregate(request, pushdown=False)
    assert reference.path == "python"
    assert fast.rows == reference.rows, (clearance, fields)
    assert fast.columns == reference.columns
    assert fast.matched == reference.matched
    return fast
