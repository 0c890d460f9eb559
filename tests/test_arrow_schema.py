"""The Arrow result schema is pinned: results, IPC round trips, typed elements, JSON Schema.

The expected schema is written out literally below. Any change to the ontology or to
`ontology/arrow.py` that changes the result schema must fail `test_result_schema_is_pinned`
and be made on purpose (with a new `uda.schema_version`).
"""

from __future__ import annotations

import json
from datetime import date

import pyarrow as pa
import pytest

import ontology
import uda
from ontology import (
    Decision,
    DecisionStatus,
    Document,
    Element,
    Person,
    Repository,
    SystemComponent,
)
from ontology import arrow as ontology_arrow
from uda.query.results import ArrowResponse

# -- the pinned schema -------------------------------------------------------------------------

_DICT = pa.dictionary(pa.int8(), pa.string())

EXPECTED_PROPERTIES = pa.struct(
    [
        pa.field("confidence", pa.float64(), nullable=True),
        pa.field("decided_on", pa.date32(), nullable=True),
        pa.field("email", pa.string(), nullable=True),
        pa.field("handle", pa.string(), nullable=True),
        pa.field("kind", pa.string(), nullable=True),
        pa.field("status", pa.string(), nullable=True),
        pa.field("text", pa.string(), nullable=True),
        pa.field("uri", pa.string(), nullable=True),
        pa.field("url", pa.string(), nullable=True),
    ]
)

EXPECTED_EXTRAS = pa.map_(pa.string(), pa.string())

EXPECTED_CONTEXT_NODE = pa.struct(
    [
        pa.field("element_id", pa.string(), nullable=False),
        pa.field("element_type", pa.string(), nullable=False),
        pa.field("name", pa.string(), nullable=True),
        pa.field("relation", pa.string(), nullable=False),
        pa.field("direction", pa.string(), nullable=False),
        pa.field("depth", pa.int8(), nullable=False),
        pa.field("via", pa.string(), nullable=True),
        pa.field("sensitivity", pa.string(), nullable=True),
        pa.field("scope", pa.string(), nullable=True),
        pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=True),
        pa.field("hlc", pa.int64(), nullable=True),
        pa.field("version", pa.int64(), nullable=True),
        pa.field("properties", EXPECTED_PROPERTIES, nullable=True),
        pa.field("extras", EXPECTED_EXTRAS, nullable=True),
    ]
)

EXPECTED_SCHEMA = pa.schema(
    [
        pa.field("element_id", pa.string(), nullable=False),
        pa.field("element_type", _DICT, nullable=False),
        pa.field("score", pa.float64(), nullable=False),
        pa.field("semantic_score", pa.float32(), nullable=True),
        pa.field("lexical_score", pa.float32(), nullable=True),
        pa.field("centrality", pa.float32(), nullable=True),
        pa.field("decay", pa.float32(), nullable=True),
        pa.field("semantic_rank", pa.int32(), nullable=True),
        pa.field("lexical_rank", pa.int32(), nullable=True),
        pa.field("centrality_rank", pa.int32(), nullable=True),
        pa.field("entity_rank", pa.int32(), nullable=True),
        pa.field("hlc", pa.int64(), nullable=False),
        pa.field("version", pa.int64(), nullable=False),
        pa.field("name", pa.string(), nullable=True),
        pa.field("snippet", pa.string(), nullable=True),
        pa.field("sensitivity", _DICT, nullable=True),
        pa.field("scope", pa.string(), nullable=True),
        pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=True),
        pa.field("properties", EXPECTED_PROPERTIES, nullable=True),
        pa.field("extras", EXPECTED_EXTRAS, nullable=True),
        pa.field(
            "context_nodes",
            pa.list_(pa.field("item", EXPECTED_CONTEXT_NODE, nullable=True)),
            nullable=True,
        ),
        pa.field("truncated", pa.map_(pa.string(), pa.int64()), nullable=True),
        pa.field("snippet_offset", pa.int64(), nullable=True),
    ],
    metadata={"uda.schema_version": "3"},
)

BUILTIN_ELEMENT_TYPES = {
    "Decision",
    "Document",
    "Evidence",
    "Person",
    "Project",
    "Repository",
    "SourcePill",
    "SystemComponent",
}
BUILTIN_RELATIONS = {
    "authoredBy",
    "derivedFrom",
    "governedBy",
    "partOf",
    "provesRelation",
    "relatedTo",
    "supersedes",
}


class Runbook(Document):
    """A user-defined element type: a document with an owning team."""

    owner_team: str | None = None


# -- helpers -----------------------------------------------------------------------------------

ALL = ["restricted", "project:*"]


