"""The agent tools themselves, free of any agent framework: `(deps, args) -> answer`.

`uda.agent.catalog.TOOLS` lists them; `uda.agent.toolset` turns that table into
pydantic-ai tools and `uda.agent.mcp_server` into MCP tools, so both surfaces offer the
same tools with the same schemas. Every tool is read-only. Mistakes a model can fix raise
`UserError` (the surfaces turn it into a retry or an error result carrying the message);
backend failures propagate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from uda.agent import answers, discovery
from uda.agent.deps import SearchResponse, UDADeps
from uda.agent.models import (
    AutoSearchArgs,
    ContextNode,
    ElementTypesAnswer,
    ExpandAnswer,
    ExpandArgs,
    FilterFieldsAnswer,
    FilterSpec,
    FindArgs,
    GetResultArgs,
    HybridSearchArgs,
    LegRank,
    ListFieldsArgs,
    Mention,
    NextPageArgs,
    NoArgs,
    QueryHistory,
    QuerySummary,
    RefineArgs,
    RelationsAnswer,
    ReopenArgs,
    ResultDetail,
    SearchAnswer,
    SearchArgs,
    SemanticSearchArgs,
)
from uda.agent.router import route_query, strategy_weights
from uda.agent.state import QueryRecord, QuerySpec, UnknownQueryError
from uda.errors import InvalidRequestError, UnknownFilterFieldError

if TYPE_CHECKING:
    from uda.query.contracts import SearchOptions, SearchResult
    from uda.query.fusion import Leg


async def run_search(
    deps: UDADeps, spec: QuerySpec, refined_from: str | None = None
) -> SearchAnswer:
    """Run a search for this caller, remember it, and answer compactly.

    Raises:
        UserError: a bad filter (with a suggestion), element type, or other request field.
    """
    discovery.check_filter_fields(spec.filters)
    options: SearchOptions = {} if spec.depth is None else {"expand_depth": spec.depth}
    if spec.order_by is not None:
        options["order_by"] = spec.order_by
    if spec.cursor is not None:
        options["cursor"] = spec.cursor
    if spec.element_types is not None:
        options["element_types"] = list(spec.element_types)
    weights = strategy_weights(spec.strategy, spec.text_weight)
    if weights is not None:
        options["weights"] = {leg.value: w for leg, w in weights.items()}
    response = await deps.search(
        spec.query, limit=spec.limit, context_filters=_context_filters(spec), options=options
    )
    return _remember(deps, spec, response, weights, refined_from=refined_from)


def _remember(
    deps: UDADeps,
    spec: QuerySpec,
    response: SearchResponse,
    weights: Mapping[Leg, float] | None,
    *,
    refined_from: str | None = None,
    reopened: bool = False,
) -> SearchAnswer:
    """Keep a page in the conversation under a new query id, and answer it compactly."""
    results = tuple(response.results)
    try:
        explanation = response.explain()
    except ValueError:  # a remote response may come without one; ranks are then unknown
        explanation = None
    legs = {
        r.element_id: {
            leg.value: LegRank(rank=e.rank, contribution=round(e.contribution, 6))
            for leg, e in r.legs.items()
        }
        for r in (explanation.results if explanation is not None else ())
    }
    linked = {
        r.element_id: r.entities
        for r in (explanation.results if explanation is not None else ())
        if r.entities
    }
    applied = explanation.plan.weights if explanation is not None else weights or {}
    record = QueryRecord(
        query_id=deps.conversation.next_id(),
        spec=spec,
        clearance=deps.clearance,
        weights={leg.value: w for leg, w in applied.items()},
        results=results,
        legs=legs,
        linked=linked,
        refined_from=refined_from,
        next_cursor=response.next_cursor,
        saved_id=response.query_id,
        reopened=reopened,
        degraded=tuple(d.describe() for d in response.degraded),
    )
    deps.conversation.add(record)
    return answers.search_answer(record)


def _context_filters(spec: QuerySpec) -> dict[str, Any]:
    """The flat filters and the tree, ANDed (the grammar validates both, naming the path)."""
    if not spec.where:
        return dict(spec.filters)
    if not spec.filters:
        return dict(spec.where)
    return {"$and": [dict(spec.where), dict(spec.filters)]}


def _spec(args: SearchArgs, **how: Any) -> QuerySpec:
    return QuerySpec(
        query=args.query,
        limit=args.limit,
        filters=dict(args.filters),
        where=args.where or None,
        element_types=None if args.element_types is None else tuple(args.element_types),
        depth=args.depth,
        **how,
    )


async def search(deps: UDADeps, args: SearchArgs) -> SearchAnswer:
    """The read seam with the profile's default fusion of every leg."""
    how = "the default fusion of meaning, exact words and graph centrality"
    return await run_search(deps, _spec(args, strategy="default", reason=how))


async def semantic_search(deps: UDADeps, args: SemanticSearchArgs) -> SearchAnswer:
    """Dense retrieval only: the lexical leg's weight is zero, so it does not run."""
    return await run_search(
        deps, _spec(args, strategy="semantic", reason="requested: meaning only")
    )


