"""Element classes: the nouns UDA stores, searches and returns.

Knowledge assets (`Document`, `Evidence`, `SourcePill`, `Decision`) carry text and are chunked
and embedded; context-only nodes (`Repository`, `SystemComponent`, `Person`, `Project`) are
reached through relations. Subclassing any of them registers a new element type.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    computed_field,
    field_validator,
)

from ontology import registry

SCOPE_PATTERN = re.compile(r"^project:[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


class Sensitivity(StrEnum):
    """Ordered sensitivity levels: public < internal < confidential < restricted."""

    PUBLIC = "public"
    INTERNAL = "internal"
    CONFIDENTIAL = "confidential"
    RESTRICTED = "restricted"

    @property
    def rank(self) -> int:
        """Position in the order, 0 for public; comparisons use this."""
        return _SENSITIVITY_RANKS[self]


_SENSITIVITY_ORDER = list(Sensitivity)
_SENSITIVITY_RANKS = {level: rank for rank, level in enumerate(_SENSITIVITY_ORDER)}


class DecisionStatus(StrEnum):
    """Lifecycle states of decision records (ADR, MADR and KEP vocabularies together)."""

    PROPOSED = "proposed"
    PROVISIONAL = "provisional"
    ACCEPTED = "accepted"
    IMPLEMENTABLE = "implementable"
    IMPLEMENTED = "implemented"
    REJECTED = "rejected"
    WITHDRAWN = "withdrawn"
    DEFERRED = "deferred"
    DEPRECATED = "deprecated"
    SUPERSEDED = "superseded"
    REPLACED = "replaced"


class ComponentKind(StrEnum):
    """What a `SystemComponent` stands for."""

    COMPONENT = "component"
    SERVICE = "service"
    LIBRARY = "library"
    EPIC = "epic"
    SIG = "sig"


def _now() -> datetime:
    return datetime.now(UTC)


class ContextLink(BaseModel):
    """One hydrated neighbour of a result: how it is linked, and the element itself."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    relation: str
    direction: str
    depth: int
    element: Element


class Element(BaseModel):
    """Base of every element. Subclass it to add an element type; the subclass registers itself.

    `hlc` and `version` are assigned by the store on write and filled on read; values given on
    ingest are ignored.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    knowledge_asset: ClassVar[bool] = False

    element_id: str = Field(min_length=1, max_length=512)
    name: str = Field(min_length=1, max_length=1000)
    sensitivity: Sensitivity = Sensitivity.INTERNAL
    scope: str | None = None
    timestamp: datetime = Field(default_factory=_now)
    extras: dict[str, str] = Field(default_factory=dict)
    hlc: int | None = None
    version: int | None = None

    _context: tuple[ContextLink, ...] = PrivateAttr(default=())
    _truncated: Mapping[str, int] = PrivateAttr(default_factory=dict[str, int])

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        registry.register_element_class(cls)

    @classmethod
    def type_name(cls) -> str:
        """The element type as stored and returned: the class name."""
        return cls.__name__

    @computed_field  # type: ignore[prop-decorator]
    @property
    def element_type(self) -> str:
        """The element's type name (its class name)."""
        return self.type_name()

    @field_validator("element_id")
    @classmethod
    def _id_is_clean(cls, value: str) -> str:
        if value != value.strip() or _CONTROL_CHARS.search(value):
            raise ValueError("element_id must not have surrounding blanks or control characters")
        return value

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("name must not be blank")
        return value

    @field_validator("scope")
    @classmethod
    def _scope_is_project(cls, value: str | None) -> str | None:
        if value is not None and not SCOPE_PATTERN.match(value):
            raise ValueError(f"scope must look like 'project:<name>', got {value!r}")
        return value

    @field_validator("extras")
    @classmethod
    def _extras_do_not_shadow_fields(cls, value: dict[str, str]) -> dict[str, str]:
        clash = sorted(set(value) & (set(cls.model_fields) | {"element_type"}))
        if clash:
            raise ValueError(f"extras keys {clash} shadow declared fields")
        return value

    @field_validator("timestamp")
    @classmethod
    def _timestamp_is_utc(cls, value: datetime) -> datetime:
        # Naive datetimes are read as UTC so that ages never depend on the host's zone.
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)

    def content_hash(self) -> str:
        """Hash of what the element says, used to skip unchanged content on ingest.

        The timestamp and store-assigned fields are left out: re-ingesting the same content
        later is not a new state.
        """
        payload = self.model_dump(mode="json", exclude={"timestamp", "hlc", "version"})
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    # -- navigation over hydrated context nodes -------------------------------------------
    @property
    def context(self) -> list[ContextLink]:
        """Every hydrated neighbour, as returned by the search that produced this element."""
        return list(self._context)

    def related(self, relation: str, direction: str = "out") -> list[Element]:
        """Neighbours reached over `relation` in `direction` ("out" or "in")."""
        return [
            link.element
            for link in self._context
            if link.relation == relation and link.direction == direction
        ]

    def with_context(self, links: list[ContextLink]) -> Element:
        """Return this element with its context links attached (used by result hydration)."""
        object.__setattr__(
            self,
            "__pydantic_private__",
            {"_context": tuple(links), "_truncated": self._truncated},
        )
        return self

    @property
    def truncated(self) -> dict[str, int]:
        """The fields this copy holds clipped, with each one's full length in characters.

        Empty for a whole element. A search answer clips long text by default (only the
        start of each such field is here); `fields=["*"]` on the search, or an element
        lookup, gives it whole.
        """
        return dict(self._truncated)

    def with_truncated(self, truncated: Mapping[str, int]) -> Element:
        """Return this element marked as holding `truncated` fields clipped (hydration)."""
        object.__setattr__(
            self,
            "__pydantic_private__",
            {"_context": self._context, "_truncated": dict(truncated)},
        )
        return self


