"""The Arrow result schema, derived from the element classes.

One schema for every search result, stable across releases (a test pins it). Columns that
every element has are top-level; the typed properties of the built-in classes form one struct;
anything else (fields of user-defined subclasses, free-form extras) travels as
`map<string, string>`, never as JSON text.
"""

from __future__ import annotations

import types
import typing
from datetime import date, datetime
from enum import Enum
from functools import cache
from typing import Any

import pyarrow as pa

from ontology import elements

SCHEMA_VERSION = "3"  # 2: `truncated`, `snippet_offset` (ADR 40); 3: `entity_rank` (ADR 47)

# The classes whose declared fields make up the `properties` struct. User subclasses do not
# change the schema; their extra fields travel in `extras`.
BUILTIN_CLASSES: tuple[type[elements.Element], ...] = (
    elements.Document,
    elements.Evidence,
    elements.SourcePill,
    elements.Decision,
    elements.Repository,
    elements.SystemComponent,
    elements.Person,
    elements.Project,
)

# Fields every element has: they are columns of their own, not properties.
BASE_FIELDS = frozenset(elements.Element.model_fields)


def arrow_type(annotation: Any) -> pa.DataType:
    """Map a (non-optional) field annotation to its Arrow type."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unions other than Optional are not mapped: {annotation!r}")
        return arrow_type(args[0])
    if isinstance(annotation, type):
        if issubclass(annotation, bool):
            return pa.bool_()
        if issubclass(annotation, Enum | str):
            return pa.string()
        if issubclass(annotation, int):
            return pa.int64()
        if issubclass(annotation, float):
            return pa.float64()
        if issubclass(annotation, datetime):
            return pa.timestamp("us", tz="UTC")
        if issubclass(annotation, date):
            return pa.date32()
    raise TypeError(f"no Arrow type for field annotation {annotation!r}")


@cache
def properties_type() -> pa.StructType:
    """Struct of every declared, non-base field of the built-in element classes (all nullable)."""
    fields: dict[str, pa.DataType] = {}
    for cls in BUILTIN_CLASSES:
        for name, info in cls.model_fields.items():
            if name in BASE_FIELDS:
                continue
            typ = arrow_type(info.annotation)
            if fields.setdefault(name, typ) != typ:
                raise TypeError(f"field {name!r} has two Arrow types across element classes")
    return pa.struct([pa.field(n, fields[n]) for n in sorted(fields)])


@cache
def property_names() -> frozenset[str]:
    """Names of the fields in the `properties` struct."""
    # pyarrow's stubs iterate a struct as `Field` without its type parameter.
    fields: list[pa.Field[pa.DataType]] = list(properties_type())
    return frozenset(f.name for f in fields)


EXTRAS_TYPE = pa.map_(pa.string(), pa.string())
TRUNCATED_TYPE = pa.map_(pa.string(), pa.int64())


@cache
def context_node_type() -> pa.StructType:
    """One hydrated neighbour of a result."""
    return pa.struct(
        [
            pa.field("element_id", pa.string(), nullable=False),
            pa.field("element_type", pa.string(), nullable=False),
            pa.field("name", pa.string()),
            pa.field("relation", pa.string(), nullable=False),
            pa.field("direction", pa.string(), nullable=False),
            pa.field("depth", pa.int8(), nullable=False),
            pa.field("via", pa.string()),
            pa.field("sensitivity", pa.string()),
            pa.field("scope", pa.string()),
            pa.field("timestamp", pa.timestamp("us", tz="UTC")),
            pa.field("hlc", pa.int64()),
            pa.field("version", pa.int64()),
            pa.field("properties", properties_type()),
            pa.field("extras", EXTRAS_TYPE),
        ]
    )


@cache
def result_schema() -> pa.Schema:
    """The Arrow schema of search results (see docs/adr/0008-arrow-result-schema.md)."""
    dictionary = pa.dictionary(pa.int8(), pa.string())
    return pa.schema(
        [
            pa.field("element_id", pa.string(), nullable=False),
            pa.field("element_type", dictionary, nullable=False),
            pa.field("score", pa.float64(), nullable=False),
            pa.field("semantic_score", pa.float32()),
            pa.field("lexical_score", pa.float32()),
            pa.field("centrality", pa.float32()),
            pa.field("decay", pa.float32()),
            pa.field("semantic_rank", pa.int32()),
            pa.field("lexical_rank", pa.int32()),
            pa.field("centrality_rank", pa.int32()),
            pa.field("entity_rank", pa.int32()),  # linked to a node the query names (ADR 47)
            pa.field("hlc", pa.int64(), nullable=False),
            pa.field("version", pa.int64(), nullable=False),
            pa.field("name", pa.string()),
            pa.field("snippet", pa.string()),
            pa.field("sensitivity", dictionary),
            pa.field("scope", pa.string()),
            pa.field("timestamp", pa.timestamp("us", tz="UTC")),
            pa.field("properties", properties_type()),
            pa.field("extras", EXTRAS_TYPE),
            pa.field("context_nodes", pa.list_(pa.field("item", context_node_type()))),
            # What the answer clipped: a field's path ("text", "extras.notes",
            # "context_nodes[2].text") and its full length in characters. Empty: whole.
            pa.field("truncated", TRUNCATED_TYPE),
            # Where the snippet (the best matching chunk) starts in the element's text, in
            # characters (null: not found verbatim, or no text).
            pa.field("snippet_offset", pa.int64()),
        ],
        metadata={"uda.schema_version": SCHEMA_VERSION},
    )
