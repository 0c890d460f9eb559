"""Compact answers for a model: hits, context references, clipped text.

A model reads every token a tool returns, so results are cut to what it needs to decide
the next step — ids, types, names, scores, a snippet, the linked context — and the rest is
one `get_result` away.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from uda.agent.models import ContextRef, Hit, SearchAnswer
from uda.agent.state import QueryRecord
from uda.query.contracts import SearchResult

SNIPPET_CHARS = 300
PROPERTY_CHARS = 4000
WHOLE_CHARS = 20_000  # `get_result(fields=[...])`: all a model should read at once
CONTEXT_PER_HIT = 6
EMPTY_NOTE = (
    "No results you may see. Try other words, auto_search, fewer filters, or check the "
    "filter fields with list_filter_fields."
)


def snippet(text: str | None, limit: int = SNIPPET_CHARS) -> str:
    """Text on one line, cut at a word boundary to at most `limit` characters."""
    flat = " ".join((text or "").split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rsplit(" ", 1)[0] + "…"


def clip(value: Any, limit: int = PROPERTY_CHARS) -> Any:
    """A property value, long strings cut to `limit` characters."""
    # A document's full text is a property too; the model needs a readable part, not all.
    if isinstance(value, str) and len(value) > limit:
        return value[: limit - 1] + "…"
    return value


def detail_properties(
    result: SearchResult, whole: frozenset[str]
) -> tuple[dict[str, Any], dict[str, int]]:
    """A result's properties for `get_result`, and which are shown clipped (full lengths).

    Properties the call named (`fields`) are shown up to `WHOLE_CHARS`, the others up to
    `PROPERTY_CHARS`; a value the search answer had clipped already keeps its full length.
    """
    everything = "*" in whole
    properties: dict[str, Any] = {}
    truncated: dict[str, int] = {
        path: length for path, length in result.truncated.items() if "[" not in path
    }
    truncated.pop("snippet", None)
    for key, value in result.properties.items():
        limit = WHOLE_CHARS if everything or key in whole else PROPERTY_CHARS
        properties[key] = clip(value, limit)
        if isinstance(value, str) and len(value) > limit:
            truncated.setdefault(key, len(value))
    return properties, truncated


def context_ref(node: Mapping[str, Any]) -> ContextRef:
    """A result's context node (as `SearchResult.context_nodes` holds it), compact."""
    return ContextRef(
        element_id=str(node["element_id"]),
        element_type=str(node["element_type"]),
        name=node.get("name"),
        relation=str(node["relation"]),
        direction=str(node["direction"]),
        depth=int(node["depth"]),
    )


def hit(rank: int, result: SearchResult) -> Hit:
    """A result at `rank`, compact, with its first few context nodes."""
    nodes = result.context_nodes
    return Hit(
        rank=rank,
        element_id=result.element_id,
        element_type=result.element_type,
        name=result.name,
        score=round(result.score, 5),
        snippet=snippet(result.snippet),
        context=[context_ref(n) for n in nodes[:CONTEXT_PER_HIT]],
        more_context=max(0, len(nodes) - CONTEXT_PER_HIT),
    )


def search_answer(record: QueryRecord) -> SearchAnswer:
    """A recorded search as the tools answer it."""
    spec = record.spec
    return SearchAnswer(
        query_id=record.query_id,
        query=spec.query,
        strategy=spec.strategy,
        text_weight=spec.text_weight,
        reason=spec.reason,
        weights=dict(record.weights),
        filters=dict(spec.filters),
        where=None if spec.where is None else dict(spec.where),
        order_by=spec.order_by,
        element_types=None if spec.element_types is None else list(spec.element_types),
        depth=spec.depth,
        refined_from=record.refined_from,
        page=spec.page,
        more=record.next_cursor is not None,
        saved_id=record.saved_id,
        degraded=list(record.degraded),
        hits=[hit(rank, r) for rank, r in enumerate(record.results, start=1)],
        note=_note(record),
    )


def _note(record: QueryRecord) -> str | None:
    notes: list[str] = []
    if record.degraded:
        notes.append(
            "partial answer: " + "; ".join(record.degraded) + ". Try again shortly for a full one."
        )
    if not record.results:
        notes.append(EMPTY_NOTE)
    elif record.next_cursor is not None:
        notes.append(f"more results follow: next_page with query_id {record.query_id!r}")
    return " ".join(notes) or None
