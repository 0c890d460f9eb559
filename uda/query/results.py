"""Search results: Arrow record batches first, everything else wraps them.

`to_batches()` is the one primitive; `to_arrow()`, `results`, `to_elements()` and
`to_pandas()` are views of it (the LanceDB pattern). The schema is `ontology.result_schema()`;
its rows are built from stored states in `uda.query.rows`. `ResultViews` holds the views, so
that a response computed here (`SearchResponse`) and one rebuilt from an Arrow table that
crossed a wire (`ArrowResponse`) behave the same.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ontology import Element, element_class, result_schema
from ontology.elements import ContextLink
from uda.query.contracts import SearchResult
from uda.query.deadlines import Degradation
from uda.query.explanation import (
    Explanation,
    LegExplanation,
    ResultExplanation,
    degradations_from,
)
from uda.query.fusion import Leg
from uda.query.projection import node_truncations
from uda.query.rows import RankedResult, Rows, record_batch

if TYPE_CHECKING:
    from connectors.contract.system_of_record import StoredState
    from uda.query.plan import Plan


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
        snippet_offset=row.get("snippet_offset"),
        truncated=_truncated(row),
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


ElementKey = tuple[str, int, tuple[tuple[str, int], ...]]
"""An element as one response holds it: id, version, and what of it the answer clipped."""


def typed_element(
    row: Mapping[str, Any], known: dict[ElementKey, Element] | None = None
) -> Element:
    """One row of the result schema as a typed element with its context attached.

    `known` holds the elements of one response by element id, version and clipping, shared
    between its rows: each is validated from a row the first time it is met and copied
    after that (a context node does not depend on the result it hangs off). Entries are
    never handed out themselves, so attaching context to one result changes no other. An
    element the answer clipped says so (`Element.truncated`).
    """
    memo: dict[ElementKey, Element] = {} if known is None else known
    own, by_node = node_truncations(_truncated(row))

    def element(node: Mapping[str, Any], clipped: dict[str, int]) -> Element:
        key = (node["element_id"], node["version"], tuple(sorted(clipped.items())))
        found = memo.get(key)
        if found is None:
            found = memo[key] = _element_from(node).with_truncated(clipped)
        # A new object per occurrence, as validating gave: `extras` is the one mutable value.
        return found.model_copy(update={"extras": dict(found.extras)})

    links = [
        ContextLink(
            relation=n["relation"],
            direction=n["direction"],
            depth=n["depth"],
            element=element(n, by_node.get(index, {})),
        )
        for index, n in enumerate(row["context_nodes"])
    ]
    own.pop("snippet", None)  # the snippet is not a field of the element
    return element(row, own).with_context(links)


def _truncated(row: Mapping[str, Any]) -> dict[str, int]:
    """A row's `truncated` map (rows from before it existed have none)."""
    pairs: list[tuple[str, int]] = row.get("truncated") or []
    return dict(pairs)


