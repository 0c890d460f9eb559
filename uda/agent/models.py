"""What the agent tools take and give back: Pydantic models the model sees as JSON Schemas.

Argument models are `extra="forbid"`: a model that invents a field (say `clearance_scope`)
gets a validation error back and must try again, instead of the field being silently
dropped. None of them has a clearance field — clearance comes from the deployment (the
agent's deps, the MCP server's command line), never from the model. Return models are
compact on purpose: ids, types, names, scores, short snippets; details are one call away.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from connectors.contract.predicates import Op

Scalar = str | int | float | bool
# The shapes `uda.query.filters.parse_filters` reads: a value (equality), a list (membership) or a
# mapping of operators. Operators come from `Op`, so the schema and the parser agree.
FilterSpec = Scalar | list[Scalar] | dict[Op, Scalar | list[Scalar]]
Strategy = Literal["default", "semantic", "hybrid", "structured"]

_FILTERS_HELP = (
    "Structured filters on element properties: {field: value} for equality, "
    '{field: [v1, v2]} for any of, {field: {"$gte": v}} for comparisons. Only fields that '
    "list_filter_fields names exist; dates are ISO strings."
)


_WHERE_HELP = (
    "A filter tree, ANDed with filters, for what flat filters cannot say. Leaves as in "
    'filters, plus {"$between": [low, high]}, {"$like": "pay%"} / {"$ilike": ...} (SQL '
    'patterns, strings only) and {"$exists": true}; nodes {"$and": [...]}, {"$or": [...]}, '
    '{"$not": {...}}. A field may be a relation path: "partOf.name" (an element this one is '
    'part of), "governedBy.status", "authoredBy.name", or "~governedBy.element_id" (over an '
    'incoming edge). Example: {"$or": [{"status": "accepted"}, {"partOf.name": "payments"}]}.'
)


class _Args(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SearchArgs(_Args):
    """Search the knowledge base with the default fusion of every retrieval leg."""

    query: str = Field(min_length=1, max_length=4000, description="What to look for.")
    limit: int = Field(default=5, ge=1, le=25, description="How many results (1-25).")
    filters: dict[str, FilterSpec] = Field(
        default_factory=dict[str, FilterSpec], description=_FILTERS_HELP
    )
    where: dict[str, Any] | None = Field(default=None, description=_WHERE_HELP)
    element_types: list[str] | None = Field(
        default=None,
        description="Only these searchable element types (see list_element_types).",
    )
    depth: int | None = Field(
        default=None,
        ge=0,
        le=2,
        description="Graph hops of context to attach to each result (0-2; default: chosen "
        "from the store's graph, 1 or 2).",
    )


class FindArgs(_Args):
    """List every element matching filters, in a stable order, without a query."""

    filters: dict[str, FilterSpec] = Field(
        default_factory=dict[str, FilterSpec], description=_FILTERS_HELP
    )
    where: dict[str, Any] | None = Field(default=None, description=_WHERE_HELP)
    order_by: str | None = Field(
        default=None,
        max_length=200,
        description='"timestamp", "-timestamp" (newest first), "name" or any field '
        "list_filter_fields names; ties by element_id (default: element_id).",
    )
    element_types: list[str] | None = Field(
        default=None,
        description="Only these searchable element types (see list_element_types).",
    )
    limit: int = Field(default=10, ge=1, le=25, description="How many per page (1-25).")
    depth: int = Field(
        default=1, ge=0, le=2, description="Graph hops of context to attach to each result (0-2)."
    )


class NextPageArgs(_Args):
    """The next page of an earlier search or find_elements."""

    query_id: str | None = Field(
        default=None, description="The search to continue (default: the most recent one)."
    )


class ReopenArgs(_Args):
    """A search saved in the store, by any conversation, answered again as it was."""

    saved_id: str = Field(
        min_length=1,
        max_length=64,
        description="The saved_id an earlier answer gave (kept 30 days), e.g. from a note "
        "of an earlier conversation.",
    )
    limit: int | None = Field(
        default=None, ge=1, le=25, description="How many per page (default: as it was asked)."
    )


class SemanticSearchArgs(SearchArgs):
    """Search by meaning only (dense embeddings; exact words do not matter)."""


class HybridSearchArgs(SearchArgs):
    """Search by meaning and by exact words, weighted."""

    text_weight: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Weight of exact-word (lexical) matching against meaning: 0 is meaning "
        "only, 1 is exact words only, 0.5 both equally.",
    )


class AutoSearchArgs(SearchArgs):
    """Search with a strategy chosen from the query itself."""


class RefineArgs(_Args):
    """Run an earlier search again with changes; the earlier one stays available."""

    query_id: str | None = Field(
        default=None, description="The search to refine (default: the most recent one)."
    )
    query: str | None = Field(
        default=None, min_length=1, max_length=4000, description="New query text, if any."
    )
    add_filters: dict[str, FilterSpec] = Field(
        default_factory=dict[str, FilterSpec],
        description="Filters to add or replace (same syntax as search filters).",
    )
    remove_filters: list[str] = Field(
        default_factory=list[str], description="Names of filters to drop."
    )
    where: dict[str, Any] | None = Field(
        default=None, description="Replace the filter tree ({} drops it); see search's where."
    )
    element_types: list[str] | None = Field(
        default=None, description="Replace the element types searched."
    )
    limit: int | None = Field(default=None, ge=1, le=25, description="Replace the limit.")
    depth: int | None = Field(default=None, ge=0, le=2, description="Replace the context depth.")


class GetResultArgs(_Args):
    """Fetch one result of an earlier search in full."""

    query_id: str = Field(description="The query_id a search returned.")
    rank: int = Field(ge=1, description="The result's rank in that search (1 is the best).")
    fields: list[str] | None = Field(
        default=None,
        max_length=64,
        description="Properties to read whole (e.g. ['text']), fetched again; ['*'] for all. "
        "Without it, long text is as the search returned it: clipped, with `truncated` "
        "giving the full lengths.",
    )


class ExpandArgs(_Args):
    """Show an element's graph neighbourhood."""

    element_id: str = Field(min_length=1, description="An element_id seen in earlier results.")
    depth: int = Field(default=2, ge=1, le=2, description="Graph hops (1-2).")


