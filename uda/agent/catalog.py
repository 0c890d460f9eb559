"""The catalogue of agent tools: one table that every surface (pydantic-ai, MCP) is built from.

A surface that listed its own tools would drift from the others; this table names each
tool once, with the description the model reads and the models of its arguments and answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from uda.agent import aggregate as aggregation
from uda.agent import data_tools, tools
from uda.agent.aggregate import AggregateAnswer, AggregateArgs
from uda.agent.data_models import (
    DiscoverPathsArgs,
    ExportAnswer,
    ExportArgs,
    FilterPathsAnswer,
    OperatorsAnswer,
    OperatorsArgs,
)
from uda.agent.deps import UDADeps
from uda.agent.models import (
    AutoSearchArgs,
    ElementTypesAnswer,
    ExpandAnswer,
    ExpandArgs,
    FilterFieldsAnswer,
    FindArgs,
    GetResultArgs,
    HybridSearchArgs,
    ListFieldsArgs,
    NextPageArgs,
    NoArgs,
    QueryHistory,
    RefineArgs,
    RelationsAnswer,
    ReopenArgs,
    ResultDetail,
    SearchAnswer,
    SearchArgs,
    SemanticSearchArgs,
)

A = TypeVar("A", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True, kw_only=True)
class ToolSpec(Generic[A, R]):
    """One tool: its name, what the model is told, its argument and answer models."""

    name: str
    description: str
    args_model: type[A]
    result_model: type[R]
    run: Callable[[UDADeps, A], Awaitable[R]]
    writes_files: bool = False  # only into the deployment's export folder (`export_query`)


def _spec_of(
    run: Callable[[UDADeps, A], Awaitable[R]], args: type[A], result: type[R], description: str
) -> ToolSpec[A, R]:
    return ToolSpec(
        name=run.__name__, description=description, args_model=args, result_model=result, run=run
    )


_SEARCH_RETURNS = (
    " Returns a query_id (for refine_search and get_result), the strategy used and why, "
    "and hits: element_id, type, name, score, a snippet and linked context nodes."
)

TOOLS: tuple[ToolSpec[Any, Any], ...] = (
    _spec_of(
        tools.auto_search,
        AutoSearchArgs,
        SearchAnswer,
        "Search the knowledge base, choosing how from the query: exact words for quoted "
        "phrases, identifiers and names; meaning for questions and concepts. Start here."
        + _SEARCH_RETURNS,
    ),
    _spec_of(
        tools.search,
        SearchArgs,
        SearchAnswer,
        "Search with the default fusion of meaning, exact words and graph centrality."
        + _SEARCH_RETURNS,
    ),
    _spec_of(
        tools.semantic_search,
        SemanticSearchArgs,
        SearchAnswer,
        "Search by meaning only; use for paraphrased questions and concepts." + _SEARCH_RETURNS,
    ),
    _spec_of(
        tools.hybrid_search,
        HybridSearchArgs,
        SearchAnswer,
        "Search by meaning and exact words, text_weight setting the balance (0 meaning "
        "only, 1 exact words only)." + _SEARCH_RETURNS,
    ),
    _spec_of(
        tools.find_elements,
        FindArgs,
        SearchAnswer,
        "List every element matching filters (no query text), ordered by order_by "
        '("-timestamp" for newest first): "every accepted decision since March". Pages '
        "with next_page.",
    ),
    _spec_of(
        tools.next_page,
        NextPageArgs,
        SearchAnswer,
        "The next page of an earlier search or find_elements whose answer said more: true. "
        "Returns a new query_id.",
    ),
    _spec_of(
        tools.reopen_query,
        ReopenArgs,
        SearchAnswer,
        "A search saved in the store, by this or an earlier conversation, answered again as "
        "it was (the same results, whatever was written since): give the saved_id an earlier "
        "answer carried. Pages with next_page.",
    ),
    _spec_of(
        tools.refine_search,
        RefineArgs,
        SearchAnswer,
        "Run an earlier search again with a new query, added or removed filters, other "
        "element types, limit or depth. Returns a new query_id.",
    ),
    _spec_of(
        tools.get_result,
        GetResultArgs,
        ResultDetail,
        "Show one result of an earlier search in full: every property, every context node "
        "and how each retrieval leg ranked it. Long text comes clipped, `truncated` giving "
        "full lengths; pass fields=['text'] to read it whole.",
    ),
    _spec_of(
        tools.expand,
        ExpandArgs,
        ExpandAnswer,
        "Show an element's graph neighbourhood (what it is part of, governed by, authored "
        "by, and what links to it), by element_id.",
    ),
    _spec_of(
        tools.list_queries,
        NoArgs,
        QueryHistory,
        "List this conversation's searches with their query_ids, to refer back to them.",
    ),
    _spec_of(
        tools.list_element_types,
        NoArgs,
        ElementTypesAnswer,
        "List the element types: which are searchable, their fields and relations.",
    ),
    _spec_of(
        tools.list_relations,
        NoArgs,
        RelationsAnswer,
        "List the relation types and which element types each links.",
    ),
    _spec_of(
        tools.list_filter_fields,
        ListFieldsArgs,
        FilterFieldsAnswer,
        "List the fields search filters may use, with their types, allowed values and "
        "operators, and the filter syntax. Call before filtering.",
    ),
    _spec_of(aggregation.aggregate, AggregateArgs, AggregateAnswer, aggregation.DESCRIPTION),
    _spec_of(
        data_tools.discover_filter_paths,
        DiscoverPathsArgs,
        FilterPathsAnswer,
        "List every path filters and where may name, relation paths included (partOf.name, "
        "~governedBy.status), with its type, valid operators, whether order_by takes it and, "
        "for paths with few values, the values you may see with their counts.",
    ),
    _spec_of(
        data_tools.get_valid_operators,
        OperatorsArgs,
        OperatorsAnswer,
        "List the filter operators each field type takes and what each means, or those of "
        "one path.",
    ),
    replace(
        _spec_of(
            data_tools.export_query,
            ExportArgs,
            ExportAnswer,
            "Write every match of an earlier search or find_elements (by query_id, up to "
            "max_rows) to a CSV, Parquet or Arrow file in the deployment's export folder; "
            "refused where no export folder is configured.",
        ),
        writes_files=True,
    ),
)

INSTRUCTIONS = (
    "You answer from a knowledge base through the UDA tools. Search before answering; "
    "auto_search is a good first call. Build filters only from fields list_filter_fields "
    "names. Refer back to earlier searches by query_id (refine_search, get_result) instead "
    "of repeating them. Answer only from what the tools returned and cite element_ids. The "
    "caller's clearance is fixed: an empty result means nothing you may see matched, not "
    "that nothing exists — never guess what might be hidden."
)