class KnowledgeAsset(Element):
    """Searchable element with text: chunked, embedded and indexed for the lexical leg."""

    knowledge_asset: ClassVar[bool] = True
    __abstract__ = True  # a base for the searchable types, not a type of its own

    text: str = Field(min_length=1)
    uri: str | None = None

    @field_validator("text")
    @classmethod
    def _text_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("text must not be blank")
        return value

    @property
    def repository(self) -> Repository | None:
        """The repository this asset is part of, if the search hydrated it."""
        for element in self.related("partOf"):
            if isinstance(element, Repository):
                return element
        return None

    @property
    def components(self) -> list[SystemComponent]:
        """System components this asset is part of."""
        return [e for e in self.related("partOf") if isinstance(e, SystemComponent)]

    @property
    def decisions(self) -> list[Decision]:
        """Decisions that govern this asset."""
        return [e for e in self.related("governedBy") if isinstance(e, Decision)]

    @property
    def authors(self) -> list[Person]:
        """Authors of this asset."""
        return [e for e in self.related("authoredBy") if isinstance(e, Person)]


class Document(KnowledgeAsset):
    """A text document: a page, a README, a chunk-able file."""


class Evidence(KnowledgeAsset):
    """A piece of evidence that proves a relation or a claim (see `provesRelation`)."""

    confidence: float | None = Field(default=None, ge=0.0, le=1.0)


class SourcePill(KnowledgeAsset):
    """A short, quotable extract derived from a document (see `derivedFrom`)."""


class Decision(KnowledgeAsset):
    """A decision record (ADR, MADR, KEP): searchable text and the node that governs documents."""

    status: DecisionStatus | None = None
    decided_on: date | None = None

    @property
    def superseded(self) -> list[Decision]:
        """Decisions this one supersedes."""
        return [e for e in self.related("supersedes") if isinstance(e, Decision)]


class Repository(Element):
    """A source repository that documents are part of."""

    url: str | None = None


class SystemComponent(Element):
    """A service, library, epic or SIG that documents are part of."""

    kind: ComponentKind = ComponentKind.COMPONENT


class Person(Element):
    """An author or owner."""

    email: str | None = None
    handle: str | None = None


class Project(Element):
    """A project: the unit that `project:<name>` scopes grant."""


ContextLink.model_rebuild()
