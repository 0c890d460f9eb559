"""Search results: Arrow record batches first, everything else wraps them.

`to_batches()` is the one primitive; `to_arrow()`, `results`, `to_elements()` and
`to_pandas()` are views of it (the LanceDB pattern). The schema is `ontology.result_schema()`.
`ResultViews` holds those views, so that a response computed here (`SearchResponse`) and one
rebuilt from an Arrow table that crossed a wire (`ArrowResponse`) behave the same.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from connectors.contract.system_of_record import LazyJSON, StoredState
from ontology import Element, Sensitivity, element_class, result_schema
from ontology.arrow import BASE_FIELDS, property_names
from ontology.elements import ContextLink
from uda.query.contracts import SearchResult
from uda.query.explanation import Explanation, LegExplanation, ResultExplanation
from uda.query.fusion import Leg
from uda.query.graph_context import ContextHop

if TYPE_CHECKING:
    from uda.query.plan import Plan

_LEVELS = list(Sensitivity)


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
    context: Sequence[tuple[ContextHop, StoredState]] = field(
        default_factory=list[tuple[ContextHop, StoredState]]
    )


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


Fields = tuple[dict[str, Any], dict[str, str]]


def _split_fields(state: StoredState) -> Fields:
    """Typed properties (the struct) and string extras of a stored state."""
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
    return properties, extras


class _FieldsCache:
    """`_split_fields` of recent payloads, by element type and exact stored JSON text.

    Fields are a pure function of the payload, so identical text gives identical fields,
    whichever store, caller or version it came from: nothing can be served stale or to the
    wrong caller (visibility is decided before a state is hydrated). The same repositories,
    decisions and authors are context nodes of search after search; validating their
    payloads again each time was the largest part of building results. Entries are kept as
    tuples so that no response can change what the next one gets.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[str, str], tuple[FrozenFields, FrozenFields]]
        self._entries = OrderedDict()
        self._lock = threading.Lock()  # responses are built on several threads (HTTP)

    def fields(self, state: StoredState) -> Fields:
        payload = state.payload
        if not isinstance(payload, LazyJSON):
            return _split_fields(state)
        key = (state.element_type, payload.text)
        with self._lock:
            frozen = self._entries.get(key)
            if frozen is not None:
                self._entries.move_to_end(key)
        if frozen is None:
            properties, extras = _split_fields(state)
            frozen = (tuple(properties.items()), tuple(extras.items()))
            with self._lock:
                self._entries[key] = frozen
                if len(self._entries) > self._size:
                    self._entries.popitem(last=False)
        return dict(frozen[0]), dict(frozen[1])


FrozenFields = tuple[tuple[str, Any], ...]
_FIELDS = _FieldsCache(size=4096)


def _fields_once(state: StoredState, seen: dict[tuple[str, int], Fields]) -> Fields:
    """The fields of a state, once per element state of a response.

    At depth 2 the same repository, decision or author is a context node of many results
    (about 25 context nodes per result, a few dozen distinct, in the synthetic benchmark);
    validating each occurrence was most of the cost of building the results.
    """
    key = (state.element_id, state.version)
    fields = seen.get(key)
    if fields is None:
        fields = seen[key] = _FIELDS.fields(state)
    return fields


def _node_common(state: StoredState) -> dict[str, Any]:
    return {
        "sensitivity": _LEVELS[state.sensitivity_rank].value,
        "scope": state.scope,
        "timestamp": datetime.fromtimestamp(state.timestamp_ms / 1000, tz=UTC),
        "hlc": state.hlc,
        "version": state.version,
    }


def _row(result: RankedResult, seen: dict[tuple[str, int], Fields]) -> dict[str, Any]:
    state = result.state
    properties, extras = _fields_once(state, seen)
    context: list[dict[str, Any]] = []
    for hop, node in result.context:
        node_props, node_extras = _fields_once(node, seen)
        context.append(
            {
                "element_id": node.element_id,
                "element_type": node.element_type,
                "name": node.name,
                "relation": hop.relation,
                "direction": hop.direction,
                "depth": hop.depth,
                "via": hop.via,
                **_node_common(node),
                "properties": node_props,
                "extras": list(node_extras.items()),
            }
        )
    return {
        "element_id": state.element_id,
        "element_type": state.element_type,
        "score": result.score,
        "semantic_score": result.semantic_score,
        "lexical_score": result.lexical_score,
        "centrality": result.centrality,
        "decay": result.decay,
        "semantic_rank": result.ranks.get(Leg.SEMANTIC),
        "lexical_rank": result.ranks.get(Leg.LEXICAL),
        "centrality_rank": result.ranks.get(Leg.CENTRALITY),
        "name": state.name,
        "snippet": result.snippet,
        **_node_common(state),
        "properties": properties,
        "extras": list(extras.items()),
        "context_nodes": context,
    }