def _corpus() -> tuple[list[Element], list[tuple[str, str, str]]]:
    elements: list[Element] = [
        Repository(element_id="repo:uda", name="uda", url="https://example.org/uda"),
        SystemComponent(element_id="svc:planner", name="planner", kind="service"),
        Person(element_id="person:ada", name="Ada Lovelace", email="ada@example.org", handle="ada"),
        Decision(
            element_id="adr:arrow",
            name="ADR 7: results travel as Apache Arrow",
            text="We decided that search results are returned as Apache Arrow record batches "
            "so that services never parse JSON.",
            status=DecisionStatus.ACCEPTED,
            decided_on=date(2024, 3, 1),
        ),
        Document(
            element_id="doc:arrow",
            name="Arrow result format",
            text="Search results are Apache Arrow tables with a stable schema; services read "
            "them as IPC streams.",
            uri="docs/arrow.md",
        ),
        Document(
            element_id="doc:clock",
            name="Hybrid logical clock",
            text="Every write is stamped by a hybrid logical clock with physical milliseconds "
            "and a logical counter.",
        ),
    ]
    relations = [
        ("doc:arrow", "partOf", "repo:uda"),
        ("doc:arrow", "governedBy", "adr:arrow"),
        ("doc:arrow", "authoredBy", "person:ada"),
        ("doc:clock", "partOf", "repo:uda"),
        ("doc:clock", "partOf", "svc:planner"),
        ("adr:arrow", "authoredBy", "person:ada"),
    ]
    return elements, relations


@pytest.fixture
def loaded(client: uda.Client) -> uda.Client:
    elements, relations = _corpus()
    client.ingest(elements, relations)
    return client


def _stream_roundtrip(table: pa.Table) -> pa.Table:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return pa.ipc.open_stream(sink.getvalue()).read_all()


def _file_roundtrip(table: pa.Table) -> pa.Table:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return pa.ipc.open_file(sink.getvalue()).read_all()


def _assert_schema(schema: pa.Schema) -> None:
    assert schema.equals(EXPECTED_SCHEMA, check_metadata=True), (
        f"schema differs from the pinned one:\n{schema}\n--- expected ---\n{EXPECTED_SCHEMA}"
    )


# -- the schema itself -------------------------------------------------------------------------


def test_result_schema_is_pinned() -> None:
    _assert_schema(ontology.result_schema())
    assert ontology.result_schema().metadata == {b"uda.schema_version": b"3"}
    # Field order is part of the contract, as are the nested structs.
    assert ontology.result_schema().names == EXPECTED_SCHEMA.names
    assert ontology_arrow.properties_type().equals(EXPECTED_PROPERTIES)
    assert ontology_arrow.context_node_type().equals(EXPECTED_CONTEXT_NODE)


@pytest.mark.parametrize(
    ("name", "mutate"),
    [
        ("top-level nullability", lambda s: s.set(0, s.field(0).with_nullable(True))),
        ("metadata", lambda s: s.with_metadata({"uda.schema_version": "1"})),
        (
            "dictionary index type",
            lambda s: s.set(1, pa.field("element_type", pa.dictionary(pa.int16(), pa.string()))),
        ),
        (
            "nested context node nullability",
            lambda s: s.set(
                19,
                pa.field(
                    "context_nodes",
                    pa.list_(
                        pa.field(
                            "item",
                            pa.struct(
                                [
                                    f.with_nullable(True) if f.name == "depth" else f
                                    for f in EXPECTED_CONTEXT_NODE
                                ]
                            ),
                        )
                    ),
                ),
            ),
        ),
        (
            "property type",
            lambda s: s.set(
                17,
                pa.field(
                    "properties",
                    pa.struct(
                        [
                            pa.field(f.name, pa.float32()) if f.name == "confidence" else f
                            for f in EXPECTED_PROPERTIES
                        ]
                    ),
                ),
            ),
        ),
    ],
)
def test_pinned_comparison_is_strict(name: str, mutate) -> None:
    """The comparison the pin relies on notices every kind of change (the test can fail)."""
    changed = mutate(EXPECTED_SCHEMA)
    assert not ontology.result_schema().equals(changed, check_metadata=True), name


def test_schema_derivation_ignores_user_subclasses() -> None:
    # Runbook is registered at import; derive the schema afresh (not from the cache).
    assert ontology.element_class("Runbook") is Runbook
    for cached in (
        ontology_arrow.properties_type,
        ontology_arrow.context_node_type,
        ontology_arrow.result_schema,
    ):
        cached.cache_clear()
    _assert_schema(ontology.result_schema())


# -- real results ------------------------------------------------------------------------------


