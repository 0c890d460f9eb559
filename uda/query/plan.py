"""The plan: a request resolved against the profile's connectors, as a printable value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from connectors.contract.filter_tree import AllOf, FilterNode, describe, pushdown, to_json
from connectors.contract.records import SearchFilter
from connectors.contract.selection import StateOrder
from ontology import element_class, element_types, knowledge_asset_types, relation_spec
from ontology import relation_types as known_relations
from uda.config import SearchDefaults
from uda.errors import UnknownElementTypeError, UnknownRelationError
from uda.hlc import from_datetime, physical_ms, wall_clock_ms
from uda.query.auto.choice import AutoChoice, leg_weight_overrides
from uda.query.clearance import Clearance
from uda.query.contracts import Centrality, SearchRequest, Traverse
from uda.query.deadlines import DEFAULT_SEARCH_TIMEOUT_S, Degradation
from uda.query.filters import parse_filters
from uda.query.fusion import Leg, RelevanceFusion
from uda.query.ordering import describe_order, parse_order
from uda.query.projection import Projection

_MATCH_ALL = AllOf(children=())


@dataclass(frozen=True, kw_only=True)
class Plan:
    """Everything the phases need, decided up front; `describe()` prints it."""

    request: SearchRequest
    clearance: Clearance
    filter: FilterNode
    pushdown: SearchFilter
    element_types: tuple[str, ...]
    pool_size: int
    expand_depth: int
    relations: tuple[str, ...] | None
    as_of: int | None
    as_of_ms: int
    weights: Mapping[Leg, float]
    decay: bool
    half_life_days: float
    decay_floor: float
    centrality: Centrality
    graph_candidates: bool
    traverse: Traverse
    max_context_nodes: int
    projection: Projection = field(default_factory=Projection)  # what each result carries
    auto: AutoChoice  # the automatic mode, for what the request and the profile left unset
    relevance: RelevanceFusion = "ranks"  # how the semantic and lexical legs meet
    order: StateOrder | None = None  # structured retrieval (no query): the rows' order
    vector_connectors: tuple[str, ...] = ()
    text_connectors: tuple[str, ...] = ()
    graph_connectors: tuple[str, ...] = ()
    system_of_record: str = ""
    timings_ms: dict[str, float] = field(default_factory=dict[str, float], compare=False)
    search_timeout_s: float = DEFAULT_SEARCH_TIMEOUT_S
    # Backends left out of this answer (a failure or a missed deadline), filled as it runs.
    degraded: list[Degradation] = field(default_factory=list[Degradation], compare=False)

    def describe(self) -> str:
        """A readable account of the plan."""

        def legs(names: tuple[str, ...]) -> str:
            return ", ".join(names) or "none"

        as_of = "now" if self.as_of is None else f"HLC {self.as_of}"
        filters = describe(self.filter) if self.filter != _MATCH_ALL else ""
        if self.order is None:
            asked = f"query: {self.request.query!r}"
        else:
            asked = f"structured: order by {describe_order(self.order)}"
        lines = [
            f"{asked}  limit={self.request.limit}  as_of={as_of}",
            f"clearance: {', '.join(self.clearance.entries())}",
            f"filters: {filters or 'none'}  element types: {', '.join(self.element_types)}",
            (
                f"phase 1 dense: {legs(self.vector_connectors)} (pool {self.pool_size}); "
                f"lexical: {legs(self.text_connectors)}"
                if self.order is None
                else f"select: {self.system_of_record} (keyset pages)"
            )
            + "; pushdown: clearance, validity"
            + (", filters" if self.pushdown.predicates or self.pushdown.tree else ""),
            f"phase 2 graph: {legs(self.graph_connectors)} depth={self.expand_depth} "
            f"traverse={self.traverse} "
            f"relations={', '.join(self.relations) if self.relations else 'all'} "
            f"centrality={self.centrality}",
            f"phase 3 relational: {self.system_of_record}; decay="
            + (
                f"half-life {self.half_life_days:g} d, floor {self.decay_floor:g}"
                if self.decay
                else "off"
            )
            + "; weights "
            + ", ".join(f"{leg.value}={w:g}" for leg, w in self.weights.items())
            + (
                "; semantic and lexical fused by score (z-scores), then by rank"
                if self.relevance == "scores"
                else "; fused by rank"
            ),
            f"auto: {self.auto.mode} mode ({self.auto.reason})"
            + (
                f"; PageRank weight {self.auto.tuned_weight:g} tuned on this store (`uda tune`)"
                if self.auto.tuned_weight is not None
                else ""
            )
            + "; the request's options win",
        ]
        for degradation in self.degraded:
            lines.append(f"degraded: {degradation.describe()}")
        if self.timings_ms:
            lines.append(
                "timings: " + ", ".join(f"{k} {v:.1f} ms" for k, v in self.timings_ms.items())
            )
        return "\n".join(lines)

    @property
    def backward_hops(self) -> int | None:
        """Leading hops in which expansion also walks edges backwards (None: every hop)."""
        return 1 if self.traverse == "context" else None

    def to_dict(self) -> dict[str, Any]:
        """The plan as plain data (for logs, explain output and persistence)."""
        return {
            "request": self.request.model_dump(mode="json"),
            "clearance": self.clearance.entries(),
            "filters": to_json(self.filter),
            "element_types": list(self.element_types),
            "pool_size": self.pool_size,
            "expand_depth": self.expand_depth,
            "relations": None if self.relations is None else list(self.relations),
            "as_of": self.as_of,
            "weights": {leg.value: w for leg, w in self.weights.items()},
            "decay": self.decay,
            "half_life_days": self.half_life_days,
            "decay_floor": self.decay_floor,
            "centrality": self.centrality,
            "graph_candidates": self.graph_candidates,
            "traverse": self.traverse,
            "relevance": self.relevance,
            "auto": self.auto.to_dict(),
            "order_by": None if self.order is None else describe_order(self.order),
            "connectors": {
                "vector": list(self.vector_connectors),
                "text": list(self.text_connectors),
                "graph": list(self.graph_connectors),
                "system_of_record": self.system_of_record,
            },
            "timings_ms": dict(self.timings_ms),
            "degraded": [d.to_dict() for d in self.degraded],
        }


def make_plan(
    request: SearchRequest,
    defaults: SearchDefaults,
    *,
    vector: tuple[str, ...],
    text: tuple[str, ...],
    graph: tuple[str, ...],
    system_of_record: str,
    auto: AutoChoice,
) -> Plan:
    """Resolve a validated request: clearance, filters, types, relations, time and weights.

    Graph settings the request leaves unset are `auto`'s, and so is the centrality weight
    unless the request or the profile's `[search.weights]` gives one.

    Raises:
        UnknownClearanceError, UnknownFilterFieldError, UnknownElementTypeError,
        UnknownRelationError: naming the offending field and value.
    """
    clearance = Clearance.parse(request.clearance_scope)
    tree = parse_filters(request.context_filters)
    searchable = knowledge_asset_types()
    types = tuple(searchable)
    if request.element_types is not None:
        for name in request.element_types:
            cls = element_class(name)
            if cls is None or not cls.knowledge_asset:
                known = ", ".join(searchable) if cls is not None else ", ".join(element_types())
                raise UnknownElementTypeError(
                    f"element_types: {name!r} is not a searchable element type; use {known}",
                    field="element_types",
                    value=name,
                )
        types = tuple(sorted(set(request.element_types)))
    relations: tuple[str, ...] | None = None
    if request.relations is not None:
        for name in request.relations:
            if relation_spec(name) is None:
                raise UnknownRelationError(
                    f"relations: unknown relation {name!r}; known: {', '.join(known_relations())}",
                    field="relations",
                    value=name,
                )
        relations = tuple(request.relations)
    as_of = from_datetime(request.as_of) if isinstance(request.as_of, datetime) else request.as_of
    weights = dict(defaults.weights)
    weights.update(
        {leg: w for leg, w in leg_weight_overrides(auto).items() if leg not in defaults.pinned}
    )
    weights.update(request.weights or {})
    mode = auto.settings
    return Plan(
        request=request,
        clearance=clearance,
        filter=tree,
        pushdown=SearchFilter(
            max_sensitivity_rank=clearance.level.rank,
            projects=tuple(sorted(clearance.projects)),
            all_projects=clearance.all_projects,
            as_of=as_of,
            element_types=types,
            predicates=pushdown(tree),
            tree=tree,  # held as its own-values bound (SearchFilter.__post_init__)
        ),
        element_types=types,
        pool_size=request.pool_size or max(10 * request.limit, 50),
        expand_depth=mode.expand_depth if request.expand_depth is None else request.expand_depth,
        relations=relations,
        as_of=as_of,
        as_of_ms=physical_ms(as_of) if as_of is not None else wall_clock_ms(),
        weights=weights,
        decay=request.decay,
        half_life_days=request.half_life or defaults.half_life_days,
        decay_floor=defaults.decay_floor if request.decay_floor is None else request.decay_floor,
        centrality=mode.centrality if request.centrality is None else request.centrality,
        graph_candidates=(
            mode.graph_candidates if request.graph_candidates is None else request.graph_candidates
        ),
        traverse=mode.traverse if request.traverse is None else request.traverse,
        auto=auto,
        relevance=mode.relevance,
        max_context_nodes=defaults.max_context_nodes,
        projection=Projection.of(
            request.fields,
            clip_chars=defaults.clip_chars,
            context_clip_chars=defaults.context_clip_chars,
        ),
        search_timeout_s=request.timeout or defaults.deadlines.search_s,
        order=None if request.query is not None else parse_order(request.order_by),
        vector_connectors=vector,
        text_connectors=text,
        graph_connectors=graph,
        system_of_record=system_of_record,
    )