def _element_from(row: Mapping[str, Any]) -> Element:
    cls = element_class(str(row["element_type"]))
    if cls is None:
        raise TypeError(f"element type {row['element_type']!r} is not registered here")
    data: dict[str, Any] = {
        "element_id": row["element_id"],
        "name": row["name"],
        "sensitivity": row["sensitivity"],
        "scope": row["scope"],
        "timestamp": row["timestamp"],
        "hlc": row["hlc"],
        "version": row["version"],
    }
    declared = set(cls.model_fields)
    properties: dict[str, Any] = row.get("properties") or {}
    for key, value in properties.items():
        if key in declared and value is not None:
            data[key] = value
    extras: dict[str, str] = {}
    pairs: list[tuple[str, str]] = row.get("extras") or []
    for key, value in pairs:
        if key in declared:
            data[key] = value
        else:
            extras[key] = value
    data["extras"] = extras
    return cls.model_validate(data)


def ranked_rows(ranked: Sequence[RankedResult]) -> list[dict[str, Any]]:
    """Ranked results as rows of `ontology.result_schema()`, in Python values."""
    seen: dict[tuple[str, int], Fields] = {}
    return [_row(r, seen) for r in ranked]


def ranked_batch(ranked: Sequence[RankedResult]) -> pa.RecordBatch:
    """Ranked results as one record batch in `ontology.result_schema()`."""
    return _batch(ranked_rows(ranked))


def _batch(rows: Sequence[Mapping[str, Any]]) -> pa.RecordBatch:
    # One batch: results are bounded by `limit`, and one batch keeps one dictionary per
    # dictionary column, which IPC files require.
    return pa.RecordBatch.from_pylist(list(rows), schema=result_schema())


def search_result(
    row: Mapping[str, Any], seen: dict[tuple[str, int], dict[str, Any]] | None = None
) -> SearchResult:
    """One row of the result schema (as `to_pylist()` gives it) as a `SearchResult`.

    `seen` shares the flattened properties of context nodes between the rows of one
    response (a context node's properties do not depend on the result it hangs off).
    """
    memo: dict[tuple[str, int], dict[str, Any]] = {} if seen is None else seen

    def node_properties(node: Mapping[str, Any]) -> dict[str, Any]:
        key = (node["element_id"], node["version"])
        flat = memo.get(key)
        if flat is None:
            flat = memo[key] = _flat_properties(node)
        return dict(flat)

    return SearchResult(
        element_id=row["element_id"],
        element_type=row["element_type"],
        score=row["score"],
        name=row["name"],
        snippet=row["snippet"],
        properties=_flat_properties(row),
        context_nodes=[
            {
                "element_id": n["element_id"],
                "element_type": n["element_type"],
                "name": n["name"],
                "relation": n["relation"],
                "direction": n["direction"],
                "depth": n["depth"],
                "via": n["via"],
                "properties": node_properties(n),
            }
            for n in row["context_nodes"]
        ],
    )


def typed_element(row: Mapping[str, Any]) -> Element:
    """One row of the result schema as a typed element with its context attached."""
    links = [
        ContextLink(
            relation=n["relation"],
            direction=n["direction"],
            depth=n["depth"],
            element=_element_from(n),
        )
        for n in row["context_nodes"]
    ]
    return _element_from(row).with_context(links)


class ResultViews(ABC):
    """Every view of a response, derived from its one primitive, `to_batches()`."""

    @abstractmethod
    def to_batches(self) -> pa.RecordBatchReader:
        """The results as Arrow record batches in `ontology.result_schema()`."""

    @abstractmethod
    def explain(self) -> Explanation:
        """The plan and each leg's raw score, decayed score, rank and contribution."""

    def __len__(self) -> int:
        return len(self._rows)

    def to_arrow(self) -> pa.Table:
        """The results as one Arrow table."""
        return self.to_batches().read_all()

    @cached_property
    def _rows(self) -> list[dict[str, Any]]:
        return self.to_arrow().to_pylist()

    @property
    def results(self) -> list[SearchResult]:
        """The results as `SearchResult` models, best first."""
        seen: dict[tuple[str, int], dict[str, Any]] = {}
        return [search_result(row, seen) for row in self._rows]

    def to_elements(self) -> list[Element]:
        """Typed ontology objects with their context attached (`doc.repository.name`)."""
        return [typed_element(row) for row in self._rows]

    def to_pandas(self) -> Any:
        """The results as a pandas DataFrame (needs pandas)."""
        table: Any = self.to_arrow()
        return table.to_pandas()

    def __repr__(self) -> str:
        names = ", ".join(str(row["name"]) for row in self._rows[:3])
        more = "" if len(self._rows) <= 3 else ", ..."
        return f"{type(self).__name__}({len(self._rows)} results: {names}{more})"