def test_search_result_has_the_schema(loaded: uda.Client) -> None:
    res = loaded.search("Apache Arrow results", limit=5, clearance_scope=ALL)
    assert len(res) >= 2
    table = res.to_arrow()
    _assert_schema(table.schema)
    reader = res.to_batches()
    assert isinstance(reader, pa.RecordBatchReader)
    _assert_schema(reader.schema)
    batches = list(reader)
    assert batches
    for batch in batches:
        _assert_schema(batch.schema)
    assert pa.Table.from_batches(batches, schema=EXPECTED_SCHEMA).equals(table)

    rows = table.to_pylist()
    by_id = {r["element_id"]: r for r in rows}
    doc = by_id["doc:arrow"]
    assert doc["element_type"] == "Document"
    assert doc["properties"]["uri"] == "docs/arrow.md"
    assert doc["properties"]["status"] is None
    neighbours = {(n["element_id"], n["relation"], n["direction"]) for n in doc["context_nodes"]}
    assert {
        ("repo:uda", "partOf", "out"),
        ("adr:arrow", "governedBy", "out"),
        ("person:ada", "authoredBy", "out"),
    } <= neighbours
    adr_node = next(n for n in doc["context_nodes"] if n["element_id"] == "adr:arrow")
    assert adr_node["element_type"] == "Decision"
    assert adr_node["properties"]["status"] == "accepted"
    assert adr_node["properties"]["decided_on"] == date(2024, 3, 1)
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)


@pytest.mark.parametrize("roundtrip", [_stream_roundtrip, _file_roundtrip], ids=["stream", "file"])
def test_result_roundtrips_through_ipc(loaded: uda.Client, roundtrip) -> None:
    res = loaded.search("Apache Arrow results", limit=5, clearance_scope=ALL, expand_depth=2)
    table = res.to_arrow()
    assert table.num_rows >= 2
    assert any(row for row in table.column("context_nodes").to_pylist())
    back = roundtrip(table)
    _assert_schema(back.schema)
    assert table.equals(back)
    assert back.to_pylist() == table.to_pylist()


@pytest.mark.parametrize("roundtrip", [_stream_roundtrip, _file_roundtrip], ids=["stream", "file"])
def test_batches_roundtrip_through_ipc(loaded: uda.Client, roundtrip) -> None:
    res = loaded.search("hybrid logical clock", limit=3, clearance_scope=ALL)
    reader = res.to_batches()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, reader.schema) as writer:
        for batch in reader:
            writer.write_batch(batch)
    streamed = pa.ipc.open_stream(sink.getvalue()).read_all()
    _assert_schema(streamed.schema)
    assert streamed.equals(res.to_arrow())
    assert roundtrip(streamed).equals(res.to_arrow())


@pytest.mark.parametrize("roundtrip", [_stream_roundtrip, _file_roundtrip], ids=["stream", "file"])
def test_empty_result_keeps_the_schema(loaded: uda.Client, roundtrip) -> None:
    # Every element is `internal` (the default); no clearance means `public` only: nothing.
    res = loaded.search("Apache Arrow results", limit=5, clearance_scope=[])
    assert len(res) == 0
    table = res.to_arrow()
    assert table.num_rows == 0
    _assert_schema(table.schema)
    _assert_schema(res.to_batches().schema)
    back = roundtrip(table)
    _assert_schema(back.schema)
    assert table.equals(back)
    assert res.results == []
    assert res.to_elements() == []


def test_to_elements_returns_typed_objects(loaded: uda.Client) -> None:
    res = loaded.search("Apache Arrow results", limit=5, clearance_scope=ALL)
    elements = {e.element_id: e for e in res.to_elements()}
    doc = elements["doc:arrow"]
    assert type(doc) is Document
    assert doc.name == "Arrow result format"
    assert doc.uri == "docs/arrow.md"
    assert doc.hlc is not None
    assert doc.version == 1
    assert doc.repository is not None
    assert type(doc.repository) is Repository
    assert doc.repository.name == "uda"
    assert doc.repository.url == "https://example.org/uda"
    assert [d.element_id for d in doc.decisions] == ["adr:arrow"]
    decision = doc.decisions[0]
    assert type(decision) is Decision
    assert decision.status is DecisionStatus.ACCEPTED
    assert decision.decided_on == date(2024, 3, 1)
    assert [(p.name, p.email, p.handle) for p in doc.authors] == [
        ("Ada Lovelace", "ada@example.org", "ada")
    ]
    assert type(doc.authors[0]) is Person

    adr = elements["adr:arrow"]
    assert type(adr) is Decision
    assert [d.element_id for d in adr.related("governedBy", "in")] == ["doc:arrow"]
    # Typed elements agree with the Arrow rows they were made from.
    ids = [row["element_id"] for row in res.to_arrow().to_pylist()]
    assert [e.element_id for e in res.to_elements()] == ids