class ResultViews(ABC):
    """Every view of a response, derived from its one primitive, `to_batches()`.

    Attributes:
        next_cursor: pass it back as `cursor` (with the same request) for the next page;
            None on the last page.
        query_id: the saved query this page belongs to (`rerun(query_id)` answers it again).
    """

    next_cursor: str | None = None
    query_id: str | None = None

    @property
    def degraded(self) -> list[Degradation]:
        """Backends left out of this answer, and why (empty: every backend answered).

        A degraded answer is as safe as a full one (clearance is enforced the same), only
        less complete: without the graph, results have no context and no centrality.
        """
        return []

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

    @cached_property
    def _elements(self) -> dict[ElementKey, Element]:
        # Filled from the rows by `typed_element`, so that each element of the response is
        # validated once however often it occurs and `to_elements()` is called.
        return {}

    @property
    def results(self) -> list[SearchResult]:
        """The results as `SearchResult` models, best first."""
        seen: dict[tuple[str, int], dict[str, Any]] = {}
        return [search_result(row, seen) for row in self._rows]

    def to_elements(self) -> list[Element]:
        """Typed ontology objects with their context attached (`doc.repository.name`)."""
        known = self._elements
        return [typed_element(row, known) for row in self._rows]

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

    def __init__(self, *, plan: Plan, ranked: Sequence[RankedResult], more: bool = False) -> None:
        self.plan = plan
        self._ranked = list(ranked)
        self._builder = Rows(plan.projection)
        self.more = more
        """Whether another page follows (the planner then sets `next_cursor`)."""
        self.next_cursor = None

    @property
    def degraded(self) -> list[Degradation]:
        """Backends left out of this answer, and why (empty: every backend answered)."""
        return list(self.plan.degraded)

    def last_state(self) -> StoredState | None:
        """The state of the page's last result (where a structured next page starts)."""
        return self._ranked[-1].state if self._ranked else None

    def __len__(self) -> int:
        return len(self._ranked)

    def to_batches(self) -> pa.RecordBatchReader:
        """The results as Arrow record batches in `ontology.result_schema()`.

        A degraded answer says so in the schema metadata (`DEGRADED_KEY`, a JSON list).
        """
        schema = result_schema()
        batch = record_batch(self._rows)
        if self.plan.degraded:
            metadata = dict(schema.metadata or {})
            metadata[DEGRADED_KEY] = json.dumps([d.to_dict() for d in self.plan.degraded]).encode()
            schema = schema.with_metadata(metadata)  # pyright: ignore[reportUnknownMemberType]
            batch = batch.replace_schema_metadata(metadata)  # pyright: ignore[reportUnknownMemberType]
        return pa.RecordBatchReader.from_batches(schema, [batch])

    @cached_property
    def _rows(self) -> list[dict[str, Any]]:
        # The rows the Arrow batch is built from, used as they are: `results` and
        # `to_elements()` need no Arrow round trip (it was most of their cost), and
        # tests/test_arrow_schema.py checks both views equal those of the table.
        return [self._builder.ranked(r) for r in self._ranked]

    @cached_property
    def _elements(self) -> dict[ElementKey, Element]:
        # Building the rows validated every payload already: its elements are reused, and
        # only a state they cannot stand for (or that the answer clipped) is validated
        # again, from its row.
        _ = self._rows
        return {(eid, version, ()): e for (eid, version), e in self._builder.elements().items()}

    def explain(self) -> Explanation:
        """The plan and each leg's raw score, decayed score, rank and contribution."""
        results: list[ResultExplanation] = []
        for r in self._ranked:
            raws = {
                Leg.SEMANTIC: r.semantic_raw,
                Leg.LEXICAL: r.lexical_raw,
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
                    exact=r.exact,
                    boost=r.boost,
                    entities=r.entities,
                    legs={
                        leg: LegExplanation(
                            raw=raws.get(leg),
                            score=scored.get(leg),
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

    @property
    def states(self) -> list[StoredState]:
        """The results' stored states, in order (what an aggregate over a query counts)."""
        return [r.state for r in self._ranked]


class ArrowResponse(ResultViews):
    """A response rebuilt from a result table (and the explanation sent along with it).

    Args:
        table: results in `ontology.result_schema()`, best first.
        explanation: `Explanation.to_dict()` output, or None when none came with the table.
    """

    def __init__(
        self,
        table: pa.Table,
        explanation: Mapping[str, Any] | None = None,
        next_cursor: str | None = None,
        degraded: Sequence[Degradation] = (),
    ) -> None:
        self._table = table
        self._explanation = explanation
        self.next_cursor = next_cursor
        self._degraded = list(degraded) or degraded_from_schema(table.schema)

    @property
    def degraded(self) -> list[Degradation]:
        """Backends left out of this answer, as the side that ran it reported them."""
        return list(self._degraded)

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


DEGRADED_KEY = b"uda.degraded"
"""Schema metadata key of a degraded answer's result batches: the `degraded` list as JSON."""


def degraded_from_schema(schema: pa.Schema) -> list[Degradation]:
    """The degradations a result schema's metadata carries (none: a full answer)."""
    raw = (schema.metadata or {}).get(DEGRADED_KEY)
    return [] if raw is None else degradations_from(json.loads(raw))


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
