"""The typed element model of UDA: elements, relations, and the schemas derived from them.

Everything UDA stores or returns is one of these classes. The Arrow result schema and the
JSON Schema export are derived from them, so they are the single source of truth.
"""

from __future__ import annotations

from ontology.arrow import result_schema
from ontology.elements import (
    ComponentKind,
    Decision,
    DecisionStatus,
    Document,
    Element,
    Evidence,
    KnowledgeAsset,
    Person,
    Project,
    Repository,
    Sensitivity,
    SourcePill,
    SystemComponent,
)
from ontology.export import json_schema
from ontology.registry import (
    RelationSpec,
    element_class,
    element_types,
    knowledge_asset_types,
    register_relation,
    relation_spec,
    relation_types,
)
from ontology.relations import Relation, RelationType

__all__ = [
    "ComponentKind",
    "Decision",
    "DecisionStatus",
    "Document",
    "Element",
    "Evidence",
    "KnowledgeAsset",
    "Person",
    "Project",
    "Relation",
    "RelationSpec",
    "RelationType",
    "Repository",
    "Sensitivity",
    "SourcePill",
    "SystemComponent",
    "element_class",
    "element_types",
    "json_schema",
    "knowledge_asset_types",
    "register_relation",
    "relation_spec",
    "relation_types",
    "result_schema",
]