async def hybrid_search(deps: UDADeps, args: HybridSearchArgs) -> SearchAnswer:
    """Dense and lexical retrieval in the ratio `1 - text_weight : text_weight`."""
    why = f"requested: hybrid with text_weight {args.text_weight:g}"
    spec = _spec(args, strategy="hybrid", text_weight=args.text_weight, reason=why)
    return await run_search(deps, spec)


async def auto_search(deps: UDADeps, args: AutoSearchArgs) -> SearchAnswer:
    """Let `route_query` choose the strategy; the answer says which and why."""
    route = route_query(args.query)
    spec = _spec(
        args,
        strategy=route.strategy,
        text_weight=route.text_weight,
        reason="auto: " + route.reason,
        routed=True,
    )
    return await run_search(deps, spec)


async def find_elements(deps: UDADeps, args: FindArgs) -> SearchAnswer:
    """A structured retrieval: every visible match of the filters, in `order_by` order."""
    if not args.filters and not args.where and args.order_by is None:
        raise InvalidRequestError(
            "find_elements needs filters, where or order_by (to list everything in some "
            'order, give order_by, e.g. "-timestamp")',
            field="filters",
        )
    spec = QuerySpec(
        query=None,
        limit=args.limit,
        filters=dict(args.filters),
        where=args.where or None,
        element_types=None if args.element_types is None else tuple(args.element_types),
        depth=args.depth,
        strategy="structured",
        reason="requested: every match, ordered by " + (args.order_by or "element_id"),
        order_by=args.order_by,
    )
    return await run_search(deps, spec)


async def next_page(deps: UDADeps, args: NextPageArgs) -> SearchAnswer:
    """The page after an earlier one: the same request, resumed by its cursor."""
    parent = deps.conversation.get(args.query_id, deps.clearance)
    if parent.next_cursor is None:
        raise UnknownQueryError(
            f"{parent.query_id} was the last page: there is nothing after it",
            field="query_id",
            value=parent.query_id,
        )
    spec = replace(parent.spec, cursor=parent.next_cursor, page=parent.spec.page + 1)
    if parent.reopened and parent.saved_id is not None:
        response = await deps.rerun(
            parent.saved_id, cursor=parent.next_cursor, limit=parent.spec.limit
        )
        return _remember(deps, spec, response, None, refined_from=parent.query_id, reopened=True)
    return await run_search(deps, spec, refined_from=parent.query_id)


async def reopen_query(deps: UDADeps, args: ReopenArgs) -> SearchAnswer:
    """A search saved in the store (by this or an earlier conversation), as it was answered.

    Its first page comes back from the store's stamp it was first answered at, narrowed to
    this caller's clearance; next_page continues it.
    """
    response = await deps.rerun(args.saved_id, limit=args.limit)
    try:
        asked = response.explain().plan.request
    except ValueError:  # a remote response may come without its plan
        asked = None
    spec = QuerySpec(
        query=None if asked is None else asked.query,
        limit=args.limit or (asked.limit if asked is not None else len(response.results)),
        filters={},
        where=None if asked is None or not asked.context_filters else dict(asked.context_filters),
        element_types=(
            None if asked is None or asked.element_types is None else tuple(asked.element_types)
        ),
        depth=None if asked is None else asked.expand_depth,
        strategy="structured" if asked is not None and asked.query is None else "default",
        reason=f"reopened: saved search {args.saved_id}, answered as it was",
        order_by=None if asked is None else asked.order_by,
    )
    return _remember(deps, spec, response, None, reopened=True)


async def refine_search(deps: UDADeps, args: RefineArgs) -> SearchAnswer:
    """An earlier search with a new query, added or removed filters, or other settings."""
    parent = deps.conversation.get(args.query_id, deps.clearance)
    base = parent.spec
    missing = [f for f in args.remove_filters if f not in base.filters]
    if missing:
        raise UnknownFilterFieldError(
            f"{parent.query_id} has no filters named {', '.join(map(repr, missing))}; "
            f"its filters: {', '.join(base.filters) or 'none'}",
            field="remove_filters",
            value=missing,
        )
    filters: dict[str, FilterSpec] = {
        k: v for k, v in base.filters.items() if k not in args.remove_filters
    }
    filters.update(args.add_filters)
    query = args.query or base.query
    strategy, text_weight, reason = base.strategy, base.text_weight, base.reason
    order_by = base.order_by
    if base.query is None and query is not None:
        # A query turns a structured retrieval into a ranked search: relevance orders it.
        strategy, reason, order_by = "default", "refined with a query: ranked by relevance", None
    if base.routed and query is not None and query != base.query:
        route = route_query(query)
        strategy, text_weight, reason = route.strategy, route.text_weight, "auto: " + route.reason
    element_types = base.element_types if args.element_types is None else tuple(args.element_types)
    spec = QuerySpec(
        query=query,
        limit=base.limit if args.limit is None else args.limit,
        filters=filters,
        where=base.where if args.where is None else (args.where or None),
        element_types=element_types,
        depth=base.depth if args.depth is None else args.depth,
        strategy=strategy,
        text_weight=text_weight,
        reason=reason,
        routed=base.routed,
        order_by=order_by,
    )
    return await run_search(deps, spec, refined_from=parent.query_id)