class ListFieldsArgs(_Args):
    """List the fields filters may use."""

    element_type: str | None = Field(
        default=None, description="Only the fields this element type has."
    )


class NoArgs(_Args):
    """No arguments."""


# -- what the tools return ------------------------------------------------------------------
class ContextRef(BaseModel):
    """A neighbour of a result in the graph: how it is linked, and what it is."""

    element_id: str
    element_type: str
    name: str | None
    relation: str
    direction: str = Field(
        description='"out": the result points at it; "in": it points at the result.'
    )
    depth: int


class Hit(BaseModel):
    """One result, compact."""

    rank: int
    element_id: str
    element_type: str
    name: str | None
    score: float
    snippet: str
    context: list[ContextRef] = Field(default_factory=list[ContextRef])
    more_context: int = Field(default=0, description="Context nodes left out here.")


class SearchAnswer(BaseModel):
    """The answer to one search, with the id to refer back to it."""

    query_id: str
    query: str | None
    strategy: Strategy
    text_weight: float | None = None
    reason: str
    weights: dict[str, float]
    filters: dict[str, FilterSpec] = Field(default_factory=dict[str, FilterSpec])
    where: dict[str, Any] | None = None
    order_by: str | None = None
    element_types: list[str] | None = None
    depth: int | None = Field(description="Graph hops asked for (None: the automatic mode's).")
    refined_from: str | None = None
    page: int = Field(default=1, description="1 for a first page; next_page counts on.")
    more: bool = Field(default=False, description="Whether next_page has more to show.")
    saved_id: str | None = Field(
        default=None,
        description="The search's id in the store: reopen_query answers it again, as it was, "
        "in this or any later conversation (kept 30 days).",
    )
    degraded: list[str] = Field(
        default_factory=list[str],
        description="Backends this answer was made without (they failed or were too slow), "
        "and what is missing because of it; empty for a full answer.",
    )
    hits: list[Hit]
    note: str | None = None


class LegRank(BaseModel):
    """One retrieval leg's rank and contribution to a result's fused score."""

    rank: int | None
    contribution: float


class ContextNode(ContextRef):
    """A neighbour with its properties."""

    properties: dict[str, Any] = Field(default_factory=dict[str, Any])


class ResultDetail(BaseModel):
    """One result of an earlier search in full."""

    query_id: str
    rank: int
    element_id: str
    element_type: str
    name: str | None
    score: float
    snippet: str
    properties: dict[str, Any]
    context: list[ContextNode]
    legs: dict[str, LegRank]
    linked_to: list[str] = Field(
        default_factory=list[str],
        description="Names of graph nodes the query names (a SIG, a component, a title) that "
        "this result is or is one edge from: why its `entity` leg ranked it.",
    )
    truncated: dict[str, int] = Field(
        default_factory=dict[str, int],
        description="Properties shown clipped, with their full length in characters; ask "
        "get_result again with `fields` to read them whole.",
    )


class Mention(BaseModel):
    """Where an element appeared as context of an earlier result."""

    query_id: str
    rank: int
    element_id: str
    name: str | None
    relation: str
    direction: str


class ExpandAnswer(BaseModel):
    """An element and its neighbourhood, as far as the caller may see."""

    element_id: str
    found: bool
    element_type: str | None = None
    name: str | None = None
    snippet: str | None = None
    context: list[ContextRef] = Field(default_factory=list[ContextRef])
    mentioned_in: list[Mention] = Field(default_factory=list[Mention])
    note: str | None = None


class QuerySummary(BaseModel):
    """One earlier search."""

    query_id: str
    query: str | None
    strategy: Strategy
    filters: dict[str, FilterSpec]
    hits: int
    refined_from: str | None


class QueryHistory(BaseModel):
    """The searches of this conversation, oldest first."""

    current: str | None
    queries: list[QuerySummary]


class ElementTypeInfo(BaseModel):
    """One element type of the ontology."""

    name: str
    searchable: bool = Field(description="Whether searches return it (else it is context only).")
    description: str
    fields: list[str]
    relations_out: list[str]


class ElementTypesAnswer(BaseModel):
    """Every element type."""

    element_types: list[ElementTypeInfo]


class RelationInfo(BaseModel):
    """One relation type: which element types it links."""

    name: str
    sources: list[str]
    targets: list[str]
    description: str


class RelationsAnswer(BaseModel):
    """Every relation type."""

    relations: list[RelationInfo]


class FilterField(BaseModel):
    """A field filters may use."""

    name: str
    type: str
    values: list[str] | None = Field(default=None, description="The allowed values, if fixed.")
    operators: list[str]
    element_types: list[str] = Field(description="Element types that have this field.")


class FilterFieldsAnswer(BaseModel):
    """The fields filters may use, and the filter syntax."""

    fields: list[FilterField]
    syntax: str
