"""Stored states as rows of `ontology.result_schema()`, in Python values.

The one place where a stored payload becomes result fields: its typed properties (the
`properties` struct), its string extras, and the element its payload validates into. Ranked
results (`ranked_rows`, what phase 3 produced) and an unranked element with its context
(`element_row`, what an element lookup shows) are built by the same code. Fields are cached
by exact payload text (ADR 19), and within one response each element state is read once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from enum import Enum
from typing import Any

import pyarrow as pa

from connectors.contract.system_of_record import LazyJSON, StoredState
from ontology import Element, Sensitivity, element_class, result_schema
from ontology.arrow import BASE_FIELDS, property_names
from uda.query.exact import ExactMatch
from uda.query.fusion import Leg
from uda.query.graph_context import ContextHop
from uda.query.projection import Projection

_LEVELS = list(Sensitivity)

StateKey = tuple[str, int]
"""An element state within one response: element id and version."""

Context = Sequence[tuple[ContextHop, StoredState]]
"""Context nodes of a result: how each was reached, and its state."""


@dataclass(frozen=True, kw_only=True)
class RankedResult:
    """A result as phase 3 produced it, with every leg's evidence for `explain()`."""

    state: StoredState
    score: float
    snippet: str
    decay: float
    semantic_raw: float | None
    lexical_raw: float | None
    semantic_score: float | None
    lexical_score: float | None
    centrality: float
    ranks: Mapping[Leg, int]
    contributions: Mapping[Leg, float]
    context: Context = field(default_factory=list[tuple[ContextHop, StoredState]])
    exact: ExactMatch | None = None  # how it matches the query perfectly (uda.query.exact)
    boost: float = 0.0  # what that added to its fused score
    entities: tuple[str, ...] = ()  # names of the graph nodes the query names it is linked to


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


Fields = tuple[dict[str, Any], dict[str, str], Element | None]
"""Typed properties, string extras, and the validated payload (None: type not registered)."""

FrozenFields = tuple[tuple[tuple[str, Any], ...], tuple[tuple[str, str], ...], Element | None, int]
"""Fields as the cache keeps them, with the length of their longest string."""


def _longest(properties: Mapping[str, Any], extras: Mapping[str, str]) -> int:
    """The length of the longest string among a state's properties and extras.

    A projection clips only strings longer than its limit, so a state whose longest string
    is within it leaves every context node it appears as untouched: the check is one
    comparison, not a walk over the fields for each occurrence.
    """
    lengths = [len(v) for v in properties.values() if isinstance(v, str)]
    lengths += [len(v) for v in extras.values()]
    return max(lengths, default=0)


def _split_fields(state: StoredState) -> Fields:
    """Typed properties (the struct), string extras and the element of a stored state."""
    cls = element_class(state.element_type)
    payload = dict(state.payload)
    payload.pop("element_type", None)
    element = cls.model_validate(payload) if cls is not None else None
    struct_names = property_names()
    properties: dict[str, Any] = dict.fromkeys(struct_names)
    extras: dict[str, str] = dict(payload.get("extras") or {})
    if element is not None:
        for name in type(element).model_fields:
            if name in BASE_FIELDS:
                continue
            value = _plain(getattr(element, name))
            if name in struct_names:
                properties[name] = value
            elif value is not None:
                extras[name] = str(value)  # a user subclass's own field
    return properties, extras, element


class _FieldsCache:
    """`_split_fields` of recent payloads, by element type and exact stored JSON text.

    Fields are a pure function of the payload, so identical text gives identical fields,
    whichever store, caller or version it came from: nothing can be served stale or to the
    wrong caller (visibility is decided before a state is hydrated). The same repositories,
    decisions and authors are context nodes of search after search; validating their
    payloads again each time was the largest part of building results. Entries are kept as
    tuples so that no response can change what the next one gets; the validated element is
    never handed out itself, only copies of it (`_typed`).
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[str, str], FrozenFields] = OrderedDict()
        self._lock = threading.Lock()  # responses are built on several threads (HTTP)

    def fields(
        self, state: StoredState
    ) -> tuple[dict[str, Any], dict[str, str], Element | None, int]:
        """A state's fields (copies: the caller may change them) and their longest string."""
        payload = state.payload
        if not isinstance(payload, LazyJSON):
            properties, extras, element = _split_fields(state)
            return properties, extras, element, _longest(properties, extras)
        key = (state.element_type, payload.text)
        with self._lock:
            frozen = self._entries.get(key)
            if frozen is not None:
                self._entries.move_to_end(key)
        if frozen is None:
            properties, extras, element = _split_fields(state)
            frozen = (
                tuple(properties.items()),
                tuple(extras.items()),
                element,
                _longest(properties, extras),
            )
            with self._lock:
                self._entries[key] = frozen
                if len(self._entries) > self._size:
                    self._entries.popitem(last=False)
        return dict(frozen[0]), dict(frozen[1]), frozen[2], frozen[3]