def test_user_subclass_roundtrips_through_extras(loaded: uda.Client) -> None:
    runbook = Runbook(
        element_id="runbook:restore",
        name="Runbook: restore the vector store",
        text="To restore the Chroma vector store, stop the service and replay the outbox.",
        owner_team="storage-sre",
        extras={"tier": "1"},
    )
    loaded.ingest(
        [runbook],
        [("runbook:restore", "partOf", "repo:uda"), ("runbook:restore", "governedBy", "adr:arrow")],
    )
    res = loaded.search("restore the Chroma vector store", limit=5, clearance_scope=ALL)
    table = res.to_arrow()
    _assert_schema(table.schema)
    assert table.schema.field("properties").type.get_field_index("owner_team") == -1

    row = next(r for r in table.to_pylist() if r["element_id"] == "runbook:restore")
    assert row["element_type"] == "Runbook"
    assert dict(row["extras"]) == {"owner_team": "storage-sre", "tier": "1"}
    assert row["properties"]["text"] == runbook.text

    got = next(e for e in res.to_elements() if e.element_id == "runbook:restore")
    assert type(got) is Runbook
    assert got.owner_team == "storage-sre"
    assert got.extras == {"tier": "1"}
    assert got.text == runbook.text
    assert got.repository is not None
    assert got.repository.name == "uda"
    assert [d.element_id for d in got.decisions] == ["adr:arrow"]

    # As a context node of the decision it comes back typed, too.
    res = loaded.search("ADR results travel as Apache Arrow", limit=5, clearance_scope=ALL)
    adr = next(e for e in res.to_elements() if e.element_id == "adr:arrow")
    governed = {e.element_id: e for e in adr.related("governedBy", "in")}
    assert type(governed["runbook:restore"]) is Runbook
    assert governed["runbook:restore"].owner_team == "storage-sre"
    assert governed["runbook:restore"].extras == {"tier": "1"}
    _assert_schema(res.to_arrow().schema)
    assert _file_roundtrip(res.to_arrow()).equals(res.to_arrow())


def test_json_schema_has_every_type_and_relation() -> None:
    schema = ontology.json_schema()
    json.dumps(schema)  # plain JSON
    registered = set(ontology.element_types())
    assert registered >= BUILTIN_ELEMENT_TYPES | {"Runbook"}
    assert set(schema["x-uda-element-types"]) == registered
    defs = schema["$defs"]
    for name in registered:
        assert name in defs, name
        props = defs[name]["properties"]
        assert {"element_id", "name", "sensitivity", "scope", "hlc", "version"} <= set(props)
    assert "Relation" in defs
    assert {"text", "uri"} <= set(defs["Document"]["properties"])
    assert {"status", "decided_on"} <= set(defs["Decision"]["properties"])
    assert "owner_team" in defs["Runbook"]["properties"]
    assert "KnowledgeAsset" not in registered

    relations = schema["x-uda-relations"]
    assert set(relations) == set(ontology.relation_types())
    assert set(relations) >= BUILTIN_RELATIONS
    assert relations["partOf"]["targets"] == ["Repository", "SystemComponent", "Project"]
    assert relations["governedBy"]["targets"] == ["Decision"]
    assert relations["supersedes"] == {
        "sources": ["Decision"],
        "targets": ["Decision"],
        "description": relations["supersedes"]["description"],
    }
    for spec in relations.values():
        assert spec["sources"]
        assert spec["targets"]


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_views_of_a_response_equal_those_of_its_table(loaded: uda.Client, depth: int) -> None:
    # A response builds `results` and `to_elements()` from its rows directly; a response
    # rebuilt from the Arrow table (what the HTTP client gets) builds them from the table.
    # Both must give the same objects, property types included.
    res = loaded.search("Apache Arrow results", limit=5, clearance_scope=ALL, expand_depth=depth)
    assert len(res) >= 2
    rebuilt = ArrowResponse(res.to_arrow())
    assert [r.model_dump() for r in res.results] == [r.model_dump() for r in rebuilt.results]
    ours, theirs = res.to_elements(), rebuilt.to_elements()
    assert [e.model_dump() for e in ours] == [e.model_dump() for e in theirs]
    assert [[(c.relation, c.element.model_dump()) for c in e.context] for e in ours] == [
        [(c.relation, c.element.model_dump()) for c in e.context] for e in theirs
    ]
    if depth:
        assert any(r.context_nodes for r in res.results)
