"""Typed, directed relations between elements, and the built-in relation types."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ontology.registry import RelationSpec, register_relation


class RelationType(StrEnum):
    """The built-in relation types (users may register more with `register_relation`)."""

    PART_OF = "partOf"
    GOVERNED_BY = "governedBy"
    PROVES_RELATION = "provesRelation"
    AUTHORED_BY = "authoredBy"
    DERIVED_FROM = "derivedFrom"
    SUPERSEDES = "supersedes"
    RELATED_TO = "relatedTo"


for _spec in (
    RelationSpec(
        name=RelationType.PART_OF.value,
        sources=("KnowledgeAsset", "SystemComponent", "Repository"),
        targets=("Repository", "SystemComponent", "Project"),
        description="an asset is part of a repository or component; components of projects",
    ),
    RelationSpec(
        name=RelationType.GOVERNED_BY.value,
        sources=("Element",),
        targets=("Decision",),
        description="an element is governed by a decision",
    ),
    RelationSpec(
        name=RelationType.PROVES_RELATION.value,
        sources=("Evidence",),
        targets=("Element",),
        description="a piece of evidence supports an element or claim",
    ),
    RelationSpec(
        name=RelationType.AUTHORED_BY.value,
        sources=("Element",),
        targets=("Person",),
        description="an element was written or is owned by a person",
    ),
    RelationSpec(
        name=RelationType.DERIVED_FROM.value,
        sources=("SourcePill",),
        targets=("KnowledgeAsset",),
        description="a source pill was extracted from a knowledge asset",
    ),
    RelationSpec(
        name=RelationType.SUPERSEDES.value,
        sources=("Decision",),
        targets=("Decision",),
        description="a decision replaces an earlier one",
    ),
    RelationSpec(
        name=RelationType.RELATED_TO.value,
        description="an untyped association",
    ),
):
    register_relation(_spec)


class Relation(BaseModel):
    """A directed, typed edge: `source_id --relation--> target_id`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source_id: str = Field(min_length=1, max_length=512)
    relation: str = Field(min_length=1, max_length=128)
    target_id: str = Field(min_length=1, max_length=512)

    @field_validator("relation", mode="before")
    @classmethod
    def _plain_string(cls, value: object) -> object:
        # A RelationType member is stored as its plain value.
        return str(value) if isinstance(value, StrEnum) else value

    @property
    def key(self) -> tuple[str, str, str]:
        """The identity of the edge: writing it twice stores it once."""
        return (self.source_id, self.relation, self.target_id)