class SearchResponse(ResultViews):
    """The answer to one search, as the planner produced it."""

    def __init__(self, *, plan: Plan, ranked: Sequence[RankedResult]) -> None:
        self.plan = plan
        self._ranked = list(ranked)

    def __len__(self) -> int:
        return len(self._ranked)

    def to_batches(self) -> pa.RecordBatchReader:
        """The results as Arrow record batches in `ontology.result_schema()`."""
        return pa.RecordBatchReader.from_batches(result_schema(), [_batch(self._rows)])

    @cached_property
    def _rows(self) -> list[dict[str, Any]]:
        # The rows the Arrow batch is built from, used as they are: `results` and
        # `to_elements()` need no Arrow round trip (it was most of their cost), and
        # tests/test_arrow_schema.py checks both views equal those of the table.
        return ranked_rows(self._ranked)

    def explain(self) -> Explanation:
        """The plan and each leg's raw score, decayed score, rank and contribution."""
        results: list[ResultExplanation] = []
        for r in self._ranked:
            raws = {
                Leg.SEMANTIC: r.semantic_raw,
                Leg.LEXICAL: r.lexical_raw,
                Leg.CENTRALITY: r.centrality,
            }
            scored = {
                Leg.SEMANTIC: r.semantic_score,
                Leg.LEXICAL: r.lexical_score,
                Leg.CENTRALITY: r.centrality,
            }
            results.append(
                ResultExplanation(
                    element_id=r.state.element_id,
                    name=r.state.name,
                    score=r.score,
                    decay=r.decay,
                    legs={
                        leg: LegExplanation(
                            raw=raws[leg] if leg is not Leg.CENTRALITY else None,
                            score=scored[leg],
                            rank=r.ranks.get(leg),
                            weight=self.plan.weights.get(leg, 0.0),
                            contribution=r.contributions.get(leg, 0.0),
                        )
                        for leg in Leg
                    },
                )
            )
        return Explanation(plan=self.plan, results=results)

    def __repr__(self) -> str:
        names = ", ".join(r.state.name for r in self._ranked[:3])
        more = "" if len(self._ranked) <= 3 else ", ..."
        return f"SearchResponse({len(self._ranked)} results: {names}{more})"


class ArrowResponse(ResultViews):
    """A response rebuilt from a result table (and the explanation sent along with it).

    Args:
        table: results in `ontology.result_schema()`, best first.
        explanation: `Explanation.to_dict()` output, or None when none came with the table.
    """

    def __init__(self, table: pa.Table, explanation: Mapping[str, Any] | None = None) -> None:
        self._table = table
        self._explanation = explanation

    def to_batches(self) -> pa.RecordBatchReader:
        """The results as Arrow record batches in `ontology.result_schema()`."""
        return pa.RecordBatchReader.from_batches(self._table.schema, self._table.to_batches())

    def to_arrow(self) -> pa.Table:
        """The results as one Arrow table."""
        return self._table

    @cached_property
    def _explained(self) -> Explanation:
        if self._explanation is None:
            raise ValueError("this response came without an explanation")
        return Explanation.from_dict(self._explanation)

    @property
    def plan(self) -> Plan:
        """The plan the search ran with (as the side that ran it recorded it)."""
        return self._explained.plan

    def explain(self) -> Explanation:
        """The plan and each leg's raw score, decayed score, rank and contribution."""
        return self._explained


def _flat_properties(row: Mapping[str, Any]) -> dict[str, Any]:
    """Declared, non-null properties plus common columns and extras, as one dict."""
    props: dict[str, Any] = {
        "name": row["name"],
        "sensitivity": row["sensitivity"],
        "scope": row["scope"],
        "timestamp": row["timestamp"],
        "hlc": row["hlc"],
        "version": row["version"],
    }
    properties: dict[str, Any] = row.get("properties") or {}
    props.update({k: v for k, v in properties.items() if v is not None})
    extras: list[tuple[str, str]] = row.get("extras") or []
    if extras:
        props["extras"] = dict(extras)
    return props