_FIELDS = _FieldsCache(size=4096)

# Field values a copy of an element may share with the cached one: none can be changed.
_SHAREABLE = (str, int, float, date, Enum)


def _timestamp(state: StoredState) -> datetime:
    return datetime.fromtimestamp(state.timestamp_ms / 1000, tz=UTC)


def _typed(state: StoredState, element: Element) -> Element | None:
    """The typed element of a state's row, from its validated payload, without validating.

    Equal to what `model_validate` makes of the row (uda.query.results): the state's own
    columns replace the payload's (the payload has no `hlc` or `version`), and a property
    that is None is left to its default, as the row leaves it out. None when that cannot be
    promised cheaply: the type was registered again since the payload was validated, or a
    value could be changed in place and so must not be shared with the cache.
    """
    cls = type(element)
    if element_class(state.element_type) is not cls:
        return None
    values: dict[str, Any] = {}
    for name, value in element.__dict__.items():
        if name in BASE_FIELDS or value is None:
            continue
        if not isinstance(value, _SHAREABLE):
            return None
        values[name] = value
    return cls.model_construct(
        element_id=state.element_id,
        name=state.name,
        sensitivity=_LEVELS[state.sensitivity_rank],
        scope=state.scope,
        timestamp=_timestamp(state),
        extras=dict(element.extras),
        hlc=state.hlc,
        version=state.version,
        **values,
    )


def _node_common(state: StoredState) -> dict[str, Any]:
    return {
        "sensitivity": _LEVELS[state.sensitivity_rank].value,
        "scope": state.scope,
        "timestamp": _timestamp(state),
        "hlc": state.hlc,
        "version": state.version,
    }


def _ranking(result: RankedResult) -> dict[str, Any]:
    return {
        "score": result.score,
        "semantic_score": result.semantic_score,
        "lexical_score": result.lexical_score,
        "centrality": result.centrality,
        "decay": result.decay,
        "semantic_rank": result.ranks.get(Leg.SEMANTIC),
        "lexical_rank": result.ranks.get(Leg.LEXICAL),
        "centrality_rank": result.ranks.get(Leg.CENTRALITY),
        "entity_rank": result.ranks.get(Leg.ENTITY),
        "snippet": result.snippet,
    }


# The ranking columns of an element no search ranked (an element lookup): no leg, no decay.
_UNRANKED: Mapping[str, Any] = {
    "score": 0.0,
    "semantic_score": None,
    "lexical_score": None,
    "centrality": 0.0,
    "decay": 1.0,
    "semantic_rank": None,
    "lexical_rank": None,
    "centrality_rank": None,
    "entity_rank": None,
    "snippet": "",
}


@dataclass(slots=True)
class _Seen:
    state: StoredState
    properties: dict[str, Any]
    extras: dict[str, str]
    element: Element | None
    longest: int  # the longest string among properties and extras, in characters