async def get_result(deps: UDADeps, args: GetResultArgs) -> ResultDetail:
    """One result of an earlier search in full: properties, every context node, leg ranks."""
    record = deps.conversation.get(args.query_id, deps.clearance)
    result = record.result(args.rank)
    wanted = frozenset(args.fields or ())
    if wanted:
        result = await _with_fields(deps, result, sorted(wanted))
    properties, truncated = answers.detail_properties(result, wanted)
    return ResultDetail(
        query_id=record.query_id,
        rank=args.rank,
        element_id=result.element_id,
        element_type=result.element_type,
        name=result.name,
        score=round(result.score, 5),
        snippet=answers.snippet(result.snippet, 2000),
        properties=properties,
        truncated=truncated,
        context=[
            ContextNode(
                **answers.context_ref(n).model_dump(), properties=dict(n.get("properties") or {})
            )
            for n in result.context_nodes
        ],
        legs=dict(record.legs.get(result.element_id, {})),
        linked_to=list(record.linked.get(result.element_id, ())),
    )


async def _with_fields(deps: UDADeps, result: SearchResult, fields: list[str]) -> SearchResult:
    """The result read again with `fields` whole, through the read seam (clearance holds).

    A structured retrieval of that one element (no query, so nothing is embedded); its
    score is the earlier search's. When it is no longer there to read (deleted since, or
    out of this caller's sight), the earlier copy stands.
    """
    response = await deps.search(
        None,
        limit=1,
        context_filters={"element_id": result.element_id},
        options={"fields": fields},
    )
    found = response.results
    return found[0].model_copy(update={"score": result.score}) if found else result


async def expand(deps: UDADeps, args: ExpandArgs) -> ExpandAnswer:
    """An element's neighbourhood up to `depth` hops, through a search for that one element.

    Searching (with an `element_id` filter) rather than reading the graph directly keeps
    every check of the read seam — clearance on the element and on each neighbour, the
    newest visible version — in force. A context-only element (a person, a repository) is
    not searchable; for those the answer lists where it appeared in earlier results.
    """
    mentions = deps.conversation.mentions(args.element_id, deps.clearance)
    known_name = next((r.name for _, _, r, node in mentions if node is None and r.name), None)
    response = await deps.search(
        known_name or args.element_id,
        limit=1,
        context_filters={"element_id": args.element_id},
        options={"expand_depth": args.depth},
    )
    seen_as_context = [
        Mention(
            query_id=record.query_id,
            rank=rank,
            element_id=result.element_id,
            name=result.name,
            relation=str(node["relation"]),
            direction=str(node["direction"]),
        )
        for record, rank, result, node in mentions
        if node is not None
    ]
    found = response.results
    if found:
        element = found[0]
        return ExpandAnswer(
            element_id=element.element_id,
            found=True,
            element_type=element.element_type,
            name=element.name,
            snippet=answers.snippet(element.snippet),
            context=[answers.context_ref(n) for n in element.context_nodes],
            mentioned_in=seen_as_context,
        )
    if seen_as_context:
        node = next(node for _, _, _, node in mentions if node is not None)
        return ExpandAnswer(
            element_id=args.element_id,
            found=True,
            element_type=str(node.get("element_type")),
            name=None if node.get("name") is None else str(node.get("name")),
            mentioned_in=seen_as_context,
            note="a context-only element (not searchable itself); these results link to it",
        )
    return ExpandAnswer(
        element_id=args.element_id,
        found=False,
        note="no element with this id that you may see; use element ids from search results",
    )


async def list_queries(deps: UDADeps, args: NoArgs) -> QueryHistory:
    """The searches of this conversation, to refer back to by query_id."""
    records = deps.conversation.records(deps.clearance)
    return QueryHistory(
        current=records[-1].query_id if records else None,
        queries=[
            QuerySummary(
                query_id=r.query_id,
                query=r.spec.query,
                strategy=r.spec.strategy,
                filters=dict(r.spec.filters),
                hits=len(r.results),
                refined_from=r.refined_from,
            )
            for r in records
        ],
    )


async def list_element_types(deps: UDADeps, args: NoArgs) -> ElementTypesAnswer:
    """Every element type: searchable or context only, fields, outgoing relations."""
    return discovery.element_type_infos()


async def list_relations(deps: UDADeps, args: NoArgs) -> RelationsAnswer:
    """Every relation type and the element types it links."""
    return discovery.relation_infos()


async def list_filter_fields(deps: UDADeps, args: ListFieldsArgs) -> FilterFieldsAnswer:
    """The fields filters may use, with types, allowed values and operators."""
    return discovery.filter_fields(args.element_type)
