"""Every bad input is a `UserError` that names the field and the value, and writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import uda
from ontology import Decision, Document, Person, Repository

ALL = ["restricted", "project:*"]


def _seed() -> tuple[list[Any], list[tuple[str, str, str]]]:
    return (
        [
            Repository(element_id="repo:core", name="core"),
            Person(element_id="person:bo", name="Bo"),
            Decision(
                element_id="adr:1",
                name="ADR 1: use SQLite as the system of record",
                text="We record every element state in SQLite first, then fan out.",
            ),
            Document(
                element_id="doc:seed",
                name="Write path",
                text="The write path validates, stamps a hybrid logical clock, then commits.",
            ),
        ],
        [
            ("doc:seed", "partOf", "repo:core"),
            ("doc:seed", "governedBy", "adr:1"),
            ("doc:seed", "authoredBy", "person:bo"),
        ],
    )


@pytest.fixture
def seeded(client: uda.Client) -> uda.Client:
    elements, relations = _seed()
    client.ingest(elements, relations)
    return client


def _check(exc: uda.UserError, field: str, value: Any, *, exact_field: bool = True) -> None:
    """The error names the field and the value, in its message and its attributes."""
    message = str(exc)
    if exact_field:
        assert exc.field == field, (exc.field, message)
    else:
        assert exc.field is not None
        assert exc.field.startswith(field), (exc.field, message)
    assert exc.value == value, (exc.value, message)
    assert type(exc.value) is type(value)
    # The message names the field (its last path component: the filter field, the element
    # field, `relations[3]`...) and shows the value.
    leaf = field.rsplit(".", 1)[-1]
    assert leaf in message, message
    shown = repr(value)
    assert shown[:60] in message or str(value)[:60] in message, message


# -- search requests ---------------------------------------------------------------------------

SEARCH_CASES: list[tuple[str, dict[str, Any], type[uda.UserError], str, Any, bool]] = [
    # id, search kwargs, error class, field, value, field exact?
    ("blank query", {"query": "   "}, uda.InvalidRequestError, "query", "   ", True),
    ("empty query", {"query": ""}, uda.InvalidRequestError, "query", "", True),
    ("long query", {"query": "x" * 4001}, uda.InvalidRequestError, "query", "x" * 4001, True),
    ("limit 0", {"limit": 0}, uda.InvalidRequestError, "limit", 0, True),
    ("limit 101", {"limit": 101}, uda.InvalidRequestError, "limit", 101, True),
    ("limit -1", {"limit": -1}, uda.InvalidRequestError, "limit", -1, True),
    ("limit str", {"limit": "five"}, uda.InvalidRequestError, "limit", "five", True),
    ("limit float", {"limit": 2.5}, uda.InvalidRequestError, "limit", 2.5, True),
    ("limit None", {"limit": None}, uda.InvalidRequestError, "limit", None, True),
    (
        "clearance",
        {"clearance_scope": ["internal", "top-secret"]},
        uda.UnknownClearanceError,
        "clearance_scope",
        "top-secret",
        True,
    ),
    (
        "clearance bad project",
        {"clearance_scope": ["project:"]},
        uda.UnknownClearanceError,
        "clearance_scope",
        "project:",
        True,
    ),
    (
        "filter field",
        {"context_filters": {"sensitivty": "public"}},
        uda.UnknownFilterFieldError,
        "context_filters.sensitivty",
        "sensitivty",
        True,
    ),
    (
        "filter operator",
        {"context_filters": {"status": {"$regex": "acc.*"}}},
        uda.UnknownFilterFieldError,
        "context_filters.status",
        "$regex",
        True,
    ),
    (
        "filter operand date",
        {"context_filters": {"timestamp": {"$gt": "not a date"}}},
        uda.UnknownFilterFieldError,
        "context_filters.timestamp",
        "not a date",
        True,
    ),
    (
        "filter operand day",
        {"context_filters": {"decided_on": {"$gte": "yesterday"}}},
        uda.UnknownFilterFieldError,
        "context_filters.decided_on",
        "yesterday",
        True,
    ),
    (
        "filter operand object",
        {"context_filters": {"name": {"$eq": {"nested": 1}}}},
        uda.UnknownFilterFieldError,
        "context_filters.name",
        {"nested": 1},
        True,
    ),
    (
        "element type unknown",
        {"element_types": ["Document", "Nope"]},
        uda.UnknownElementTypeError,
        "element_types",
        "Nope",
        True,
    ),
    (
        "element type not searchable",
        {"element_types": ["Repository"]},
        uda.UnknownElementTypeError,
        "element_types",
        "Repository",
        True,
    ),
    (
        "relation",
        {"relations": ["partOf", "dependsOn"]},
        uda.UnknownRelationError,
        "relations",
        "dependsOn",
        True,
    ),
    ("expand_depth 3", {"expand_depth": 3}, uda.InvalidRequestError, "expand_depth", 3, True),
    ("expand_depth -1", {"expand_depth": -1}, uda.InvalidRequestError, "expand_depth", -1, True),
    (
        "negative weight",
        {"weights": {"semantic": 1.0, "centrality": -0.5}},
        uda.InvalidRequestError,
        "weights",
        {"semantic": 1.0, "centrality": -0.5},
        True,
    ),
    (
        "as_of before the clock",
        {"as_of": datetime(1969, 1, 1, tzinfo=UTC)},
        uda.InvalidRequestError,
        "as_of",
        datetime(1969, 1, 1, tzinfo=UTC),
        True,
    ),
    ("as_of beyond 64 bits", {"as_of": 2**64}, uda.InvalidRequestError, "as_of", 2**64, True),
    ("as_of negative", {"as_of": -1}, uda.InvalidRequestError, "as_of", -1, True),
    (
        "filter operand beyond 64 bits",
        {"context_filters": {"confidence": {"$gte": 2**70}}},
        uda.UnknownFilterFieldError,
        "context_filters.confidence",
        2**70,
        True,
    ),
    (
        "filter operand not finite",
        {"context_filters": {"confidence": {"$lt": float("inf")}}},
        uda.UnknownFilterFieldError,
        "context_filters.confidence",
        float("inf"),
        True,
    ),
    (
        "weight leg",
        {"weights": {"graph": 1.0}},
        uda.InvalidRequestError,
        "weights",
        "graph",
        False,
    ),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "field", "value", "exact"),
    [pytest.param(*case[1:], id=case[0]) for case in SEARCH_CASES],
)
def test_bad_search_input(
    seeded: uda.Client,
    kwargs: dict[str, Any],
    error: type[uda.UserError],
    field: str,
    value: Any,
    exact: bool,
) -> None:
    query = kwargs.pop("query", "write path")
    with pytest.raises(error) as info:
        seeded.search(query, **kwargs)
    assert isinstance(info.value, uda.UserError)
    assert isinstance(info.value, ValueError)
    _check(info.value, field, value, exact_field=exact)


def test_unknown_filter_field_suggests_the_closest(seeded: uda.Client) -> None:
    with pytest.raises(uda.UnknownFilterFieldError) as info:
        seeded.search("write path", context_filters={"sensitivty": "public"})
    assert "did you mean 'sensitivity'?" in str(info.value)
    with pytest.raises(uda.UnknownFilterFieldError) as info:
        seeded.search("write path", context_filters={"decided": {"$gt": "2024-01-01"}})
    assert "did you mean 'decided_on'?" in str(info.value)


def test_non_searchable_type_message_lists_searchable_types(seeded: uda.Client) -> None:
    with pytest.raises(uda.UnknownElementTypeError) as info:
        seeded.search("write path", element_types=["Repository"])
    message = str(info.value)
    assert "'Repository'" in message
    for name in ("Decision", "Document", "Evidence", "SourcePill"):
        assert name in message


def test_empty_membership_list_is_rejected(seeded: uda.Client) -> None:
    with pytest.raises(uda.UnknownFilterFieldError) as info:
        seeded.search("write path", context_filters={"status": {"$in": []}})
    assert info.value.field == "context_filters.status"
    assert info.value.value == []
    assert "'status'" in str(info.value)
    assert "$in needs a non-empty list" in str(info.value)


def test_filter_operand_of_the_wrong_type_for_a_number_field(seeded: uda.Client) -> None:
    # `confidence` is a float; a word is not a number. parse_filters promises to reject "an
    # operand of the wrong type"; accepting it silently filters everything out.
    with pytest.raises(uda.UnknownFilterFieldError) as info:
        seeded.search("write path", context_filters={"confidence": {"$gte": "high"}})
    _check(info.value, "context_filters.confidence", "high")


def test_decay_that_underflows_still_ranks(seeded: uda.Client) -> None:
    # A floor of 0 and a tiny half-life decay every score to (almost) nothing: valid, and
    # the order among the results must still be the relevance order.
    plain = seeded.search("write path", decay=False).results
    decayed = seeded.search("write path", decay_floor=0.0, half_life=1e-300).results
    assert [r.element_id for r in decayed] == [r.element_id for r in plain]


def test_limit_bool_is_not_an_int(seeded: uda.Client) -> None:
    # JSON `true` is not an integer; pydantic's lax mode would read it as limit=1.
    with pytest.raises(uda.InvalidRequestError) as info:
        seeded.search("write path", limit=True)  # type: ignore[arg-type]
    _check(info.value, "limit", True)


def test_bad_request_does_not_reach_the_backends(seeded: uda.Client) -> None:
    before = seeded.stats()
    for kwargs in ({"limit": 0}, {"clearance_scope": ["nope"]}, {"relations": ["x"]}):
        with pytest.raises(uda.UserError):
            seeded.search("write path", **kwargs)
    assert seeded.stats() == before
    # The client still works after rejecting requests.
    assert [r.element_id for r in seeded.search("write path", clearance_scope=ALL).results]


# -- ingest ------------------------------------------------------------------------------------


def _doc(element_id: str, text: str, **fields: Any) -> dict[str, Any]:
    base = {"element_type": "Document", "element_id": element_id, "name": element_id, "text": text}
    return base | fields


# Valid new elements that every bad batch carries, so that a half-write would show.
_GOOD = [
    _doc("doc:new-a", "Zephyr quokka migration notes for the ingest pipeline."),
    {"element_type": "Person", "element_id": "person:new", "name": "Newcomer"},
    _doc("doc:new-b", "Quokka zephyr rollback procedure for the ingest pipeline."),
]
_GOOD_IDS = {"doc:new-a", "person:new", "doc:new-b"}
_GOOD_RELATIONS = [
    ("doc:new-a", "partOf", "repo:core"),
    ("doc:new-a", "authoredBy", "person:new"),
    ("doc:new-b", "governedBy", "adr:1"),
]

INGEST_CASES: list[tuple[str, list[Any], list[Any], type[uda.UserError], str, Any]] = [
    (
        "unknown element type",
        [*_GOOD, {"element_type": "Nope", "element_id": "x:1", "name": "x"}],
        _GOOD_RELATIONS,
        uda.UnknownElementTypeError,
        "elements[3].element_type",
        "Nope",
    ),
    (
        "missing element type",
        [*_GOOD, {"element_id": "x:1", "name": "x"}],
        _GOOD_RELATIONS,
        uda.UnknownElementTypeError,
        "elements[3].element_type",
        None,
    ),
    (
        "bad sensitivity",
        [*_GOOD, _doc("doc:bad", "some text", sensitivity="secret")],
        _GOOD_RELATIONS,
        uda.InvalidElementError,
        "elements[3].sensitivity",
        "secret",
    ),
    (
        "bad scope",
        [*_GOOD, _doc("doc:bad", "some text", scope="core")],
        _GOOD_RELATIONS,
        uda.InvalidElementError,
        "elements[3].scope",
        "core",
    ),
    (
        "blank text",
        [*_GOOD, _doc("doc:bad", "   ")],
        _GOOD_RELATIONS,
        uda.InvalidElementError,
        "elements[3].text",
        "   ",
    ),
    (
        "unknown field",
        [*_GOOD, _doc("doc:bad", "some text", colour="blue")],
        _GOOD_RELATIONS,
        uda.InvalidElementError,
        "elements[3].colour",
        "blue",
    ),
    (
        "unknown relation",
        _GOOD,
        [*_GOOD_RELATIONS, ("doc:new-a", "dependsOn", "repo:core")],
        uda.UnknownRelationError,
        "relations[3].relation",
        "dependsOn",
    ),
    (
        "relation types do not fit",
        _GOOD,
        [*_GOOD_RELATIONS, ("doc:new-a", "supersedes", "doc:new-b")],
        uda.UnknownRelationError,
        "relations[3].relation",
        "supersedes",
    ),
    (
        "relation to a missing element",
        _GOOD,
        [*_GOOD_RELATIONS, ("doc:new-a", "partOf", "repo:missing")],
        uda.MissingElementError,
        "relations[3].target_id",
        "repo:missing",
    ),
    (
        "relation from a missing element",
        _GOOD,
        [*_GOOD_RELATIONS, ("doc:ghost", "partOf", "repo:core")],
        uda.MissingElementError,
        "relations[3].source_id",
        "doc:ghost",
    ),
    (
        "same id twice, different content",
        [*_GOOD, _doc("doc:new-a", "A different text for the same id.")],
        _GOOD_RELATIONS,
        uda.InvalidElementError,
        "elements[3].element_id",
        "doc:new-a",
    ),
]


def _snapshot(c: uda.Client) -> tuple[dict[str, Any], list[Any]]:
    """Stats and a few full result tables (decay off, so that they are deterministic)."""
    tables = [
        c.search(q, limit=20, clearance_scope=ALL, decay=False, expand_depth=2).to_arrow()
        for q in ("zephyr quokka ingest pipeline", "write path hybrid logical clock")
    ]
    return c.stats(), tables


def _assert_unchanged(c: uda.Client, before: tuple[dict[str, Any], list[Any]]) -> None:
    stats, tables = _snapshot(c)
    assert stats == before[0]
    assert stats["pending"] == 0
    for table, old in zip(tables, before[1], strict=True):
        assert table.equals(old)
        ids = set(table.column("element_id").to_pylist())
        assert not ids & _GOOD_IDS
        for nodes in table.column("context_nodes").to_pylist():
            assert not {n["element_id"] for n in nodes} & _GOOD_IDS


@pytest.mark.parametrize(
    ("elements", "relations", "error", "field", "value"),
    [pytest.param(*case[1:], id=case[0]) for case in INGEST_CASES],
)
def test_bad_ingest_is_rejected_and_writes_nothing(
    seeded: uda.Client,
    elements: list[Any],
    relations: list[Any],
    error: type[uda.UserError],
    field: str,
    value: Any,
) -> None:
    before = _snapshot(seeded)
    with pytest.raises(error) as info:
        seeded.ingest(elements, relations)
    assert isinstance(info.value, uda.UserError)
    _check(info.value, field, value)
    _assert_unchanged(seeded, before)

    # Nothing of the batch was stored: the valid part now writes as new, not as unchanged.
    report = seeded.ingest(_GOOD, _GOOD_RELATIONS)
    assert report.written == len(_GOOD)
    assert report.unchanged == 0
    assert report.edges == len(_GOOD_RELATIONS)
    res = seeded.search("zephyr quokka ingest pipeline", limit=5, clearance_scope=ALL)
    assert {"doc:new-a", "doc:new-b"} <= {r.element_id for r in res.results}


def test_valid_elements_with_a_bad_last_relation_write_nothing(seeded: uda.Client) -> None:
    before = _snapshot(seeded)
    elements = [
        *_GOOD,
        Document(element_id="doc:new-c", name="Zephyr quokka", text="Zephyr quokka pipeline."),
        Decision(element_id="adr:new", name="ADR 2", text="Quokkas ingest zephyrs."),
    ]
    relations = [
        *_GOOD_RELATIONS,
        ("doc:new-c", "governedBy", "adr:new"),
        ("adr:new", "supersedes", "adr:1"),
        ("doc:new-c", "supersedes", "adr:new"),  # the last one: Document cannot supersede
    ]
    with pytest.raises(uda.UnknownRelationError) as info:
        seeded.ingest(elements, relations)
    _check(info.value, "relations[5].relation", "supersedes")
    assert "Document -> Decision" in str(info.value)
    _assert_unchanged(seeded, before)

    with pytest.raises(uda.MissingElementError) as missing:
        seeded.ingest(elements, [*relations[:-1], ("doc:new-c", "partOf", "repo:gone")])
    _check(missing.value, "relations[5].target_id", "repo:gone")
    _assert_unchanged(seeded, before)

    report = seeded.ingest(elements, relations[:-1])
    assert report.written == len(elements)
    assert report.edges == len(relations) - 1
    stats = seeded.stats()
    assert stats["elements"] == before[0]["elements"] + len(elements)
    assert stats["edges"] == before[0]["edges"] + len(relations) - 1


def test_same_content_twice_in_a_batch_is_not_an_error(seeded: uda.Client) -> None:
    doc = _doc("doc:twice", "Repeated zephyr quokka content.")
    report = seeded.ingest([doc, dict(doc)])
    assert report.written == 1


def test_bad_typed_relation_object(seeded: uda.Client) -> None:
    before = _snapshot(seeded)
    with pytest.raises(uda.InvalidElementError) as info:
        seeded.ingest(_GOOD, [*_GOOD_RELATIONS, ("doc:new-a", "partOf")])
    assert info.value.field == "relations[3]"
    assert "relations[3]" in str(info.value)
    _assert_unchanged(seeded, before)