class Rows:
    """Builds the rows of one response; each element state's fields are made once.

    At depth 2 the same repository, decision or author is a context node of many results
    (about 25 context nodes per result, a few dozen distinct, in the synthetic benchmark);
    validating each occurrence was most of the cost of building the results. What was
    validated for a row is kept, so that `elements()` need not validate it again.
    """

    def __init__(self, projection: Projection | None = None) -> None:
        self._seen: dict[StateKey, _Seen] = {}
        # None: whole (an element lookup); a search answer clips as its plan says.
        self._projection = projection
        self._clipped: set[StateKey] = set()

    def ranked(self, result: RankedResult) -> dict[str, Any]:
        """A ranked result as a row of the result schema."""
        return self._row(result.state, result.context, _ranking(result))

    def element(self, state: StoredState, context: Context) -> dict[str, Any]:
        """An element no search ranked, with its context, as a row of the result schema."""
        return self._row(state, context, _UNRANKED)

    def elements(self) -> dict[StateKey, Element]:
        """Typed elements of every state in the rows so far, from what they validated.

        Without the states whose payload could not be used (see `_typed`) and those the
        answer clipped somewhere (their rows hold less than the payload); the caller
        validates those from their rows. Each element is new: callers may attach context.
        """
        typed: dict[StateKey, Element] = {}
        for key, seen in self._seen.items():
            if key in self._clipped:
                continue
            element = None if seen.element is None else _typed(seen.state, seen.element)
            if element is not None:
                typed[key] = element
        return typed

    def _fields(self, state: StoredState) -> _Seen:
        key = (state.element_id, state.version)
        seen = self._seen.get(key)
        if seen is None:
            seen = self._seen[key] = _Seen(state, *_FIELDS.fields(state))
        return seen

    def _row(
        self, state: StoredState, context: Context, ranking: Mapping[str, Any]
    ) -> dict[str, Any]:
        own = self._fields(state)
        projection = self._projection
        properties, extras, snippet = own.properties, own.extras, ranking["snippet"]
        offset = passage_offset(properties.get("text"), snippet)
        truncated: dict[str, int] = {}
        if projection is not None:
            properties, extras, snippet, truncated = projection.own(properties, extras, snippet)
            if truncated.keys() - {"snippet"}:
                self._clipped.add((state.element_id, state.version))
        nodes: list[dict[str, Any]] = []
        for index, (hop, node) in enumerate(context):
            fields = self._fields(node)
            node_properties, node_extras = fields.properties, fields.extras
            if projection is not None and fields.longest > projection.context_clip_chars:
                node_properties, node_extras, clipped = projection.node(
                    node_properties, node_extras, index
                )
                if clipped:
                    truncated.update(clipped)
                    self._clipped.add((node.element_id, node.version))
            nodes.append(
                {
                    "element_id": node.element_id,
                    "element_type": node.element_type,
                    "name": node.name,
                    "relation": hop.relation,
                    "direction": hop.direction,
                    "depth": hop.depth,
                    "via": hop.via,
                    **_node_common(node),
                    "properties": node_properties,
                    "extras": list(node_extras.items()),
                }
            )
        return {
            "element_id": state.element_id,
            "element_type": state.element_type,
            **ranking,
            "snippet": snippet,
            "name": state.name,
            **_node_common(state),
            "properties": properties,
            "extras": list(extras.items()),
            "context_nodes": nodes,
            "truncated": list(truncated.items()),
            "snippet_offset": offset,
        }


def passage_offset(text: object, passage: str | None) -> int | None:
    """Where `passage` (a chunk) starts in `text`, in characters; None when not found.

    A chunk is the text's own words, but the chunker joins a long paragraph's pieces with
    single spaces: when the whole chunk is not found verbatim, its opening is looked for.
    """
    if not isinstance(text, str) or not passage:
        return None
    found = text.find(passage)
    if found < 0:
        found = text.find(passage[:_OPENING])
    return found if found >= 0 else None


_OPENING = 48  # characters: enough to be unique in a document, short enough to be verbatim


def ranked_rows(
    ranked: Sequence[RankedResult], projection: Projection | None = None
) -> list[dict[str, Any]]:
    """Ranked results as rows of `ontology.result_schema()`, in Python values."""
    rows = Rows(projection)
    return [rows.ranked(r) for r in ranked]


def element_row(state: StoredState, context: Context) -> dict[str, Any]:
    """One element with its context as a row of `ontology.result_schema()`, unranked."""
    return Rows().element(state, context)


def record_batch(rows: Sequence[Mapping[str, Any]]) -> pa.RecordBatch:
    """Rows as one record batch in `ontology.result_schema()`."""
    # One batch: results are bounded by `limit`, and one batch keeps one dictionary per
    # dictionary column, which IPC files require.
    return pa.RecordBatch.from_pylist(list(rows), schema=result_schema())
