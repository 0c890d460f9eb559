"""JSON Schema export of the ontology, for generating models in other languages."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from ontology.registry import element_class, element_types, relation_spec, relation_types
from ontology.relations import Relation


def json_schema() -> dict[str, Any]:
    """One JSON Schema document with every registered element type, `Relation`, and relations.

    Element types appear under `$defs` by name; `x-uda-relations` lists each relation type
    with the element types it may link.
    """
    models: list[type[BaseModel]] = [Relation]
    models += [cls for name in element_types() if (cls := element_class(name)) is not None]
    _, schema = models_json_schema(
        [(model, "validation") for model in models],
        title="UDA ontology",
    )
    schema["x-uda-element-types"] = element_types()
    schema["x-uda-relations"] = {
        name: {
            "sources": list(spec.sources),
            "targets": list(spec.targets),
            "description": spec.description,
        }
        for name in relation_types()
        if (spec := relation_spec(name)) is not None
    }
    return schema
